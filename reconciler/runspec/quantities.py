"""Friendly quantities: sizes in bytes and durations in seconds.

``120Gi`` is 128849018880. K, M, G, T and P are powers of 1024 as in Slurm and the seeds' CLI
(``--mem 120G`` becomes 128849018880 bytes), and so are Ki … Pi; ``1.5Gi`` is allowed, and a
fraction of a byte rounds up. A bare integer is bytes or
seconds. Durations: ``90m``, ``12h``, ``1h30m``, ``2d``, ``45s``, or Slurm's ``MM:SS``,
``H:MM:SS`` and ``D-HH:MM:SS``. The patterns here are also the JSON Schema's.
"""

from __future__ import annotations

import re

__all__ = [
    "BYTES_PATTERN",
    "DURATION_PATTERN",
    "POSITIVE_DURATION_PATTERN",
    "duration_words",
    "parse_bytes",
    "parse_duration",
]

_UNITS = {"K": 1, "M": 2, "G": 3, "T": 4, "P": 5}

BYTES_PATTERN = r"^(0|[1-9][0-9]*)(\.[0-9]+)?([KMGTP]i?)$|^(0|[1-9][0-9]*)$"
DURATION_PATTERN = (
    r"^(?=[0-9])([0-9]+d)?([0-9]+h)?([0-9]+m)?([0-9]+s)?$"
    r"|^([0-9]+-)?[0-9]+(:[0-5]?[0-9]){1,2}$|^[0-9]+-[0-9]+$"
)
#: A duration that is not zero ("0s", "0:00" and "0-0" are durations, but not time limits).
POSITIVE_DURATION_PATTERN = rf"^(?![0dhms:-]*$)(?:{DURATION_PATTERN})"
_BYTES_RE = re.compile(BYTES_PATTERN)
_UNIT_DURATION_RE = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
_DURATION_RE = re.compile(DURATION_PATTERN)
_CLOCK_RE = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def parse_bytes(value: int | str) -> int:
    """Bytes as an integer; raises ValueError for anything that is not a size."""
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, int):
        if value < 0:
            raise ValueError(value)
        return value
    if not isinstance(value, str):
        raise ValueError(value)
    m = _BYTES_RE.match(value)
    if not m:
        raise ValueError(value)
    if m.group(4) is not None:
        return int(m.group(4))
    whole, frac, unit = m.group(1), m.group(2) or "", m.group(3)
    scale = 1024 ** _UNITS[unit[0]]
    # exact arithmetic: 1.5Gi is 1610612736 with no float rounding; a fraction of a byte
    # rounds up, as Kubernetes does, so that every value the pattern admits has one meaning
    digits = len(frac) - 1 if frac else 0
    return -(-int(whole + frac[1:]) * scale // (10**digits))


def parse_duration(value: int | str) -> int:
    """Seconds as an integer; raises ValueError for anything that is not a duration."""
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, int):
        if value < 0:
            raise ValueError(value)
        return value
    if not isinstance(value, str) or not _DURATION_RE.match(value):
        raise ValueError(value)
    m = _UNIT_DURATION_RE.match(value)
    if m:
        d, h, mi, s = (int(x or 0) for x in m.groups())
        return ((d * 24 + h) * 60 + mi) * 60 + s
    m = _CLOCK_RE.match(value)
    assert m  # the pattern above admits only these two forms
    days, a, b, c = m.groups()
    if c is not None or days is not None:  # H:MM:SS, D-H, D-H:MM, D-H:MM:SS
        h, mi, s = int(a), int(b or 0), int(c or 0)
    else:  # MM:SS, as Slurm reads two fields
        h, mi, s = 0, int(a), int(b)
    return ((int(days or 0) * 24 + h) * 60 + mi) * 60 + s


def format_duration(seconds: int) -> str:
    """The shortest unit form: 43200 → 12h, 5400 → 1h30m."""
    if seconds == 0:
        return "0s"
    out = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        n, seconds = divmod(seconds, size)
        if n:
            out.append(f"{n}{unit}")
    return "".join(out)


def duration_words(seconds: float) -> str:
    """``45s``, ``5m``, ``2h 13m``, ``3d 4h``: the two largest units (how long ago, how long for)."""
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    parts: list[tuple[int, str]] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        n, s = divmod(s, size)
        if n or parts:
            parts.append((n, unit))
    shown = parts[:2]
    return " ".join(f"{n}{u}" for n, u in shown if n) or "0s"
