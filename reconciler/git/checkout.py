"""What a source's load reads: ``Checkout``, the folders to load and the names they are shown by.

A folder on disk is loaded where it is and shown as given (``runs/a.yaml``). A commit's tree
(a remote's, or an older commit of a local repository: ``astra apply --revision``) is loaded
from its snapshot under astra's home, and shown by its path in the repository (``runs/a.yaml``,
or the folder as the user gave it): the plan, the inventory and the runs' ``astra.file``
annotation name the file, never the cache. ``repo_path(file)`` is a shown file's path in its
repository (the ``astra.file`` annotation).

Plain data; must not touch: git, files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .revision import Revision

__all__ = ["Checkout"]


@dataclass(frozen=True)
class Checkout:
    """``paths``: what the load reads; ``shown``: how each is named (the same, for a folder on
    disk); ``revision``: the commit (``None``: no repository); ``top``: the work tree's root of a
    local repository (names are made relative to it for ``repo_path``); ``origin``: where the
    files come from, for messages (a remote's URL without credentials, or a folder)."""

    paths: tuple[str, ...]
    shown: tuple[str, ...]
    revision: Revision | None = None
    top: str | None = None
    origin: str | None = None

    @property
    def moved(self) -> bool:
        """Whether the files are read elsewhere than they are shown (a snapshot)."""
        return self.paths != self.shown

    def repo_path(self, file: str | None) -> str | None:
        """``file`` (as shown) relative to its repository's root; as shown without a repository."""
        if file is None:
            return None
        if self.top is None:
            return os.path.normpath(file).replace(os.sep, "/")
        return os.path.relpath(os.path.abspath(file), self.top).replace(os.sep, "/")
