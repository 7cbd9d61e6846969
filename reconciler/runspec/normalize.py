"""Normalising a run document before any comparison: where phantom diffs die.

``normalize(doc)`` is applied alike to the desired document (from the files), the last-applied
one (from the source's inventory) and the live one (from the cluster). It returns a new plain
document (dicts, lists, scalars; keys sorted) where:

* only ``metadata.name``, ``metadata.labels``, ``metadata.annotations`` and ``spec`` remain:
  server-owned fields (``status``, ``task_counts``, ``metadata.resource_version``, any other
  metadata the server adds) and the ``template`` reference (already rendered) are dropped;
* annotations under ``astra.`` (``OWN_PREFIX``: the revision, source and file astra records on
  every run it creates or updates) are dropped: they say who made the run, not what it is, so
  a new commit that leaves a run as it was plans no change to it;
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

import contextlib
import hashlib
import json
from typing import Any

from .files import published_schema
from .quantities import parse_bytes, parse_duration

__all__ = [
    "DIGEST_VERSION",
    "OWN_PREFIX",
    "digest",
    "digest_owned",
    "normalize",
    "normalized_digest",
    "spec_digest",
    "without_own",
]

#: Part of every digest: bump it when ``normalize`` changes what it yields. "n2": annotations
#: under ``astra.`` are dropped.
DIGEST_VERSION = "n2"
#: The prefix of the annotations astra writes itself, which no comparison sees.
OWN_PREFIX = "astra."


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
    return _normalize(doc, [])


def normalized_digest(doc: Any) -> tuple[dict[str, Any], str | None]:
    """``normalize(doc)`` and its digest, made at once (what the load does for every run).

    The canonical JSON is written by orjson (ten times ``json.dumps``) when the document holds
    only what the two write alike: strings, integers, booleans, nulls, maps with string keys
    and lists. A document with a fractional float (their shortest forms differ: ``1e-05`` and
    ``0.00001``), or a value of another type, is digested by ``digest``, the definition."""
    unusual: list[Any] = []
    normalized = _normalize(doc, unusual)
    if not unusual:
        import orjson

        with contextlib.suppress(TypeError):  # a key that is not a string, an integer beyond 64 bits
            text = orjson.dumps(normalized, option=orjson.OPT_SORT_KEYS)
            return normalized, f"{DIGEST_VERSION}:{hashlib.sha256(text).hexdigest()}"
    return normalized, digest(normalized)


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
    return normalized_digest(doc)[1]


def digest_owned(doc: Any) -> str | None:
    """``spec_digest(doc)`` of a document the caller gives up: it is cleaned in place, not
    copied, and its maps are left in any order (orjson sorts the keys as it writes). What a
    forked share of a cold load does with each document it only needs the digest of.

    Anything but plain values (a fractional float, a subclass, a label map that is no map)
    takes ``normalized_digest`` instead, which gives the same answer for a document cleaned in
    part: cleaning it again changes nothing."""
    if type(doc) is not dict:
        return normalized_digest(doc)[1]
    meta = doc.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    metadata: dict[str, Any] = {}
    for key in ("annotations", "labels"):
        value = meta.get(key)
        if value is None:
            continue
        if type(value) is not dict or not _scrub_map(value):
            return normalized_digest(doc)[1]
        if key == "annotations":
            value = _not_own(value)
        if value:
            metadata[key] = value
    name = meta.get("name")
    if name is not None:
        if type(name) is not str:
            return normalized_digest(doc)[1]
        metadata["name"] = name
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        spec = {}  # as normalize has it: no spec, no defaults
    elif type(spec) is not dict or not _scrub_map(spec):
        return normalized_digest(doc)[1]
    else:
        _defaults(spec, ordered=False)
    import orjson

    normalized = {"metadata": metadata, "spec": spec}  # normalize(doc), but for its keys' order
    try:
        text = orjson.dumps(normalized, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # a key that is not a string, an integer beyond 64 bits: as the definition has it
        return digest(normalized)
    return f"{DIGEST_VERSION}:{hashlib.sha256(text).hexdigest()}"


def _normalize(doc: Any, unusual: list[Any]) -> dict[str, Any]:
    """``normalize``; every value ``normalized_digest`` must not give orjson goes into ``unusual``."""
    if not isinstance(doc, dict):
        return {}
    meta: dict[str, Any] = doc["metadata"] if isinstance(doc.get("metadata"), dict) else {}
    metadata: dict[str, Any] = {}
    for key in ("annotations", "labels"):  # in key order: every map here is built sorted
        value = _clean(meta.get(key), unusual)
        if key == "annotations" and type(value) is dict:
            value = _not_own(value)
        if value:
            metadata[key] = value
    name = meta.get("name")
    if name is not None:
        if type(name) is not str:
            unusual.append(name)
        metadata["name"] = _sorted(name)
    spec = doc.get("spec")
    return {"metadata": metadata, "spec": _spec(spec, unusual) if isinstance(spec, dict) else {}}


def _not_own(annotations: dict[str, Any]) -> dict[str, Any]:
    """The annotations without astra's own (``OWN_PREFIX``)."""
    if not any(type(k) is str and k.startswith(OWN_PREFIX) for k in annotations):
        return annotations
    return {k: v for k, v in annotations.items() if not (type(k) is str and k.startswith(OWN_PREFIX))}


def without_own(doc: dict[str, Any]) -> dict[str, Any]:
    """A normalised document without astra's own annotations (what a source's inventory keeps:
    the spec it applied, not the stamp it put on the run)."""
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("annotations"), dict):
        return doc
    kept = _not_own(meta["annotations"])
    if kept is meta["annotations"]:
        return doc
    meta = {k: v for k, v in meta.items() if k != "annotations"}
    if kept:
        meta["annotations"] = kept
    return {**doc, "metadata": dict(sorted(meta.items()))}


def _spec(spec: dict[str, Any], unusual: list[Any]) -> dict[str, Any]:
    return _defaults(_clean_map(spec, unusual), ordered=True)


def _defaults(out: dict[str, Any], *, ordered: bool) -> dict[str, Any]:
    """A cleaned spec with its fixed defaults filled in (its maps put back in key order when
    ``ordered``: a digest alone does not need that, the canonical JSON sorts its keys)."""
    if "policy" in out and "start" not in out:
        out["start"] = out.pop("policy")
    out.setdefault("lifetime", LIFETIME)
    template = out.get("task_template")
    if isinstance(template, dict):
        _worker(template, ordered)
    groups = out.get("task_groups")
    for group in groups if type(groups) is list else ():
        if isinstance(group, dict):
            group.setdefault("replicas", REPLICAS)
            if isinstance(group.get("task_template"), dict):
                _worker(group["task_template"], ordered)
            if ordered:
                _resort(group)
    if ordered:
        _resort(out)
    return out


def _worker(template: dict[str, Any], ordered: bool) -> None:
    template.setdefault("restart_policy", RESTART_POLICY)
    refs = template.get("datavolume_refs")
    for ref in refs if type(refs) is list else ():
        if isinstance(ref, dict):
            ref.setdefault("mode", VOLUME_MODE)
            if ordered:
                _resort(ref)
    if ordered:
        _resort(template)


def _resort(d: dict[str, Any]) -> None:
    """Put a map's keys back in order after defaults were added (its values are sorted already;
    keys that are not all strings stay as they are: such a map has no canonical JSON anyway)."""
    keys = list(d)
    try:
        ordered = sorted(keys)
    except TypeError:
        return
    if keys != ordered:
        items = sorted(d.items())
        d.clear()
        d.update(items)


# The cleaning: a deep copy without nulls and empty maps, with quantities as integers and every
# map's keys sorted, made in one pass (in key order, so that nothing is sorted again after). It
# runs for every value of every document a plan reads, so each map and list is one loop that
# tests exact types inline: a document is dicts, lists, strings and numbers, and only those
# cost a call each. Anything else (a subclass, a fractional float) takes ``_other`` and is noted
# in ``unusual``.


def _clean_map(d: dict[Any, Any], unusual: list[Any]) -> dict[Any, Any]:
    out = {}
    for k in sorted(d):
        v = d[k]
        t = type(v)
        if t is str:
            parse = _QUANTITIES.get(k)
            if parse is not None:
                v = _quantity(parse, v)
        elif t is dict:
            v = _clean_map(v, unusual)
            if not v:
                continue
        elif t is list:
            v = _clean_list(v, unusual)
        elif v is None:
            continue
        elif t is not int and t is not bool:
            v = _other(v, k, unusual)
            if v is None or (type(v) is dict and not v):
                continue
        out[k] = v
    return out


def _clean_list(items: list[Any], unusual: list[Any]) -> list[Any]:
    out = []
    for v in items:
        t = type(v)
        if t is dict:
            v = _clean_map(v, unusual)
        elif t is list:
            v = _clean_list(v, unusual)
        elif t is not str and t is not int and t is not bool and v is not None:
            v = _other(v, None, unusual)
        out.append(v)
    return out


def _other(value: Any, key: Any, unusual: list[Any]) -> Any:
    """A value of none of the plain types: a float, or a subclass of a map, list or string."""
    if type(value) is float and value.is_integer():
        return int(value)
    unusual.append(value)
    if isinstance(value, dict):
        return _clean_map(value, unusual)
    if isinstance(value, list):
        return _clean_list(value, unusual)
    if isinstance(value, str):  # a subclass of str: as a string
        parse = _QUANTITIES.get(key) if key is not None else None
        return _quantity(parse, str(value)) if parse is not None else str(value)
    return value


def _scrub_map(d: dict[Any, Any]) -> bool:
    """``_clean_map`` done in place (keys left in their order); ``False``, part done, at the first
    value that is not plain (see ``digest_owned``)."""
    drop = None
    for k, v in d.items():
        t = type(v)
        if t is str:
            parse = _QUANTITIES.get(k)
            if parse is not None:
                d[k] = _quantity(parse, v)
        elif t is dict:
            if not _scrub_map(v):
                return False
            if not v:
                drop = [*(drop or ()), k]
        elif t is list:
            if not _scrub_list(v):
                return False
        elif v is None:
            drop = [*(drop or ()), k]
        elif t is float and v.is_integer():
            d[k] = int(v)
        elif t is not int and t is not bool:
            return False
    for k in drop or ():
        del d[k]
    return True


def _scrub_list(items: list[Any]) -> bool:
    for i, v in enumerate(items):
        t = type(v)
        if t is dict:
            if not _scrub_map(v):
                return False
        elif t is list:
            if not _scrub_list(v):
                return False
        elif t is float and v.is_integer():
            items[i] = int(v)
        elif t is not str and t is not int and t is not bool and v is not None:
            return False
    return True


#: Each quantity's meaning once parsed, by (parser, text): the runs of a folder repeat a few
#: sizes and limits thousands of times (a cold load of 10,000 parses 20,000, 20 ms). Bounded,
#: so that a folder of distinct ones does not grow it.
_PARSED: dict[tuple[Any, str], Any] = {}
_PARSED_MAX = 4096


def _quantity(parse: Any, value: str) -> Any:
    key = (parse, value)
    found = _PARSED.get(key, _PARSED)
    if found is not _PARSED:
        return found
    try:
        found = parse(value)
    except ValueError:
        found = value
    if len(_PARSED) < _PARSED_MAX:
        _PARSED[key] = found
    return found


def _clean(value: Any, unusual: list[Any]) -> Any:
    """One value cleaned (a map's value, outside any map)."""
    if type(value) is dict:
        return _clean_map(value, unusual)
    if value is None or type(value) in (str, int, bool):
        return value
    if type(value) is list:
        return _clean_list(value, unusual)
    return _other(value, None, unusual)


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value
