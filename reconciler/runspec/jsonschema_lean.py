"""``jsonschema_rs``, imported without ``email.utils``.

As it is imported, jsonschema-rs reads the date it was built with
``email.utils.parsedate_to_datetime``, for nothing we use; ``email.utils`` brings ``socket``,
``calendar``, ``locale`` and ``email.charset`` with it: 7 ms of every process that validates
(each of validate's processes, and a plan), of the import's 9.6. For that one import,
``email.utils`` is a module holding that function alone, which reads the date's one form
(``Tue, 27 Oct 2026 10:17:51 +0000``) itself; the entry is removed at once, so that anything
importing ``email.utils`` later gets the real one. Should the import fail so (another version
asks for more, or writes its date otherwise), it is made again as it is. Import it from here::

    from reconciler.runspec.jsonschema_lean import jsonschema_rs
"""

from __future__ import annotations

import sys
import types
from datetime import datetime, timedelta, timezone

__all__ = ["jsonschema_rs"]

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _parsedate_to_datetime(text: str) -> datetime:
    """``email.utils.parsedate_to_datetime`` for ``Day, DD Mon YYYY HH:MM:SS ±HHMM`` only
    (``ValueError`` for anything else)."""
    _day, day, month, year, clock, zone = text.split()
    hour, minute, second = (int(part) for part in clock.split(":"))
    if len(zone) != 5 or zone[0] not in "+-":
        raise ValueError(f"not a date of the form jsonschema-rs writes: {text!r}")
    offset = timedelta(hours=int(zone[1:3]), minutes=int(zone[3:]))
    tz = timezone(offset if zone[0] == "+" else -offset)
    return datetime(int(year), _MONTHS.index(month) + 1, int(day), hour, minute, second, tzinfo=tz)


def _import() -> types.ModuleType:
    if "jsonschema_rs" in sys.modules or "email.utils" in sys.modules:
        import jsonschema_rs

        return jsonschema_rs
    shim = types.ModuleType("email.utils")
    shim.parsedate_to_datetime = _parsedate_to_datetime  # type: ignore[attr-defined]
    sys.modules["email.utils"] = shim
    try:
        import jsonschema_rs

        return jsonschema_rs
    except (AttributeError, ImportError, TypeError, ValueError):
        # what the stand-in can cause (another version asking for more of email.utils, or writing
        # its date otherwise): imported again as it is, and what that raises is raised
        for name in [n for n in sys.modules if n == "jsonschema_rs" or n.startswith("jsonschema_rs.")]:
            del sys.modules[name]
    finally:
        del sys.modules["email.utils"]
    import jsonschema_rs

    return jsonschema_rs


jsonschema_rs = _import()
