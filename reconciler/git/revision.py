"""A revision of a source: the commit its files are at (``main@sha1:3f8a819…``), or their hash.

``Revision`` is plain data, with its JSON form (what a plan, a status and a history entry hold):
``ref`` (the branch or tag; ``None`` when detached), ``commit`` (40 hex digits), ``dirty`` (the
working tree differs from the commit), the commit's ``subject``, ``author`` and time, and
``rollback`` (applied on purpose as an older commit: ``astra apply --revision``). ``id`` is the
Flux form, ``main@sha1:<sha>``, with ``+dirty`` when the tree is dirty; a source whose files are
in no repository has the sha256 of its files instead (``content_id``).

Must not touch: git (``gitcli``), files.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

__all__ = ["COMMIT_FORMAT", "Revision", "content_id", "parse_commit"]

#: ``git log -1 --format=…`` of what a revision says of its commit (NUL-separated).
COMMIT_FORMAT = "%H%x00%s%x00%an <%ae>%x00%ct"


@dataclass(frozen=True)
class Revision:
    commit: str
    ref: str | None = None
    dirty: bool = False
    subject: str = ""
    author: str = ""
    committed_at: float | None = None
    rollback: bool = False

    @property
    def id(self) -> str:
        """``main@sha1:<sha>`` (``sha1:<sha>`` when detached), ``+dirty`` when dirty."""
        head = f"{self.ref}@" if self.ref else ""
        return f"{head}sha1:{self.commit}{'+dirty' if self.dirty else ''}"

    @property
    def short(self) -> str:
        head = f"{self.ref}@" if self.ref else ""
        return f"{head}sha1:{self.commit[:7]}{'+dirty' if self.dirty else ''}"

    def as_rollback(self) -> Revision:
        return replace(self, rollback=True)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, **asdict(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Revision | None:
        if not data or not data.get("commit"):
            return None
        return cls(
            str(data["commit"]),
            data.get("ref"),
            bool(data.get("dirty")),
            str(data.get("subject") or ""),
            str(data.get("author") or ""),
            data.get("committed_at"),
            bool(data.get("rollback")),
        )


def parse_commit(text: str, ref: str | None, *, dirty: bool = False) -> Revision:
    """A revision from the output of ``git log -1 --format=COMMIT_FORMAT``."""
    sha, subject, author, when = [*text.strip("\n").split("\0"), "", "", ""][:4]
    return Revision(sha.strip(), ref, dirty, subject, author, float(when) if when.strip() else None)


def content_id(sha256: str) -> str:
    """The revision of files in no repository: their hash."""
    return f"sha256:{sha256}"
