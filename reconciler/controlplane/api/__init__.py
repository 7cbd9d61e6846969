"""The control plane's REST API (FastAPI): CONTRACT §5, and the reconcile sources' state.

The shapes of every request and answer are ``reconciler.wire.models``'s (the one statement of
them; ``/openapi.json`` is generated from them): this package only routes, checks and composes.
Every route composes: read the request, call the ``Engine`` (runs) or the ``Store`` (sources),
answer a ``wire`` model. Must not touch: scheduling rules, SQL, processes.

==================  =================================================================================
module              owns
==================  =================================================================================
``app``             ``create_app``: the routers under both base paths, the token, error answers, OpenAPI
``runs``            ``/runs`` (= ``/jobs``): create, list (``?view=summary``), read, update, delete, events
``workers``         ``/runs/{name}/workers`` (= ``/tasks``), ``/workers/{worker}``, its ``/logs``
``cluster``         ``/machines``, ``/info``
``sources``         ``/sources/...``: a source's state, its granular writes, its lock, tags and 304s
``source_paths``    a source's name (which may hold '/') made one path segment before routing
``views``           the engine's runs and workers as ``wire`` models
``cache``           ``ResponseCache``: the summary listing and digests, kept by the engine's generation
``context``         ``ApiContext`` (and the engine's gate), ``ApiRoute``, ``ApiError``, the token, answers
``gate``            ``Gate``: the engines' readers-writer lock (a GET shared, a write and a step alone)
``body``            the one strict reader of a request's body: bounded, depth-guarded, no key twice
==================  =================================================================================

Base paths (both serve every route)::

    /api/v1/orgs/{org}/workspaces/{workspace}/clusters/{cluster}/api  ($WS_API)
    /api                                                              (the default org, workspace, cluster)

Every call needs ``Authorization: Bearer TOKEN``: 401 without it (or with another token), 403 when
the path names another org, workspace or cluster than the server's (``default``/``default``/
``default`` unless configured). ``GET /healthz`` (outside the API) answers without a token.
"""

from __future__ import annotations

from .app import create_app
from .context import DEFAULT_SCOPE

__all__ = ["DEFAULT_SCOPE", "create_app"]
