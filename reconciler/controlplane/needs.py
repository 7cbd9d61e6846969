"""What a run names that must exist before its workers start, and why it waits while it does not.

A run may name things the workspace does not have yet (a drive, a secret): it is accepted, and
waits, with the words of what is missing and how to make it (a Kubernetes pod waits for a
missing volume claim the same way), so that runs and what they name can be made in either order.
Each kind is one ``Finder``: the names of that kind a run names, the names a workspace has, and
the words of one missing. ``Needs`` asks each finder in order; the first reason is the one
the run (and its waiting workers) says (``ClusterState.waiting``, which the scheduler holds the
run by). The engine asks again when a run is made, and when something of a kind is made or
deleted (``Engine.recheck``); over many runs at once, each workspace's names of a kind are read
once (``Needs.waits``'s ``seen``: a batch of 500 runs that mount drives read the store's drive
rows 500 times, 70 ms of the batch).

``drive_finder(rows)``: the drives a run mounts (``mounts``) that ``rows(workspace)`` (the
store's drive rows) does not list: ``Drive 'datasets' does not exist in workspace default:
astra drive create datasets --path DIR``. ``secret_finder(names)``: the secrets a run's workers
read (``runspec.secrets.secret_refs``) that ``names()`` (every workspace's secrets' names, the
store's) does not hold: ``Secret 'hf-token' does not exist in workspace ml: astra secret set
hf-token``. Values never come here.

Must not touch: the scheduler's records (the engine sets ``waiting``), the API, processes.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..runspec.lifecycle import missing_drive
from ..runspec.models import Run
from ..runspec.secrets import secret_refs, secret_waiting
from .store.drives import workspace_words

__all__ = ["Finder", "Needs", "drive_finder", "mounts", "secret_finder"]


@dataclass(frozen=True)
class Finder:
    """One kind of thing a run may name: ``named(run)``, the names it names; ``have(workspace)``,
    the names the workspace has; ``words(name, workspace)``, why a run waits for one missing."""

    named: Callable[[Run], list[str]]
    have: Callable[[str], Collection[str]]
    words: Callable[[str, str], str]

    def missing(self, run: Run, workspace: str, seen: dict[tuple[int, str], Collection[str]]) -> list[str]:
        """Why ``run`` waits for things of this kind ``workspace`` lacks (``seen``: the names
        read so far, by this finder and workspace)."""
        wanted = self.named(run)
        if not wanted:
            return []
        key = (id(self), workspace)
        have = seen.get(key)
        if have is None:
            have = seen[key] = self.have(workspace)
        return [self.words(n, workspace) for n in dict.fromkeys(wanted) if n not in have]


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
    return Finder(
        lambda run: [name for _, name in mounts(run)],
        lambda workspace: {row["name"] for row in rows(workspace)},
        lambda name, workspace: missing_drive(name, workspace_words(workspace)),
    )


def secret_finder(names: Callable[[], Mapping[str, frozenset[str]]]) -> Finder:
    """The finder of secrets: ``names()`` gives every workspace's (``ORG/WORKSPACE``) secrets' names."""
    return Finder(
        lambda run: [name for _, name in secret_refs(run)],
        lambda workspace: names().get(workspace, frozenset()),
        lambda name, workspace: secret_waiting(name, workspace.partition("/")[2]),
    )


class Needs:
    """The finders of one control plane, asked in order."""

    def __init__(self, finders: Iterable[Finder]) -> None:
        self.finders = list(finders)

    def waits(
        self, run: Run, workspace: str, seen: dict[tuple[int, str], Collection[str]] | None = None
    ) -> str | None:
        """Why ``run`` of ``workspace`` waits for something that does not exist yet, or ``None``
        (``seen``: what the finders read so far, kept by a caller that asks of many runs)."""
        seen = {} if seen is None else seen
        for find in self.finders:
            found = find.missing(run, workspace, seen)
            if found:
                return found[0]
        return None
