"""Drives on Slurm: folders of the cluster's shared filesystem that an admin names, mounted into jobs.

Owns: the drives table (``parse_drives``: name → folder, the one reading of the table, whether it
comes from the state folder's ``drives.json`` or from a library user; ``drive_problem``: what
is wrong with one entry), what the cluster knows when it maps a run (``SlurmDrives``: the table,
and the node sandbox when there is one), each worker template's mounts (``template_mounts``),
and the two ways a job mounts them: pyxis' ``--container-mounts`` (``container_mounts``, where
images run under pyxis) or a bubblewrap wrapper on the node (``box_line``: the shared
``reconciler.sandbox.NodeSandbox``; the command then runs as ``exec "${ASTRA_BOX[@]}" CMD``).

The refusals' words (an unknown drive, no way to mount) are ``unsupported``'s. Must not touch:
processes, files, clocks: ``records`` reads and writes the table's file, ``commands`` probes
``bwrap``, ``cluster`` puts them together.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.runspec.models import NAME_PATTERN, Run, TaskTemplate
from reconciler.sandbox import Mount, NodeSandbox

__all__ = [
    "NO_SANDBOX_LOOKED_FOR",
    "PYXIS_UNSAFE",
    "SlurmDrives",
    "box_line",
    "container_mounts",
    "drive_problem",
    "mounted_drives",
    "parse_drives",
    "template_mounts",
]

#: Why there is no node sandbox when nobody looked for one (a pure mapping given no facts).
NO_SANDBOX_LOOKED_FOR = "no bubblewrap (bwrap) was looked for"
#: The characters pyxis' ``--container-mounts=SRC:DST[:FLAGS][,…]`` cannot carry in a path.
PYXIS_UNSAFE = frozenset(":,")


@dataclass(frozen=True)
class SlurmDrives:
    """What a Slurm cluster knows of drives when it maps a run."""

    #: Each drive's folder on the cluster's shared filesystem, by name.
    folders: Mapping[str, str] = field(default_factory=dict)
    #: The node's sandbox, for jobs whose command runs on the node (no pyxis); ``None``: none.
    sandbox: NodeSandbox | None = None
    #: Why there is no sandbox (words to follow "no sandbox: ").
    no_sandbox: str = NO_SANDBOX_LOOKED_FOR


def drive_problem(name: str, path: str) -> str | None:
    """What is wrong with drive ``name`` at folder ``path`` as an entry of the table, or ``None``."""
    from reconciler.wire.drives import DRIVE_NAME_MAX  # the API's pydantic models: only when asked

    if not re.fullmatch(NAME_PATTERN, name) or len(name) > DRIVE_NAME_MAX:
        return (
            f"drive name {name!r} must be lower-case letters, digits and '-', starting with a letter, "
            f"at most {DRIVE_NAME_MAX} characters"
        )
    if not path.startswith("/"):
        return f"drive {name!r}: its folder must be an absolute path, not {path!r}"
    return None


def parse_drives(data: Any) -> dict[str, str]:
    """The drives table from ``{"drives": {NAME: FOLDER, …}}`` (or the inner mapping alone);
    ``ValueError`` naming the first entry that is not a drive."""
    table = data.get("drives", data) if isinstance(data, Mapping) else data
    if not isinstance(table, Mapping):
        raise ValueError("the drives must map each drive's name to its folder")
    out: dict[str, str] = {}
    for name, path in table.items():
        if not isinstance(name, str) or not isinstance(path, str):
            raise ValueError(f"drive {name!r}: its folder must be text, not {path!r}")
        problem = drive_problem(name, path)
        if problem is not None:
            raise ValueError(problem)
        out[name] = path
    return dict(sorted(out.items()))


def mounted_drives(run: Run) -> set[str]:
    """The names of the drives a run's workers mount (any template's)."""
    templates = [g.task_template for g in run.spec.task_groups or ()]
    if run.spec.task_template is not None:
        templates.append(run.spec.task_template)
    return {ref.name for t in templates for ref in t.datavolume_refs or ()}


def template_mounts(t: TaskTemplate, drives: SlurmDrives) -> list[Mount]:
    """The mounts of a worker template's known drives (an unknown one is ``unsupported``'s error)."""
    return [
        Mount(drives.folders[ref.name], ref.mount_path, ref.mode == "ReadOnly")
        for ref in t.datavolume_refs or ()
        if ref.name in drives.folders
    ]


def container_mounts(mounts: list[Mount]) -> str:
    """`` --container-mounts=SRC:DST[:ro],…`` (pyxis), or nothing without mounts."""
    if not mounts:
        return ""
    each = [f"{m.source}:{m.target}" + (":ro" if m.read_only else "") for m in mounts]
    return " " + shlex.quote("--container-mounts=" + ",".join(each))


def box_line(mounts: list[Mount], drives: SlurmDrives) -> str | None:
    """The bash line that readies the node's sandbox for these mounts (``NodeSandbox.shell``), or
    ``None`` without mounts (the command then runs as it always has)."""
    if not mounts:
        return None
    assert drives.sandbox is not None, "a run with drives and no sandbox is refused before its script"
    return drives.sandbox.shell(mounts)
