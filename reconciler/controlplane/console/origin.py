"""Whether a browser sent a request from another site: the console's guard of its login form.

Owns ``cross_origin(request)``: the words of a refusal when the request is a browser's from
another origin, else ``None``. The rule is Go's ``net/http.CrossOriginProtection`` (Go 1.25),
which follows what browsers send today:

1. a safe method (GET, HEAD, OPTIONS) passes;
2. ``Sec-Fetch-Site`` (sent by every current browser) passes when ``same-origin`` or ``none``
   (typed in the address bar, a bookmark), and is refused otherwise (``same-site``, ``cross-site``);
3. without it, ``Origin`` passes when its host is the request's ``Host``, and is refused otherwise;
4. with neither, the request is no browser's form (curl, a script: no one's cookies or session
   ride along), and passes.

Why it guards ``POST /login`` (the forms sent with a session carry its CSRF token: ``access``):
a login form takes no session yet, so another site could post the attacker's token to it and
sign the visitor in as the attacker (login CSRF). Must not touch: sessions, tokens.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from fastapi import Request

__all__ = ["cross_origin"]

SAFE = frozenset({"GET", "HEAD", "OPTIONS"})

REFUSED = "This form was sent from another site ({origin}): open this server's login page and log in there."


def cross_origin(request: Request) -> str | None:
    """The words of a refusal when ``request`` is a browser's from another origin; ``None``: it may go on."""
    if request.method in SAFE:
        return None
    site = request.headers.get("sec-fetch-site")
    origin = request.headers.get("origin")
    if site is not None:
        return None if site in ("same-origin", "none") else REFUSED.format(origin=origin or site)
    if origin is None:
        return None
    host = request.headers.get("host", "")
    if origin != "null" and urlsplit(origin).netloc.lower() == host.lower():
        return None
    return REFUSED.format(origin=origin)
