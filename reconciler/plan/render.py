"""The plan and the apply result in words: text renderers over their JSON forms only.

``render_plan(data)`` reads a plan's JSON form (``plan_to_json``) and never recomputes the
diff. Symbols (CONTRACT §4): ``+`` create, ``~`` update in place, ``-/+`` replace, ``-``
delete, ``=`` unchanged (only with ``verbose``); a replace held until its run ends
(``plan.held``) is ``-/+ NAME  replace, held: WHY``. Fields changed in the files are listed under
their run, each that forces a replace marked ``# forces replace``; fields changed on the
cluster since the last apply (drift) are listed apart. Then the summary line:
``Plan: N to create, N to update, N to replace, N to delete.`` Secrets and alerts declared in
astra.yaml that change (``plan.resources``) are listed after the runs (``+ secret hf-token``,
``~ secret hf-token (changed)``, ``~ alert failures`` and its fields), never with a value, and
counted apart at the end of the summary line.

``render_apply(data)`` reads an apply result's JSON form (``ApplyResult.to_json``); its totals
count every run the apply handled.
Pure: no I/O; everything printed is sorted.
"""

from __future__ import annotations

import json
from typing import Any

from .cost import describe_ask, describe_cost, describe_spend
from .resources import resource_lines

__all__ = ["ACTION_WORDS", "SYMBOLS", "outlook_line", "render_apply", "render_plan", "summary_line"]

SYMBOLS = {"create": "+", "update": "~", "replace": "-/+", "delete": "-", "noop": "="}
ACTION_WORDS = {
    "create": "create",
    "update": "update in place",
    "replace": "replace",
    "delete": "delete",
    "noop": "unchanged",
}


def summary_line(summary: dict[str, int], resources: Any = ()) -> str:
    """``Plan: N to create, …`` of the runs; then, when the plan changes secrets or alerts, how
    many of each action (``; secrets and alerts: 1 to create, 1 to update.``)."""
    line = (
        f"Plan: {summary.get('create', 0)} to create, {summary.get('update', 0)} to update, "
        f"{summary.get('replace', 0)} to replace, {summary.get('delete', 0)} to delete."
    )
    if not resources:
        return line
    counted = {a: sum(1 for r in resources if r["action"] == a) for a in ("create", "update", "delete")}
    said = ", ".join(f"{n} to {a}" for a, n in counted.items() if n)
    return f"{line[:-1]}; secrets and alerts: {said}."


def outlook_line(change: dict[str, Any]) -> str | None:
    """``would start: 2 machines x 8 GPUs, …`` (or ``would wait: why``, ``would fail: why``) for a
    create or replace whose plan holds the cluster's answer; ``None`` when it holds none."""
    o = change.get("outlook")
    if not o or change["action"] not in ("create", "replace"):
        return None
    return f"would {o['kind']}: {o['words']}"


def _value(field: dict[str, Any], side: str) -> str:
    if side not in field:
        return "(absent)"
    return json.dumps(field[side], ensure_ascii=False, sort_keys=True)


def _field_line(field: dict[str, Any]) -> str:
    line = f"{field['path']}: {_value(field, 'before')} -> {_value(field, 'after')}"
    if field["forces_replace"]:
        line += "  # forces replace"
    return line


def render_plan(data: dict[str, Any], *, verbose: bool = False) -> str:
    """The plan as a person reads it (see the module docstring)."""
    lines = [f"Source {data['source']} on {data['cluster']}", ""]
    drifted: list[tuple[str, dict[str, Any]]] = []
    shown = 0
    for change in sorted(data["changes"], key=lambda c: c["address"]):
        action = change["action"]
        name = change["address"]
        for f in change["fields"]:
            if f["drift"]:
                drifted.append((name, f))
        if action == "noop" and not verbose:
            continue
        shown += 1
        lines += _change_lines(change, data.get("budget"))
    held = sorted(data.get("held", ()), key=lambda c: c["address"])
    for change in held:
        shown += 1
        head = f"{SYMBOLS['replace']} {change['address']}  replace, held: {change['reason']}"
        lines.append(head + (f"  ({change['file']})" if change["file"] else ""))
        lines += [f"    {_field_line(f)}" for f in change["fields"] if not f["drift"]]
    if drifted:
        if shown:
            lines.append("")
        lines.append("Drift: changed on the cluster since the last apply; applying sets them back:")
        for name, f in sorted(drifted, key=lambda x: (x[0], x[1]["path"])):
            lines.append(f"  {name}: {_field_line(f)}")
    if data["not_pruned"]:
        if shown or drifted:
            lines.append("")
        names = ", ".join(data["not_pruned"])
        lines.append(f"Not in the files any more, kept (add --prune to delete): {names}")
    if data["forget"]:
        lines.append(f"Gone from the files and the cluster, forgotten: {', '.join(data['forget'])}")
    resources = data.get("resources", ())
    if resources:
        if len(lines) > 2:
            lines.append("")
        lines += resource_lines(resources)
    if data.get("resources_not_pruned"):
        names = ", ".join(data["resources_not_pruned"])
        lines.append(f"Alerts no longer in astra.yaml, kept (add --prune to delete): {names}")
    summary = data["summary"]
    if (
        not any(summary.get(a) for a in ("create", "update", "replace", "delete"))
        and not data["forget"]
        and not resources
    ):
        if len(lines) > 2:
            lines.append("")
        if held:
            n = len(held)
            what = "1 replace is" if n == 1 else f"{n} replaces are"
            lines.append(f"Nothing to do now: {what} held until the run ends (--replace RUN: at once).")
        else:
            lines.append("No changes: the cluster matches the files.")
    lines += ["", summary_line(data["summary"], resources)]
    return "\n".join(lines) + "\n"


def _change_lines(change: dict[str, Any], budget: Any) -> list[str]:
    """One change as the plan says it: its head, why, the fields it sets (drift is said apart),
    what it costs and asks, whom it waits for, and where it would start."""
    action, name = change["action"], change["address"]
    words = ACTION_WORDS[action]
    reruns = change["reason"] == "reruns"
    if reruns:
        words += ", reruns"
    head = f"{SYMBOLS[action]} {name}  {words}"
    if change["file"]:
        head += f"  ({change['file']})"
    lines = [head]
    if change["reason"] and not reruns:
        lines.append(f"    why: {change['reason']}")
    lines += [f"    {_field_line(f)}" for f in change["fields"] if not f["drift"]]
    if change["cost"] is not None and action in ("replace", "delete"):
        lines.append(f"    cost: {describe_cost(change['cost'], action)}")
    spends = describe_spend(change["after"], budget) if action == "create" and budget else None
    if spends:
        lines.append(f"    cost: {spends}")
    asks = describe_ask(change.get("after")) if action == "create" else None
    if asks:
        lines.append(f"    asks: {asks}")
    waits = _waits_for(change.get("after")) if action in ("create", "replace") else None
    if waits:
        lines.append(f"    waits for: {waits}")
    where = outlook_line(change)
    if where:
        lines.append(f"    {where}")
    return lines


def _waits_for(document: Any) -> str | None:
    """``preprocess (Completed), tokenize (Finished)``: the runs a document's run waits for."""
    spec = document.get("spec") if isinstance(document, dict) else None
    deps = spec.get("depends_on") if isinstance(spec, dict) else None
    if not isinstance(deps, list) or not deps:
        return None
    said = [f"{d.get('run')} ({d.get('when', 'Completed')})" for d in deps if isinstance(d, dict)]
    return ", ".join(said) or None


_OUTCOME_WORDS = {
    "created": "created",
    "configured": "updated in place",
    "replaced": "replaced",
    "deleted": "deleted",
    "unchanged": "unchanged",
    "recorded": "recorded in the inventory",
    "forgotten": "forgotten",
    "failed": "FAILED",
    "skipped": "skipped",
}


_ALWAYS = ("created", "configured", "replaced", "deleted")
_OTHERS = ("recorded", "forgotten", "skipped", "failed")


def render_apply(data: dict[str, Any], *, verbose: bool = False) -> str:
    """An apply result as a person reads it: one line per run acted on, then the totals, which
    add up to every run the apply handled (the four changes always; recorded, forgotten,
    skipped and failed when there are any; unchanged)."""
    lines = []
    for entry in sorted(data["entries"], key=lambda e: e["address"]):
        outcome = entry["outcome"]
        if outcome == "unchanged" and not verbose:
            continue
        line = f"{entry['address']}: {_OUTCOME_WORDS[outcome]}"
        if entry.get("message"):
            line += f": {entry['message']}"
        lines.append(line)
    counts = data["counts"]
    # every run handled is counted: the four changes always, then any other outcome that occurred
    # (a resumed apply records the runs an earlier one made; a failed run is counted too)
    shown = [f"{counts.get(k, 0)} {k}" for k in _ALWAYS]
    shown += [f"{counts[k]} {k}" for k in _OTHERS if counts.get(k)]
    shown += [
        f"{n} {k}" for k, n in sorted(counts.items()) if k not in (*_ALWAYS, *_OTHERS, "unchanged") and n
    ]
    word = "Apply complete" if data["result"] == "applied" else "Apply FAILED"
    lines.append(f"{word}: {', '.join(shown)}, {counts.get('unchanged', 0)} unchanged.")
    if data["result"] != "applied" and data.get("error"):
        lines.append(f"error: {data['error']}")
    return "\n".join(lines) + "\n"
