"""What a run names that must exist before its workers start, and why it waits while it does not.

A run may name things the workspace does not have yet (a drive; the secrets issue adds
secrets): it is accepted, and waits, with the words of what is missing and how to make it (a
Kubernetes pod waits for a missing volume claim the same way), so that runs and what they name
can be made in either order. Each kind is one ``Finder``: ``(run, workspace) -> [reason, …]``,
the reasons of what that run names and the workspace lacks. ``Needs`` asks each finder in
order; the first reason is the one the run (and its waiting workers) says
(``ClusterState.waiting``, which the scheduler holds the run by). The engine asks again when a
run is made, and when something of a kind is made or deleted (``Engine.recheck``).

``drive_finder(rows)``: the drives a run mounts (``mounts``) that ``rows(workspace)`` (the
store's drive rows) does not list: ``Drive 'datasets' does not exist in workspace default:
astra drive create datasets --path DIR``.

Must not touch: the scheduler's records (the engine sets ``waiting``), the API, processes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..runspec.lifecycle import missing_drive
from ..runspec.models import Run
from .store.drives import workspace_words

__all__ = ["Finder", "Needs", "drive_finder", "mounts"]

#: ``(run, workspace) -> [why it waits, …]`` for one kind of thing a run may name.
Finder = Callable[[Run, str], list[str]]


def mounts(run: Run) -> list[tuple[str, str]]:
    """Each drive a run's workers mount: (the field's path, the drive's name)."""
    spec = run.spec
    found: list[tuple[str, str]] = []
    templates = [
        (f"spec.task_groups[{i}].task_template", g.task_template)
        for i, g in enumerate(spec.task_groups or [])
    ]
    if spec.task_template is not None:
        templates.append(("spec.task_template", spec.task_template))
    for at, tt in templates:
        for j, ref in enumerate(tt.datavolume_refs or []):
            found.append((f"{at}.datavolume_refs[{j}].name", ref.name))
    return found


def drive_finder(rows: Callable[[str], Sequence[Mapping[str, Any]]]) -> Finder:
    """The finder of drives: ``rows(workspace)`` lists the workspace's drives (``name``)."""

    def find(run: Run, workspace: str) -> list[str]:
        names = [name for _, name in mounts(run)]
        if not names:
            return []
        have = {row["name"] for row in rows(workspace)}
        return [missing_drive(n, workspace_words(workspace)) for n in dict.fromkeys(names) if n not in have]

    return find


class Needs:
    """The finders of one control plane, asked in order."""

    def __init__(self, finders: Iterable[Finder]) -> None:
        self.finders = list(finders)

    def waits(self, run: Run, workspace: str) -> str | None:
        """Why ``run`` of ``workspace`` waits for something that does not exist yet, or ``None``."""
        for find in self.finders:
            found = find(run, workspace)
            if found:
                return found[0]
        return None
