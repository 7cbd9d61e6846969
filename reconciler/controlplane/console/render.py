"""The console's pages as HTML: one jinja2 environment over the package's templates, escaping all.

Owns ``render`` (a template and its context as a response, with what every page shows: the
console's paths, the viewer's CSRF token) and the filters the templates use (``age``, ``when``,
``bytes``, ``yaml``, ``person``). Autoescape is on for every template: a label, an env value or a log line
holding ``<script>`` is shown as text. Must not touch: the engine, access rules.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import time
from typing import Any

import orjson
from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, select_autoescape

from ...state.naming import person
from ..scopes import DEFAULT_SCOPE

__all__ = ["ENV", "render"]

#: How many YAML texts of documents ``as_yaml`` keeps (the run pages shown most recently)
YAML_KEPT = 512
#: How many times ``when`` keeps in words
WHEN_KEPT = 4096

ENV = Environment(
    loader=PackageLoader("reconciler.controlplane.console", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
    # the templates are the package's, fixed while the server runs: not checked on the disk
    # (a stat of the file) each time a page is rendered
    auto_reload=False,
)


def age(at: float | None, now: float | None = None) -> str:
    """``3m``, ``2h``, ``4d``: how long ago ``at`` was (``-`` for none)."""
    if at is None:
        return "-"
    seconds = max(0, int((now if now is not None else time.time()) - at))
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def when(at: float | None) -> str:
    """``2026-12-02 19:40:00 UTC`` (``-`` for none)."""
    return "-" if at is None else _when(at)


@functools.lru_cache(maxsize=WHEN_KEPT)
def _when(at: float) -> str:
    # a page shows the same times again at each refresh (50 runs a page, every 3 s): kept
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def size(n: int | None) -> str:
    if not n:
        return "-"
    for unit, step in (("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20)):
        if (n >= step and n % step == 0) or n >= step * 10:
            return f"{n / step:g}{unit}"
    return str(n)


def as_yaml(data: Any) -> str:
    """``data`` as block YAML, keys in their order (ruamel's round-trip dumper keeps it).

    ruamel's dumper is pure Python (milliseconds for a run's spec, the most of a run page's
    time): the text is kept for the data's JSON text (``_yaml_of``), so that a run's page shown
    again costs one ``orjson`` encoding."""
    try:
        key = orjson.dumps(data)
    except TypeError:  # not JSON's: made each time
        return _dumped(data)
    return _yaml_of(key)


@functools.lru_cache(maxsize=YAML_KEPT)
def _yaml_of(text: bytes) -> str:
    return _dumped(orjson.loads(text))


def _dumped(data: Any) -> str:
    import io

    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    yaml.default_flow_style = False
    yaml.width = 100_000
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()


ENV.filters.update(
    age=age, when=when, bytes=size, yaml=as_yaml, person=person, json=lambda d: json.dumps(d, indent=2)
)


def render(request: Request, name: str, context: dict[str, Any], *, status: int = 200) -> HTMLResponse:
    """``name`` rendered with ``context``, the scope's paths and the viewer's CSRF token."""
    api = request.app.state.astra
    scoped = getattr(request.state, "scoped", None)
    org, workspace, cluster = scoped.scope if scoped is not None else DEFAULT_SCOPE
    base = f"/o/{org}/w/{workspace}/jobs/{cluster}"
    page = ENV.get_template(name).render(
        {
            "org": org,
            "workspace": workspace,
            "cluster": cluster,
            "base": base,
            "csrf": getattr(request.state, "csrf", None) or "",
            "signed_in": getattr(request.state, "signed_in", False),
            "now": api.clock.now(),
            **context,
        }
    )
    headers = {
        "Cache-Control": "no-store",
        "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; "
        "script-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "same-origin",
    }
    return HTMLResponse(page, status_code=status, headers=headers)
