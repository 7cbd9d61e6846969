"""What a source's ``astra.yaml`` declares beside its runs, planned: its secrets and its alerts.

A ``Resource`` is one such change: ``kind`` (``secret`` or ``alert``), its ``name``, its
``action`` (``create``, ``update``, ``delete``; an unchanged one is not planned at all), the
alert's ``fields`` that change (a quiet diff: the paths and their values, which are names and
words, never a secret's value), and ``reason`` (display only: the runs that read a changed
secret). ``after`` is an alert's rule as it will be written (``None`` for a secret: a plan never
holds a secret's value, nor a hash of one; whether one changed is the server's comparison).

The rules:

* **secrets**: the server's answer for each declared value (``POST /secrets:plan``: ``create``,
  ``update`` or ``none``) → ``+ secret NAME``, ``~ secret NAME (changed)``; ``none``: nothing;
* **alerts**: each declared alert against the workspace's alert of that name: absent → create,
  different → update (its changed fields), equal → nothing; an alert of the workspace that this
  source declared before (its ``declared_by`` is the source) and no longer declares → delete,
  only with ``prune`` (otherwise listed in ``not_pruned``). An alert made otherwise (``astra
  alert create``, another source) is never this source's to delete.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .model import ABSENT, FieldChange, Resource

__all__ = [
    "ALERT_FIELDS",
    "Resource",
    "alert_changes",
    "resource_lines",
    "secret_changes",
]

#: The fields of an alert's rule a plan compares (the workspace and name are its address).
ALERT_FIELDS = ("sink", "events", "sources", "labels", "severity", "restarts", "waited", "declared_by")
_SAID = {"create": "+", "update": "~", "delete": "-"}


def secret_changes(planned: Mapping[str, tuple[str, Sequence[str]]]) -> list[Resource]:
    """The secrets whose setting changes something, from the server's answer (name → (change,
    the runs not ended that read it))."""
    out = []
    for name, (change, readers) in sorted(planned.items()):
        if change in ("create", "update"):
            by = f"read by {', '.join(readers)}" if readers and change == "update" else ""
            out.append(Resource("secret", name, change, reason=by))
    return out


def alert_changes(
    declared: Mapping[str, dict[str, Any]],
    live: Mapping[str, dict[str, Any]],
    source: str,
    *,
    prune: bool,
) -> tuple[list[Resource], list[str]]:
    """The alerts' changes, and the alerts this source declared before, kept for want of
    ``prune``. ``declared``: each alert's rule as astra.yaml gives it (``ALERT_FIELDS``, its
    ``declared_by`` the source); ``live``: the workspace's rules by name."""
    out: list[Resource] = []
    kept: list[str] = []
    for name, want in sorted(declared.items()):
        have = live.get(name)
        if have is None:
            out.append(Resource("alert", name, "create", after=want))
            continue
        fields = tuple(
            FieldChange(k, have.get(k, ABSENT), want.get(k, ABSENT), forces_replace=False)
            for k in ALERT_FIELDS
            if have.get(k) != want.get(k)
        )
        if fields:
            out.append(Resource("alert", name, "update", fields, after=want))
    for name, have in sorted(live.items()):
        if name in declared or have.get("declared_by") != source:
            continue
        if prune:
            out.append(Resource("alert", name, "delete", reason="no longer in astra.yaml (--prune)"))
        else:
            kept.append(name)
    return out, kept


def _shown(value: Any) -> str:
    import json

    return "(absent)" if value is ABSENT else json.dumps(value, ensure_ascii=False, sort_keys=True)


def resource_lines(resources: Sequence[Mapping[str, Any]]) -> list[str]:
    """The plan's lines for its secrets and alerts (their JSON forms), by kind then name:
    ``+ secret hf-token``, ``~ secret hf-token (changed; read by train)``, ``+ alert failures``,
    ``~ alert failures`` with each changed field under it, ``- alert old``."""
    lines = []
    for r in sorted(resources, key=lambda r: (r["kind"], r["name"])):
        head = f"{_SAID[r['action']]} {r['kind']} {r['name']}"
        if r["kind"] == "secret" and r["action"] == "update":
            head += f" (changed{'; ' + r['reason'] if r['reason'] else ''})"
        lines.append(head)
        if r["reason"] and r["kind"] != "secret":
            lines.append(f"    why: {r['reason']}")
        for f in r["fields"]:
            before, after = _shown(f.get("before", ABSENT)), _shown(f.get("after", ABSENT))
            lines.append(f"    {f['path']}: {before} -> {after}")
    return lines
