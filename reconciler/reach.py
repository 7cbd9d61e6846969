"""What a plan of named files may prune: only what those files held before.

``astra plan plain.yaml --prune`` in a folder plans for the folder's source (its name is the
folder's), but reads one file: a run of a sibling file that is still there is not "no longer in
the files". When every path of a source is a file (no folder), the inventory entries recorded
from other files are out of this plan's reach (``within_reach``): neither pruned, nor forgotten,
nor listed; a run the named files held before and no longer hold is pruned as ever. With a
folder among the paths, the whole source is in reach, as before (a folder's deleted file is
exactly what prune is for). A file is the same file however its path was written (``./runs/a.yaml``,
``runs/a.yaml``, an absolute path): paths are compared resolved against the working folder.

Must not touch: the inventory itself (it returns a narrower view), the plan.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from typing import TypeVar

__all__ = ["only_files", "within_reach"]

E = TypeVar("E")


def only_files(paths: Collection[str]) -> bool:
    """Whether every one of ``paths`` names a file (none a folder, none missing)."""
    return bool(paths) and all(os.path.isfile(p) for p in paths)


def within_reach(
    inventory: Mapping[str, E],
    files_of: Mapping[str, str | None],
    desired: Collection[str],
    read: Collection[str],
) -> Mapping[str, E]:
    """The entries of ``inventory`` a plan of the files ``read`` may touch: the desired runs',
    and those whose recorded file (``files_of``) is one of ``read`` (compared resolved)."""
    here = {os.path.realpath(p) for p in read}
    return {
        n: e
        for n, e in inventory.items()
        if n in desired or ((f := files_of.get(n)) is not None and os.path.realpath(f) in here)
    }
