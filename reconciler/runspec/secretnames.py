"""The secrets a run document reads, by name, and what is said of their masking: plain code over
a document as the API answers it (no model, no pydantic: ``astra logs`` says it at start-up).
Re-exported by ``runspec.secrets``, the secrets' spec.

Must not touch: the store, processes, HTTP (it is the spec layer: it imports no other part).
"""

from __future__ import annotations

from typing import Any

__all__ = ["MASKING_NET", "masking_note", "secrets_of_document"]


def secrets_of_document(document: dict[str, Any]) -> list[str]:
    """The names of the secrets a run document's workers read, sorted (a document as the API
    answers it: no model needed)."""
    spec = document.get("spec") or {}
    templates = [spec.get("task_template")] + [g.get("task_template") for g in spec.get("task_groups") or []]
    found: set[str] = set()
    for tt in templates:
        if not isinstance(tt, dict):
            continue
        for value in (tt.get("env") or {}).values():
            if isinstance(value, dict) and isinstance(value.get("secret"), str):
                found.add(value["secret"])
        found.update(f["name"] for f in tt.get("secret_files") or [] if isinstance(f, dict) and "name" in f)
    return sorted(found)


#: What masking is not (docs/secrets.md).
MASKING_NET = "a safety net: a worker can still print a value changed"


def masking_note(names: list[str]) -> str:
    """What ``astra logs`` and the console say of a run that reads secrets."""
    which = ("each secret " if len(names) > 1 else "secret ") + ", ".join(names)
    return f"masking is on: the value of {which} is shown as *** ({MASKING_NET})"
