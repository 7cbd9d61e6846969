"""A rerun of an array's failed copies: the one home of how it is written and how it is read.

``astra rerun RUN --failed`` (the seeds' troubleshooting, "run only the missing indices in a new
array, mapping its index onto them") makes a new array ``<run>-rerun-<k>`` of only the indices
that did not complete. Its document says so in astra's own annotations (which no comparison
sees, ``normalize.OWN_PREFIX``):

=========================  ================================================================
``astra.rerun-of``          the run it reruns
``astra.rerun-indices``     the original indices, in the new array's order: ``3,7,12``
``astra.rerun-size``        the original array's size
=========================  ================================================================

and every cluster that starts its copies (the control plane's ``scheduler.env``, Slurm's
batch script) gives copy ``i`` the original index ``indices[i]`` as its
``ASTRAEUS_ARRAY_TASK_ID``, ``ASTRAEUS_REPLICA_INDEX`` and ``RANK``, and the original size as
``ASTRAEUS_ARRAY_SIZE`` and ``WORLD_SIZE``: the copy cannot tell it is a rerun.

Pure: no I/O, no clock. Must not touch: which indices failed (the cluster's to say).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "RERUN_INDICES",
    "RERUN_OF",
    "RERUN_SIZE",
    "ArrayMap",
    "array_map",
    "next_rerun_name",
    "rerun_document",
    "whole_rerun_document",
]

RERUN_OF = "astra.rerun-of"
RERUN_INDICES = "astra.rerun-indices"
RERUN_SIZE = "astra.rerun-size"


class ArrayMap:
    """Which original index each copy of a rerun array stands for, and the original size."""

    __slots__ = ("indices", "size")

    def __init__(self, indices: tuple[int, ...], size: int):
        self.indices, self.size = indices, size

    def index(self, rank: int) -> int:
        return self.indices[rank] if 0 <= rank < len(self.indices) else rank


def array_map(annotations: Mapping[str, str] | None) -> ArrayMap | None:
    """The map a rerun array's annotations carry; ``None`` for any other run (or a map that does
    not read: then the copies see their own indices, as in any array)."""
    if not annotations or RERUN_INDICES not in annotations or RERUN_SIZE not in annotations:
        return None
    try:
        indices = tuple(int(i) for i in str(annotations[RERUN_INDICES]).split(","))
        size = int(annotations[RERUN_SIZE])
    except ValueError:
        return None
    if size < 1 or any(not 0 <= i < size for i in indices):
        return None
    return ArrayMap(indices, size)


def next_rerun_name(run: str, existing: Iterable[str]) -> str:
    """``<run>-rerun-<k>``, k one more than the largest taken (from 1)."""
    pattern = re.compile(re.escape(run) + r"-rerun-(\d+)")
    taken = [int(m.group(1)) for n in existing if (m := pattern.fullmatch(n))]
    return f"{run}-rerun-{max(taken, default=0) + 1}"


def _metadata(document: dict[str, Any], name: str) -> dict[str, Any]:
    meta = document.get("metadata") or {}
    kept = {k: v for k, v in meta.items() if k in ("labels", "annotations")}
    notes = {k: v for k, v in (kept.get("annotations") or {}).items() if not k.startswith("astra.")}
    return {"name": name, **({"labels": kept["labels"]} if kept.get("labels") else {}), "annotations": notes}


def whole_rerun_document(document: dict[str, Any]) -> dict[str, Any]:
    """The document that runs a finished run again whole: the same run, without the server's
    fields (astra's own annotations kept: it is still the run its source applied)."""
    meta = document.get("metadata") or {}
    kept = {k: v for k, v in meta.items() if k in ("name", "labels", "annotations")}
    return {"metadata": kept, "spec": copy.deepcopy(document.get("spec") or {})}


def rerun_document(document: dict[str, Any], name: str, indices: Iterable[int]) -> dict[str, Any]:
    """A new array ``name`` of only ``indices`` of the array ``document``, mapped onto them.

    The original's ``max_parallel`` is kept where it still fits (0, no cap, stays 0); a rerun of
    a rerun maps onto the first array's indices and size."""
    spec = copy.deepcopy(document.get("spec") or {})
    array = dict(spec.get("array") or {})
    size = int(array.get("size") or 0)
    wanted = sorted(set(indices))
    earlier = array_map((document.get("metadata") or {}).get("annotations"))
    original = [earlier.index(i) for i in wanted] if earlier else wanted
    cap = int(array.get("max_parallel") or 0)
    spec["array"] = {**array, "size": len(wanted), "max_parallel": min(cap, len(wanted))}
    meta = _metadata(document, name)
    of = (document.get("metadata") or {}).get("name", "")
    meta["annotations"] = {
        **meta["annotations"],
        RERUN_OF: of,
        RERUN_INDICES: ",".join(str(i) for i in original),
        RERUN_SIZE: str(earlier.size if earlier else size),
    }
    meta["annotations"] = dict(sorted(meta["annotations"].items()))
    return {"metadata": meta, "spec": spec}
