"""Secret values replaced by ``***`` in a stream given in pieces: the masking both clusters use.

Owns ``Masker`` (pure: bytes in, bytes out, across writes; GitHub Actions' masking):

* each value is masked wherever it appears, and, for a value of several lines, each of its
  lines of at least ``LINE_MIN`` bytes too (a key printed line by line);
* a value split across writes (``"hf_se"`` then ``"cret"``) is masked: the tail of a write
  that could begin a value is held back until the next write says whether it does (at most the
  longest value's length, less a byte), and written at the end of the output either way;
* the longest value is masked first, so a value inside another leaves no part shown.

The embedded control plane masks a worker's log as its executor writes it
(``controlplane.masking.pump``); a Slurm job's wrapper masks its worker's output on the node
(``clusters.slurm.jobwrapper``, which carries this module's text: it imports only the standard
library, and nothing else of astra's may be added). Masking is a safety net, not a boundary
(docs/secrets.md).

Must not touch: anything but its bytes.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["LINE_MIN", "MASK", "Masker"]

MASK = b"***"
#: A line of a value of several lines is masked on its own when at least this long.
LINE_MIN = 4


class Masker:
    """Replaces each of ``values`` by ``***`` in a stream given in pieces (``feed``, then ``end``)."""

    def __init__(self, values: Iterable[bytes]) -> None:
        found: set[bytes] = set()
        for v in values:
            if v:
                found.add(v)
            for line in v.splitlines():
                line = line.strip(b"\r")
                if len(line) >= LINE_MIN:
                    found.add(line)
        self.values = sorted(found, key=len, reverse=True)
        self._held = b""

    def feed(self, data: bytes) -> bytes:
        """What may be written of the output so far, masked; a tail that may begin a value is kept."""
        text = self._held + data
        for v in self.values:
            text = text.replace(v, MASK)
        keep = self._prefix_tail(text)
        self._held = text[len(text) - keep :] if keep else b""
        return text[: len(text) - keep]

    def end(self) -> bytes:
        """The tail held back, at the end of the output (it began no value after all)."""
        out, self._held = self._held, b""
        return out

    def _prefix_tail(self, text: bytes) -> int:
        """The length of the longest tail of ``text`` that is a proper beginning of a value."""
        best = 0
        for v in self.values:
            for n in range(min(len(v) - 1, len(text)), best, -1):
                if text.endswith(v[:n]):
                    best = n
                    break
        return best
