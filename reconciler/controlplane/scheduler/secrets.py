"""A run that reads a secret its workspace does not have yet: why it waits (pure).

Owns ``secret_wait(run, workspace, have)``: the reason in words
(``runspec.secrets.secret_waiting``: ``Secret 'hf-token' does not exist in workspace ml: astra
secret set hf-token``) for the first secret the run's workers read (``runspec.secrets.
secret_refs``) that ``have`` (the names of the workspace's secrets) lacks, else ``None``. The
queue holds such a run Pending with that reason (``ClusterState.secrets``: every workspace's
secrets' names, given by the engine; ``None``: secrets are not known here, and nothing waits).

Must not touch: values (the scheduler never sees one), the store, clocks.
"""

from __future__ import annotations

from reconciler.runspec.models import Run
from reconciler.runspec.secrets import secret_refs, secret_waiting

__all__ = ["secret_wait"]


def secret_wait(run: Run, workspace: str, have: frozenset[str]) -> str | None:
    """Why ``run`` of ``workspace`` (``ORG/WORKSPACE``) waits for a secret, or ``None``."""
    for _, name in secret_refs(run):
        if name not in have:
            return secret_waiting(name, workspace.partition("/")[2])
    return None
