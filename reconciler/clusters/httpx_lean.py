"""``httpx``, imported without its command-line client.

``import httpx`` also imports ``httpx._main`` (its own CLI: click, rich's console, progress and
syntax, pygments): 30 ms of every ``astra`` command that talks to a cluster, for nothing we
use. A ``None`` in ``sys.modules`` makes that one import fail, which httpx expects (it then
defines a ``main`` that says its CLI extras are missing); the entry is removed again at once, so
anything that imports ``httpx._main`` later gets the real one. Import httpx from here::

    from reconciler.clusters.httpx_lean import httpx
"""

from __future__ import annotations

import sys

if "httpx" not in sys.modules and "httpx._main" not in sys.modules:
    sys.modules["httpx._main"] = None  # type: ignore[assignment]
    try:
        import httpx
    finally:
        del sys.modules["httpx._main"]
else:
    import httpx

__all__ = ["httpx"]
