"""astra's local home: ``$ASTRA_HOME``, else ``.astra/`` of the working folder, always absolute.

Owns the one rule for where astra keeps its local files (the source state's default database,
the load cache, the local server's token, ``server.json``, database and logs). Every part that
needs the home asks here, so the copies cannot disagree.

Must not touch: anything under the home (callers create and read their own files); no import
beyond the standard library (it is on the CLI's start-up path).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["astra_home"]


def astra_home(environ: Mapping[str, str] | None = None) -> Path:
    """``$ASTRA_HOME``, else ``.astra`` of the current working folder, resolved (absolute)."""
    env = os.environ if environ is None else environ
    given = env.get("ASTRA_HOME")
    return (Path(given) if given else Path.cwd() / ".astra").resolve()
