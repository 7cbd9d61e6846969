"""Normalising a run document before any comparison: where phantom diffs die.

``normalize(doc)`` is applied alike to the desired document (from the files), the last-applied
one (from the source's inventory) and the live one (from the cluster). It returns a new plain
document (dicts, lists, scalars; keys sorted) where:

* only ``metadata.name``, ``metadata.labels``, ``metadata.annotations`` and ``spec`` remain:
  server-owned fields (``status``, ``task_counts``, ``metadata.resource_version``, any other
  metadata the server adds) and the ``template`` reference (already rendered) are dropped;
* ``policy`` becomes ``start`` (they are one field with two names);
* the spec's fixed defaults are filled: ``lifetime: Batch``, every worker template's
  ``restart_policy: OnFailure``, a drive's ``mode: ReadWrite``, a group's ``replicas: 1``;
* quantities are canonical integers (``120Gi`` → 128849018880, ``12h`` → 43200, ``2.0`` → 2);
* ``null`` values and empty maps are dropped (``labels: {}`` says nothing); empty lists stay
  (``args: []`` overrides the image's arguments).

Defaults that depend on the cluster (``start`` when left out, ``on_failure``) are *not*
filled: the three-way diff ignores fields that neither the files nor the last apply set, so a
server that fills them in causes no diff.

``digest(normalized)`` is the canonical digest of a normalised document: sha256 of its
canonical JSON (keys sorted, no spaces, UTF-8, no NaN or infinities), prefixed with
``DIGEST_VERSION`` (bumped whenever ``normalize`` changes what it yields, so that two sides
normalising differently never agree). ``spec_digest(doc)`` is ``digest(normalize(doc))``.
Equal canonical JSON means equal documents, value for value and type for type (``1`` is not
``1.0`` is not ``true``), so two documents with equal digests have no field that ``compare``
(``reconciler.plan.diff``) would find different: the plan's fast path calls them unchanged
without comparing. ``None`` when a document has no canonical form (a NaN, a key that is not a
string, anything JSON would not read back as it is): such a document is never "unchanged".

This is spec knowledge (defaults, canonical quantities): the reconciler normalises the desired,
last-applied and live documents with it, and the control plane digests the documents it
holds with it (``GET /runs?view=summary``): the two meet only through the API.

Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .files import published_schema
from .quantities import parse_bytes, parse_duration

__all__ = ["DIGEST_VERSION", "digest", "normalize", "spec_digest"]

#: Part of every digest: bump it when ``normalize`` changes what it yields.
DIGEST_VERSION = "n1"


def _default(definition: str, field: str) -> Any:
    """A fixed default, as the published schema (generated from the models) states it."""
    return published_schema("run")["definitions"][definition]["properties"][field]["default"]


LIFETIME = _default("Spec", "lifetime")
REPLICAS = _default("TaskGroup", "replicas")
RESTART_POLICY = _default("TaskTemplate", "restart_policy")
VOLUME_MODE = _default("DataVolumeRef", "mode")

#: Fields whose strings are quantities, and how each is read as an integer.
_QUANTITIES = {"memory_bytes": parse_bytes, "time_limit_seconds": parse_duration}


def normalize(doc: Any) -> dict[str, Any]:
    """The comparable form of a run document (see the module docstring)."""
    if not isinstance(doc, dict):
        return {}
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    metadata: dict[str, Any] = {}
    for key in ("annotations", "labels"):  # in key order: every map here is built sorted
        value = _clean(meta.get(key))
        if value:
            metadata[key] = value
    if meta.get("name") is not None:
        metadata["name"] = _sorted(meta["name"])
    spec = doc.get("spec")
    return {"metadata": metadata, "spec": _spec(spec) if isinstance(spec, dict) else {}}


def digest(normalized: Any, *, plain: bool = False) -> str | None:
    """The canonical digest of an already normalised document (see the module docstring).

    ``plain``: the document is known to hold JSON only (string keys; it passed ``validate_data``,
    which refuses anything else), so it is not read back to make sure."""
    try:
        text = json.dumps(
            normalized,
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
            allow_nan=False,
            check_circular=False,
        )
    except (TypeError, ValueError, RecursionError):
        return None  # not a plain JSON document: it has no digest, and is never "unchanged"
    if not plain and json.loads(text) != normalized:
        return None  # a key that is not a string (``{1: …}`` reads back as ``{"1": …}``), a tuple
    return f"{DIGEST_VERSION}:{hashlib.sha256(text.encode()).hexdigest()}"


def spec_digest(doc: Any) -> str | None:
    """``digest(normalize(doc))``: the digest of a run document as any side would normalise it."""
    return digest(normalize(doc))


def _spec(spec: dict[str, Any]) -> dict[str, Any]:
    out = _clean(spec) or {}
    if "policy" in out and "start" not in out:
        out["start"] = out.pop("policy")
    out.setdefault("lifetime", LIFETIME)
    template = out.get("task_template")
    if isinstance(template, dict):
        _worker(template)
    for group in out.get("task_groups") or []:
        if isinstance(group, dict):
            group.setdefault("replicas", REPLICAS)
            if isinstance(group.get("task_template"), dict):
                _worker(group["task_template"])
            _resort(group)
    _resort(out)
    return out


def _worker(template: dict[str, Any]) -> None:
    template.setdefault("restart_policy", RESTART_POLICY)
    for ref in template.get("datavolume_refs") or []:
        if isinstance(ref, dict):
            ref.setdefault("mode", VOLUME_MODE)
            _resort(ref)
    _resort(template)


def _resort(d: dict[str, Any]) -> None:
    """Put a map's keys back in order after defaults were added (its values are sorted already)."""
    keys = list(d)
    if keys != sorted(keys):
        items = sorted(d.items())
        d.clear()
        d.update(items)


def _clean(value: Any, key: str | None = None) -> Any:
    """A deep copy without nulls and empty maps, with quantities as integers, maps' keys sorted.

    One pass: the copy is made in key order, so that nothing has to be sorted again after.
    Exact types are tested first (a document is dicts, lists, strings and numbers): this runs
    for every value of every document a plan reads.
    """
    kind = type(value)
    if kind is str:
        parse = _QUANTITIES.get(key) if key is not None else None
        if parse is None:
            return value
        try:
            return parse(value)
        except ValueError:
            return value
    if kind is dict or (kind is not list and isinstance(value, dict)):
        out = {}
        for k in sorted(value):
            cleaned = _clean(value[k], k)
            if cleaned is None or (type(cleaned) is dict and not cleaned):
                continue
            out[k] = cleaned
        return out
    if kind is list or isinstance(value, list):
        return [_clean(v) for v in value]
    if kind is float and value.is_integer():
        return int(value)
    if isinstance(value, str):  # a subclass of str: as a string
        return _clean(str(value), key)
    return value


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value
