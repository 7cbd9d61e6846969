"""Whose a run, a worker or a source is: an org's workspace's view of one cluster (a ``Scope``).

Owns: ``Scope`` (org, workspace, cluster: what ``$WS_API`` names; ``/api`` alone is
``DEFAULT_SCOPE``), the names those three may have, and the keys that make a name unique in the
one store and the one scheduler that every workspace shares:

==========  =====================================  ===========================================
what        key (the default scope)                key (any other scope)
==========  =====================================  ===========================================
a run       ``NAME``                               ``ORG/WORKSPACE/CLUSTER/NAME``
a worker    ``NAME-RANK`` (its run's key + rank)   ``ORG/WORKSPACE/CLUSTER/NAME-RANK``
a source    ``NAME``                               ``US ORG/WORKSPACE/CLUSTER US NAME``
==========  =====================================  ===========================================

A run's name has no '/' (``runspec.models.NAME_PATTERN``), nor has any part of a scope, so a run
key splits back unambiguously; the keys of the default scope are the names themselves, so a
database written before workspaces existed holds the default scope's runs as they were. A
source's name may hold any text ('/' too): its key starts with the ASCII unit separator (US,
``\\x1f``), which no path or URL a source is named after holds; a default-scope name that
starts with one is kept with another in front (``\\x1f\\x1fNAME``), so no key is read two ways.

Within a workspace the API, the worker's environment and every reason show the plain names
(``shown``); the keys stay inside the scheduler, the store and the executor's log folders.

Must not touch: anything but strings. Pure: the scheduler reads it.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from reconciler.runspec.models import NAME_PATTERN

__all__ = [
    "DEFAULT",
    "DEFAULT_SCOPE",
    "DEFAULT_WORKSPACE",
    "SOURCE_MARK",
    "Scope",
    "is_name",
    "other_workspace",
    "run_key",
    "scope_of",
    "shown",
    "source_key",
    "source_name",
    "source_prefix",
    "workspace_of",
]

#: The org, workspace and cluster ``/api`` alone names.
DEFAULT = "default"
#: The longest org, workspace, cluster (or token) name.
NAME_MAX = 63
#: What starts the key of a source of a scope other than the default (see the module docstring).
SOURCE_MARK = "\x1f"
_NAME = re.compile(NAME_PATTERN)


class Scope(NamedTuple):
    """An org's workspace's view of one cluster: what ``$WS_API``'s path names."""

    org: str
    workspace: str
    cluster: str

    @property
    def workspace_key(self) -> str:
        """``ORG/WORKSPACE``: the workspace, whatever the cluster (quotas and usage are by it)."""
        return f"{self.org}/{self.workspace}"

    @property
    def prefix(self) -> str:
        """What a run key of this scope starts with ('' for the default scope)."""
        return "" if self == DEFAULT_SCOPE else f"{self.org}/{self.workspace}/{self.cluster}/"


DEFAULT_SCOPE = Scope(DEFAULT, DEFAULT, DEFAULT)
#: The default workspace's key (``Scope.workspace_key``).
DEFAULT_WORKSPACE = DEFAULT_SCOPE.workspace_key


def is_name(text: str) -> bool:
    """Whether ``text`` may name an org, a workspace, a cluster or a token: a run's rules."""
    return len(text) <= NAME_MAX and _NAME.match(text) is not None


def run_key(scope: Scope, name: str) -> str:
    """The key of run (or worker) ``name`` of ``scope``."""
    return scope.prefix + name


def scope_of(key: str) -> Scope:
    """The scope of a run (or worker) key."""
    if "/" not in key:
        return DEFAULT_SCOPE
    org, workspace, cluster, _ = key.split("/", 3)
    return Scope(org, workspace, cluster)


def workspace_of(key: str) -> str:
    """``ORG/WORKSPACE`` of a run (or worker) key."""
    if "/" not in key:
        return DEFAULT_WORKSPACE
    org, workspace, _ = key.split("/", 2)
    return f"{org}/{workspace}"


def shown(key: str) -> str:
    """The plain name of a run (or worker) key: what its workspace sees."""
    return key.rpartition("/")[2]


def other_workspace(key: str, viewer: str) -> str | None:
    """The name of run ``key``'s workspace when it is not run ``viewer``'s; else ``None`` (a reason
    seen by ``viewer``'s workspace names a run of its own, and only the workspace of another's)."""
    ws = workspace_of(key)
    return None if ws == workspace_of(viewer) else ws.partition("/")[2]


def source_key(scope: Scope, name: str) -> str:
    """The key of source ``name`` of ``scope``."""
    if scope == DEFAULT_SCOPE:
        return SOURCE_MARK + name if name.startswith(SOURCE_MARK) else name
    return source_prefix(scope) + name


def source_prefix(scope: Scope) -> str:
    """What every source key of a scope other than the default starts with."""
    return f"{SOURCE_MARK}{scope.org}/{scope.workspace}/{scope.cluster}{SOURCE_MARK}"


def source_name(key: str) -> str:
    """The name of the source a key names (``source_key``'s inverse, less the scope)."""
    if not key.startswith(SOURCE_MARK):
        return key
    if key.startswith(SOURCE_MARK * 2):
        return key[1:]
    end = key.find(SOURCE_MARK, 1)
    return key[end + 1 :] if end > 0 else key
