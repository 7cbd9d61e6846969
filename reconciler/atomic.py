"""``write_atomically(path, content)``: a file written whole or not at all (a temporary file
beside it, then renamed over it); ``False`` when it cannot be written. For caches, which are
only slower when they cannot be written."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["write_atomically"]


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
