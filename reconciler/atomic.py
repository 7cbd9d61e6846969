"""``write_atomically(path, content)``: a file written whole or not at all (a temporary file
beside it, then renamed over it); ``False`` when it cannot be written. For caches, which are
only slower when they cannot be written. ``compact_json(value)``: what such a cache writes,
``json.dumps(value, separators=(",", ":"))`` read back alike, written by orjson (ten times
faster: a cold load's pack and stat memo of 10,000 files cost 30 ms with ``json``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["compact_json", "write_atomically"]


def compact_json(value: Any) -> bytes:
    """``value`` as compact JSON (UTF-8): by orjson, else (a name that is not UTF-8, an integer
    beyond 64 bits: what orjson refuses) by ``json``, which reads back to the same value."""
    import orjson

    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, separators=(",", ":")).encode()


def write_atomically(path: Path, content: str | bytes) -> bool:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        if isinstance(content, str):
            tmp.write_text(content, encoding="utf-8")
        else:
            tmp.write_bytes(content)
        os.replace(tmp, path)
        return True
    except OSError:
        return False
