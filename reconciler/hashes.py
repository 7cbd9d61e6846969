"""Content hashes of files, remembered by what ``stat`` says of them (as git's index does).

``StatHashes(path)`` keeps, for each file it hashed, its device, inode, size, modification
and change times (nanoseconds) with the sha256 of its bytes, in one JSON file (a map of the
file's absolute name to ``"DEV:INO:SIZE:MTIME:CTIME SHA256"``). ``known(name)`` answers from
there when all five still match; ``sha256(name)`` also reads and hashes the file when they do
not, and ``read(name)`` always does and gives the bytes too (a caller that loads them reads
the file once). The change time cannot be set back by a user (``touch -d`` sets the
modification time only), so a file written again has another. A file written within
``RACY_NS`` of being hashed is not remembered: another write in the same tick of a coarse clock
would leave all five alike.
``forget_under(folders, kept)`` drops the files a load of those folders no longer found.
``save()`` writes the file when anything changed; a file that cannot be read or written only
makes the next run slower (one that cannot be read is said at debug level).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Iterable
from pathlib import Path

from .atomic import compact_json, write_atomically
from .runspec.files import read_file

__all__ = ["RACY_NS", "StatHashes", "stat_key"]

log = logging.getLogger(__name__)

#: A file changed this recently (nanoseconds) is hashed again next time, not remembered.
RACY_NS = 2_000_000_000
_VERSION = 2


class StatHashes:
    def __init__(self, path: str | os.PathLike[str] | None):
        self.path = Path(path) if path is not None else None
        self._held: dict[str, str] = {}
        self._changed = False
        self._cwd = os.getcwd()  # a relative name is remembered under this folder
        if self.path is not None:
            try:
                data = json.loads(self.path.read_bytes())
            except (OSError, ValueError) as exc:  # none yet, or damaged: every file is hashed again
                log.debug("stat hashes: %s not read (%s): every file is hashed", self.path, exc)
                return
            if isinstance(data, dict) and data.get("version") == _VERSION:
                self._held = data.get("files") or {}
            else:
                log.debug("stat hashes: %s is of another version: every file is hashed", self.path)

    def _key(self, name: str) -> str:
        return name if name.startswith(os.sep) else f"{self._cwd}{os.sep}{name}"

    def known(self, name: str) -> str | None:
        """The sha256 remembered for ``name`` when its stat still matches, else ``None``
        (``OSError`` when there is no such file; nothing remembered at all, ``None`` without
        looking)."""
        if not self._held:
            return None
        st = os.stat(name)
        held = self._held.get(self._key(name))
        if held is not None and held[:-65] == _seen(st):  # "SEEN SHA256": the hash is 64 characters
            return held[-64:]
        return None

    def sha256(self, name: str) -> str:
        """The sha256 of ``name``'s bytes: remembered, else read, hashed and remembered (unless it
        changed within ``RACY_NS``); ``OSError`` when the file cannot be read."""
        known = self.known(name)
        return known if known is not None else self.read(name)[1]

    def read(self, name: str) -> tuple[bytes, str]:
        """``name``'s bytes and their sha256, which is remembered (unless the file changed within
        ``RACY_NS``): for a caller that needs the bytes too, so that the file is read once."""
        data, st = read_file(name)
        digest = hashlib.sha256(data).hexdigest()
        if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > RACY_NS:
            self._held[self._key(name)] = f"{_seen(st)} {digest}"
            self._changed = True
        # else: not remembered now; an entry held for its old stat no longer matches anyway
        return data, digest

    def learn(self, held: dict[str, str]) -> None:
        """Take what another ``StatHashes`` remembered (``remembered()``: a forked process's)."""
        if held:
            self._held.update(held)
            self._changed = True

    def forget_under(self, folders: Iterable[str], kept: Iterable[str]) -> None:
        """Forget every file under ``folders`` but ``kept`` (the files a load of them found: the
        others were deleted or renamed since they were hashed)."""
        prefixes = tuple(self._key(f).rstrip(os.sep) + os.sep for f in folders)
        if not prefixes or not self._held:
            return
        keep = {self._key(n) for n in kept}
        gone = [k for k in self._held if k.startswith(prefixes) and k not in keep]
        for k in gone:
            del self._held[k]
        self._changed = self._changed or bool(gone)

    def held_stats(self, names: Iterable[str]) -> dict[str, str] | None:
        """The stat (``stat_key``) that each of ``names``' remembered hash is for; ``None`` as soon
        as one has none. (Each name keyed as ``_key`` does, inline: a plan's 10,000 files.)"""
        held, prefix, out = self._held, f"{self._cwd}{os.sep}", {}
        for name in names:
            found = held.get(name if name.startswith(os.sep) else prefix + name)
            if found is None:
                return None
            out[name] = found[:-65]
        return out

    def remembered(self) -> dict[str, str]:
        return dict(self._held)

    def save(self) -> None:
        if self.path is not None and self._changed:
            text = compact_json({"version": _VERSION, "files": self._held})
            self._changed = not write_atomically(self.path, text)


def _seen(st: os.stat_result) -> str:
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


#: A file's stat as this memo compares it: ``"DEV:INO:SIZE:MTIME:CTIME"``.
stat_key = _seen
