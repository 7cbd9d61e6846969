"""Secrets (``/secrets``): a workspace's named values, set and deleted, listed by name, never shown.

Owns the secrets' routes: ``PUT /secrets/{name}`` (the value is the raw body: any bytes, 1 to
64 KiB; 201 when new, 200 when replaced), ``GET /secrets`` and ``GET /secrets/{name}`` (metadata:
name, size, who set it and when, the runs that read it; never the value), ``DELETE
/secrets/{name}`` (409 naming the runs not ended that read it, unless ``?force=true``), and
``POST /secrets:plan`` (what setting each of some values would do: create, update, none;
writing nothing: a source's plan), either value sent sealed with age (``sealed``, and ``PUT``'s
``Content-Type: application/age``) to be opened with the server's own identity (``astra server
--age-identity FILE``: a source's watch then holds no identity, as Flux keeps its age key in
the cluster), ``POST /secrets:rotate-key`` (every value of the server
sealed anew under a new key: the server's own token only). Roles as on every route: ``read``
lists and reads metadata, ``write`` sets and deletes. A secret is its workspace's, on every
cluster of the server; another workspace's is a 404 by name, as one that does not exist. Every
set and delete is in the audit trail with the secret's name and who (``Scoped.audit``), never
its value, its size or a hash; a value set again unchanged writes nothing.

A run that names a secret not set yet is accepted and waits (``controlplane.needs``, asked again
at each set and delete):
secrets and the repo that uses them can be set up in either order.

Must not touch: SQL and the key (the store's ``KeptSecrets``, ``secretbox``), processes.
"""

from __future__ import annotations

import base64
import re
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import Response

from ...runspec import secrets as spec_secrets
from ...wire import models as wire
from ...wire.secrets import KeyRotated, Secret, SecretList, SecretsPlan, SecretsPlanned
from ..auth import SERVER_TOKEN
from ..store import NotFound
from ..store.secrets import secret_missing
from .context import Api, ApiError, ApiRoute, Responses, answer
from .drives import recheck_needs, runs_needing

__all__ = ["router", "secret_users", "set_value"]

router = APIRouter(tags=["secrets"], route_class=ApiRoute)

#: The name's rule is published (``pattern``) and held by ``_checked_name``, in the spec's words
SecretName = Annotated[
    str,
    PathParam(
        description="The secret's name.",
        json_schema_extra={
            "pattern": spec_secrets.SECRET_NAME_PATTERN,
            "maxLength": spec_secrets.SECRET_NAME_MAX,
        },
    ),
]
NOT_FOUND: Responses = {404: {"model": wire.Detail}}
_VALUE_BODY = {
    "requestBody": {
        "required": True,
        "description": "The value: any bytes, 1 to 65536.",
        "content": {
            "application/octet-stream": {
                "schema": {
                    "type": "string",
                    "format": "binary",
                    "minLength": 1,
                    "maxLength": spec_secrets.SECRET_VALUE_MAX,
                }
            },
            "application/age": {"schema": {"type": "string", "format": "binary", "minLength": 1}},
        },
    }
}


def secret_users(api: Api, name: str) -> list[str]:
    """The workspace's runs not ended whose workers read secret ``name`` (``runs_needing``)."""
    return runs_needing(api, lambda run: name in _names(run))


def _names(run: Any) -> set[str]:
    return {n for _, n in spec_secrets.secret_refs(run)}


def _secret(api: Api, row: dict[str, Any]) -> Secret:
    return Secret.model_validate({**row, "used_by": secret_users(api, row["name"])})


def _the_secret(api: Api, name: str) -> dict[str, Any]:
    workspace = api.scope.workspace_key
    row = api.engine.store.secret_row(name, workspace)
    if row is None:
        raise ApiError(404, wire.Detail(detail=secret_missing(name, workspace)))
    return row


def _checked_name(name: str) -> None:
    if len(name) > spec_secrets.SECRET_NAME_MAX or not re.match(spec_secrets.SECRET_NAME_PATTERN, name):
        raise ApiError(422, wire.Problems([wire.Problem(path="name", message=spec_secrets.SECRET_NAME)]))


@router.get("/secrets", operation_id="list_secrets", response_model=SecretList)
def list_secrets(api: Api) -> Response:
    """The workspace's secrets by name: who set each and when, its size, the runs that read it."""
    rows = api.engine.store.secret_rows(api.scope.workspace_key)
    return answer(SecretList(items=[_secret(api, r) for r in rows]))


@router.put(
    "/secrets/{name}",
    operation_id="set_secret",
    response_model=Secret,
    responses={201: {"model": Secret, "description": "A new secret."}, 422: {"model": wire.Problems}},
    openapi_extra=_VALUE_BODY,
)
async def set_secret(request: Request, api: Api, name: SecretName) -> Response:
    """Set a secret's value (the body, as it is; ``Content-Type: application/age``: an age file,
    opened with the server's identity); workers started from now on read it."""
    value = await request.body()
    if request.headers.get("content-type", "").split(";")[0].strip() == AGE_TYPE:
        value = opened(request, {name: value})[name]
    row, status = set_value(api, name, value)
    return answer(_secret(api, row), status)


def set_value(api: Api, name: str, value: bytes) -> tuple[dict[str, Any], int]:
    """``PUT /secrets/{name}``'s checks (a 422 in words) and write, audited: the secret's row, and
    201 (new) or 200 (replaced; the same value: nothing written). The console's set is this."""
    _checked_name(name)
    if not value:
        raise ApiError(422, wire.Problems([wire.Problem(path="", message=spec_secrets.SECRET_VALUE_EMPTY)]))
    if len(value) > spec_secrets.SECRET_VALUE_MAX:
        said = spec_secrets.secret_too_large(len(value))
        raise ApiError(422, wire.Problems([wire.Problem(path="", message=said)]))
    workspace = api.scope.workspace_key
    if api.engine.store.secret_changes({name: value}, workspace)[name] == "none":
        return _the_secret(api, name), 200
    who = api.caller.name if api.caller is not None else "-"
    row, created = api.engine.store.set_secret(name, value, who, api.clock.now(), workspace)
    api.audit("create" if created else "update", "secret", name)
    recheck_needs(api)  # a run waiting for it may start
    return row, 201 if created else 200


@router.post(
    "/secrets:plan",
    operation_id="plan_secrets",
    response_model=SecretsPlanned,
    responses={422: {"model": wire.Problems}},
)
def plan_secrets(request: Request, api: Api, body: SecretsPlan) -> Response:
    """What setting each value would do (``create``, ``update``, ``none``), writing nothing: what a
    source's plan says of the secrets it holds (never a value, nor a hash of one). ``sealed``
    values are age files, opened with the server's identity."""
    # a name no secret can have plans as a create: its PUT says what is wrong with it
    values = {name: base64.b64decode(text) for name, text in body.values.items()}  # the schema's base64
    values |= opened(request, {name: base64.b64decode(text) for name, text in body.sealed.items()})
    changes = api.engine.store.secret_changes(values, api.scope.workspace_key)
    return answer(
        SecretsPlanned(changes=changes, used_by={name: secret_users(api, name) for name in changes})
    )


#: The content type of a value sent sealed with age (``PUT /secrets/{name}``).
AGE_TYPE = "application/age"
NO_AGE_IDENTITY = (
    "the server holds no age identity to open it: start it with astra server --age-identity FILE, "
    "or give the command --age-identity FILE"
)


def opened(request: Request, sealed: dict[str, bytes]) -> dict[str, bytes]:
    """Each age file of ``sealed`` opened with the server's identity (``astra server
    --age-identity``); a 422 naming the secret when there is none, or the file is not for it."""
    if not sealed:
        return {}
    from ...agekeys import AgeError, open_sealed

    identities = getattr(request.app.state, "age_identities", None)
    out, problems = {}, []
    for name, data in sorted(sealed.items()):
        if not identities:
            problems.append(wire.Problem(path=f"sealed.{name}", message=f"secret {name}: {NO_AGE_IDENTITY}"))
            continue
        try:
            out[name] = open_sealed(data, identities)
        except AgeError as exc:
            said = f"secret {name} does not decrypt with the server's age identity ({exc})"
            problems.append(wire.Problem(path=f"sealed.{name}", message=said))
    if problems:
        raise ApiError(422, wire.Problems(problems))
    return out


@router.get("/secrets/{name}", operation_id="get_secret", response_model=Secret, responses=NOT_FOUND)
def get_secret(api: Api, name: SecretName) -> Response:
    """One secret's metadata (never its value), with the runs that read it."""
    return answer(_secret(api, _the_secret(api, name)))


@router.delete(
    "/secrets/{name}",
    operation_id="delete_secret",
    response_model=Secret,
    responses={
        **NOT_FOUND,
        409: {"model": wire.Detail, "description": "A run not ended reads it."},
        422: {"model": wire.Detail, "description": "A force that is not true or false."},
    },
)
def delete_secret(
    api: Api,
    name: SecretName,
    force: Annotated[bool, Query(description="Delete it though runs read it (they wait for it).")] = False,
) -> Response:
    """Forget a secret; refused while a run not ended reads it, unless forced."""
    secret = _secret(api, _the_secret(api, name))
    if secret.used_by and not force:
        runs = ("run " if len(secret.used_by) == 1 else "runs ") + ", ".join(secret.used_by)
        said = f"secret {name!r} is in use by {runs}: delete them first, or give --force"
        raise ApiError(409, wire.Detail(detail=said))
    try:
        api.engine.store.delete_secret(name, api.scope.workspace_key)
    except NotFound as exc:
        raise ApiError(404, wire.Detail(detail=str(exc))) from exc
    api.audit("delete", "secret", name)
    recheck_needs(api)  # a run not started that reads it waits again
    return answer(secret)


@router.post(
    "/secrets:rotate-key",
    operation_id="rotate_secrets_key",
    response_model=KeyRotated,
    responses={403: {"model": wire.Detail, "description": "Not the server's own token."}},
    openapi_extra={"requestBody": {"required": False, "content": {"application/json": {"schema": {}}}}},
)
def rotate_key(api: Api) -> Response:
    """Seal every secret of the server anew with a new key (the server's own token only)."""
    if api.caller is not None and api.caller.name != SERVER_TOKEN:
        words = (
            f"this token ({api.caller.name}) is not the server's: rotating the secrets key needs "
            "the server's token"
        )
        raise ApiError(403, wire.Detail(detail=words))
    key_id, count = api.engine.store.rotate_secrets_key()
    api.audit("rotate", "secrets-key", key_id)
    return answer(KeyRotated(key_id=key_id, secrets=count))
