"""Content hashes of files, remembered by what ``stat`` says of them (as git's index does).

``StatHashes(path)`` keeps, for each file it hashed, its device, inode, size, modification
and change times (nanoseconds) with the sha256 of its bytes, in one JSON file. ``sha256(name)``
answers from there when all five still match, and otherwise reads and hashes the file (and
gives its bytes too, so that the caller does not read it again). The change time cannot be set
back by a user (``touch -d`` sets the modification time only), so a file written again has
another. A file written within ``RACY_NS`` of being hashed is not remembered: another write
in the same tick of a coarse clock would leave all five alike. ``save()`` writes the file when
anything changed; a file that cannot be read or written only makes the next run slower.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from .atomic import write_atomically

__all__ = ["RACY_NS", "StatHashes"]

#: A file changed this recently (nanoseconds) is hashed again next time, not remembered.
RACY_NS = 2_000_000_000
_VERSION = 1


class StatHashes:
    def __init__(self, path: str | os.PathLike[str] | None):
        self.path = Path(path) if path is not None else None
        self._held: dict[str, list] = {}
        self._changed = False
        if self.path is not None:
            try:
                data = json.loads(self.path.read_bytes())
                if isinstance(data, dict) and data.get("version") == _VERSION:
                    self._held = data.get("files") or {}
            except (OSError, ValueError):
                pass

    def sha256(self, name: str) -> tuple[str, bytes | None]:
        """The sha256 of ``name``'s bytes, and the bytes when they had to be read (``OSError``
        when the file cannot be read)."""
        key = os.path.abspath(name)
        st = os.stat(name)
        now = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        held = self._held.get(key)
        if held is not None and tuple(held[:5]) == now:
            return held[5], None
        with open(name, "rb") as f:
            data = f.read()
        digest = hashlib.sha256(data).hexdigest()
        if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > RACY_NS:
            self._held[key] = [*now, digest]
            self._changed = True
        elif held is not None:
            del self._held[key]
            self._changed = True
        return digest, data

    def save(self) -> None:
        if self.path is not None and self._changed:
            text = json.dumps({"version": _VERSION, "files": self._held}, separators=(",", ":"))
            self._changed = not write_atomically(self.path, text)
