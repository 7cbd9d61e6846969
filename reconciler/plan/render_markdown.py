"""The plan for review: ``render_markdown(data)``, a pull request's comment (``astra plan -o
markdown``), and ``revision_lines(data)``, what the text plan says first of its revision.

Both read the plan's JSON form only (``plan_to_json``), as ``render``'s renderers do, and never
recompute the diff. The comment has: a title with the source and the revision (a rollback and a
dirty working tree said at once), the summary line, a table of the runs that change (symbol,
run, action, file, fields, cost), where each run would start now (when the cluster said), the
drift apart, the secrets and alerts of astra.yaml that change (a ``diff`` block: never a
secret's value), the runs kept because ``--prune`` was not given, and the full field-by-field diff
collapsed in a ``<details>`` block. Everything is sorted; ``|`` and newlines in values are
escaped so a cell stays a cell.

Pure: no I/O.
"""

from __future__ import annotations

import json
from typing import Any

from .cost import describe_cost, describe_spend
from .render import ACTION_WORDS, SYMBOLS, outlook_line, summary_line
from .resources import resource_lines

__all__ = ["render_markdown", "revision_lines"]


def _revision_words(revision: dict[str, Any] | None) -> tuple[str, list[str]]:
    """The revision's id as shown, and what must be said of it (a rollback, a dirty tree)."""
    if not revision:
        return "", []
    shown = str(revision.get("id", ""))
    subject = revision.get("subject")
    if subject:
        shown += f" ({subject})"
    said = []
    if revision.get("rollback"):
        said.append("a rollback: the files as of this older commit, applied without rewriting git")
    if revision.get("dirty"):
        said.append(
            "the working tree differs from this commit (dirty): what is applied is not committed; "
            "CI (CI=true) refuses it without --allow-dirty"
        )
    return shown, said


def revision_lines(data: dict[str, Any]) -> str:
    """``Revision: main@sha1:… (subject)`` and what must be said of it; nothing without one."""
    shown, said = _revision_words(data.get("revision"))
    if not shown:
        return ""
    return "".join([f"Revision: {shown}\n", *(f"  This is {s}.\n" for s in said)])


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _fields(change: dict[str, Any]) -> str:
    paths = [
        f"`{f['path']}`" + (" (forces replace)" if f["forces_replace"] else "") for f in change["fields"]
    ]
    return ", ".join(paths) if paths else ""


def _side(field: dict[str, Any], side: str) -> str:
    return json.dumps(field[side], ensure_ascii=False, sort_keys=True) if side in field else "(absent)"


def render_markdown(data: dict[str, Any]) -> str:
    """The plan as a pull request's comment (see the module docstring).

    Over 60 lines: the comment's sections in the order a reviewer reads them, each a few lines, as
    ``render_plan``'s."""
    shown, said = _revision_words(data.get("revision"))
    lines = [f"### astra plan: source `{data['source']}` on `{data['cluster']}`", ""]
    if shown:
        lines += [f"Revision: `{shown}`", ""]
    lines += [f"> **Note:** this is {s}." for s in said]
    if said:
        lines.append("")
    resources = data.get("resources", ())
    lines += [f"**{summary_line(data['summary'], resources)}**", ""]
    changes = [c for c in sorted(data["changes"], key=lambda c: c["address"]) if c["action"] != "noop"]
    if changes:
        lines += ["| | run | action | file | fields | cost |", "| --- | --- | --- | --- | --- | --- |"]
        for c in changes:
            words = ACTION_WORDS[c["action"]] + (", reruns" if c["reason"] == "reruns" else "")
            cost = (
                describe_cost(c["cost"], c["action"])
                if c["cost"] and c["action"] in ("replace", "delete")
                else ""
            )
            if c["action"] == "create" and data.get("budget"):  # its share of the workspace's budget
                cost = describe_spend(c["after"], data["budget"]) or ""
            cells = [
                f"`{SYMBOLS[c['action']]}`",
                f"`{c['address']}`",
                words,
                c["file"] or "",
                _fields(c),
                cost,
            ]
            lines.append("| " + " | ".join(_cell(x) for x in cells) + " |")
        lines.append("")
    elif not resources:
        lines += ["No changes: the cluster matches the files.", ""]
    if resources:
        lines += ["**Secrets and alerts** (astra.yaml; a secret's value is never shown):", "", "```diff"]
        lines += resource_lines(resources)
        lines += ["```", ""]
    if data.get("resources_not_pruned"):
        names = ", ".join(f"`{n}`" for n in data["resources_not_pruned"])
        lines += [f"Alerts no longer in astra.yaml, kept (add `--prune` to delete): {names}", ""]
    where = [(c["address"], outlook_line(c)) for c in changes]
    if any(line for _, line in where):
        lines += ["**Where they would start now** (the cluster's scheduler, if submitted now):", ""]
        lines += [f"- `{n}`: {_cell(line)}" for n, line in where if line]
        lines.append("")
    drifted = sorted(
        ((c["address"], f) for c in data["changes"] for f in c["fields"] if f["drift"]),
        key=lambda x: (x[0], x[1]["path"]),
    )
    if drifted:
        lines += ["**Drift** (changed on the cluster since the last apply; applying sets it back):", ""]
        lines += [f"- `{n}`: `{f['path']}`: {_side(f, 'before')} → {_side(f, 'after')}" for n, f in drifted]
        lines.append("")
    if data["not_pruned"]:
        names = ", ".join(f"`{n}`" for n in data["not_pruned"])
        lines += [f"Not in the files any more, kept (add `--prune` to delete): {names}", ""]
    if data["forget"]:
        lines += [f"Gone from the files and the cluster, forgotten: {', '.join(data['forget'])}", ""]
    detailed = [c for c in changes if c["fields"]]
    if detailed:
        lines += ["<details><summary>Full diff</summary>", "", "```diff"]
        for c in detailed:
            lines.append(f"{SYMBOLS[c['action']]} {c['address']}")
            for f in c["fields"]:
                mark = "  # forces replace" if f["forces_replace"] else ""
                drift = "  # drift" if f["drift"] else ""
                if "before" in f:
                    lines.append(f"-   {f['path']}: {_side(f, 'before')}")
                if "after" in f:
                    lines.append(f"+   {f['path']}: {_side(f, 'after')}{mark}{drift}")
        lines += ["```", "", "</details>", ""]
    return "\n".join(lines).rstrip("\n") + "\n"
