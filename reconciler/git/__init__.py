"""Where a source's desired state comes from: a folder, a git working tree, a remote repository.

* ``revision``: ``Revision`` (``main@sha1:3f8a819…``, ``dirty``, subject, author), plain data;
* ``checkout``: ``Checkout``, the folders a load reads and the names they are shown by;
* ``worktree``: a local working tree's revision (``Probe``, started beside the load) and an
  older commit's tree (``checkout_commit``: ``astra apply --revision``);
* ``remote``: ``Remote``, a repository fetched into a cache under astra's home (``fetch`` →
  ``Fetched``; ``checkout`` → the snapshot of exactly that commit, never a working copy);
* ``snapshot``: a commit's tree written out read-only, updated file by file;
* ``gitcli``: the git command line, the one place ``git`` runs (why the CLI: its docstring).

``astra.yaml`` (several sources declared) is the spec layer's: ``reconciler.runspec.astrafile``.

Must not touch: the load, the plan, clusters, the state: the reconcile step composes them.

Exceptions::

    SourceError             the source cannot be read
    ├── GitError            a git command failed
    └── SourceFetchFailed   a remote could not be fetched (the watch retries it with backoff)
"""

from __future__ import annotations

from .checkout import Checkout
from .gitcli import GitError, SourceError, git_available, redact
from .remote import Fetched, Remote, SourceFetchFailed, clean_folder
from .revision import Revision, content_id
from .worktree import Probe, checkout_commit, worktree_revision

__all__ = [
    "Checkout",
    "Fetched",
    "GitError",
    "Probe",
    "Remote",
    "Revision",
    "SourceError",
    "SourceFetchFailed",
    "checkout_commit",
    "clean_folder",
    "content_id",
    "git_available",
    "redact",
    "worktree_revision",
]
