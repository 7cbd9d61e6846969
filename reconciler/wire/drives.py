"""The drives' shapes on the wire (``/drives``): a workspace's named folders (CONTRACT §5).

Owns: ``Drive`` and ``DriveList`` (answers) and ``DriveCreate`` (the body of ``POST /drives``),
beside ``models``' (whose ``Answer`` and ``RequestBody`` they are). Must not touch: HTTP, the
store, the folders themselves.

::

    drives     GET /drives → DriveList;  POST DriveCreate → Drive (201);  GET /drives/{name} → Drive
               DELETE /drives/{name} → Drive (409 while a run not ended names it)
"""

from __future__ import annotations

from pydantic import Field

from ..runspec.models import NAME_PATTERN
from .models import EPOCH, Answer, RequestBody

__all__ = ["DRIVE_NAME_MAX", "Drive", "DriveCreate", "DriveList"]

#: A drive's name: as a run's (lower-case letters, digits and ``-``), at most this long.
DRIVE_NAME_MAX = 63


class Drive(Answer):
    """A drive: a named folder of a workspace, on the cluster's host."""

    name: str
    org: str
    workspace: str
    path: str = Field(description="Its folder on the cluster's host.")
    created_at: float = Field(description=EPOCH)
    used_by: list[str] = Field(description="The runs not ended whose workers mount it.")


class DriveList(Answer):
    items: list[Drive]


class DriveCreate(RequestBody):
    """``POST /drives``: a name, and (left out: a folder the server makes under its home,
    ``drives/NAME``) an existing folder of the cluster's host, as an absolute path."""

    name: str = Field(pattern=NAME_PATTERN, max_length=DRIVE_NAME_MAX)
    path: str | None = Field(
        None,
        pattern=r"^/",
        max_length=4096,
        description="An existing folder of the cluster's host (absolute); left out: HOME/drives/NAME.",
    )
