"""Teams: tokens (``/tokens``) and workspaces with their quotas (``/workspaces``).

Owns the routes an admin makes and revokes tokens with, and sets quotas with, and those that
show a workspace (its quota and what it holds on the path's cluster). Each composes: ``auth.Tokens``
decides who may make or revoke what, the store keeps it, the engine of the path's cluster holds
a quota; every write lands in the audit trail. The shapes are ``reconciler.wire.teams``'.

Who may:

================================  ==========================================================
call                              needs
================================  ==========================================================
``GET /workspaces[/{name}]``      read, within the token's scope (an org token: any of the org's)
``POST``/``GET /tokens``,         admin; a workspace's admin makes, lists and revokes its
``DELETE /tokens/{name}``         workspace's tokens, the org's admin any of the org's
``PUT /workspaces/{name}``,       the org's admin (a workspace's admin cannot raise its own
``PUT /workspaces/{name}/quota``  quota); a workspace named is made if it is not there yet
================================  ==========================================================

Must not touch: SQL (the store's), the scheduler's rules (a quota is handed to the engine).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path
from fastapi.responses import Response

from ...wire import models as wire
from ...wire import teams
from ..auth import AuthError, Role
from ..scheduler import Quota
from ..scopes import Scope
from .context import AdminRoute, Api, ApiError, ApiRoute, Responses, answer, require_org_admin

__all__ = ["admin", "router"]

#: The routes any token of the workspace may call (reads).
router = APIRouter(tags=["teams"], route_class=ApiRoute)
#: The routes only an admin may call.
admin = APIRouter(tags=["teams"], route_class=AdminRoute)

WorkspaceName = Annotated[str, Path(description="The workspace's name.", pattern=teams.NAME, max_length=63)]
TokenName = Annotated[str, Path(description="The token's name.")]
BAD_NAME: Responses = {422: {"model": wire.Detail, "description": "A name that is not a workspace's."}}


def _workspace(api: Api, name: str) -> teams.Workspace:
    org, cluster = api.scope.org, api.scope.cluster
    key = f"{org}/{name}"
    quota = api.engine.state.quotas.get(key) or Quota()
    gpus, runs = api.engine.usage(key)
    state = api.engine.state.runs
    pending = sum(1 for k in api.engine.runs_of(Scope(org, name, cluster)) if state[k].state == "Pending")
    return teams.Workspace(
        org=org,
        name=name,
        cluster=cluster,
        quota=teams.Quota(gpus=quota.gpus, runs=quota.runs),
        usage=teams.Usage(gpus=gpus, runs=runs, pending=pending),
    )


def _covered(api: Api, name: str) -> None:
    """403 when the token's scope does not hold workspace ``name``; 404 when there is none."""
    assert api.caller is not None
    refused = api.caller.refusal(api.scope.org, name, Role.READ)
    if refused is not None:
        raise ApiError(403, wire.Detail(detail=refused))
    if (api.scope.org, name) not in api.app.workspaces:
        raise ApiError(404, wire.Detail(detail=f"no workspace {name} in org {api.scope.org}"))


def _made(api: Api, name: str) -> bool:
    made = api.app.add_workspace(api.scope.org, name)
    if made:
        api.audit("create", "workspace", name, workspace=name)
    return made


# ---- workspaces ----------------------------------------------------------------------------------


@router.get("/workspaces", operation_id="list_workspaces", response_model=teams.WorkspaceList)
def list_workspaces(api: Api) -> Response:
    """The workspaces of the org this token may see, each with its quota and usage on this cluster."""
    assert api.caller is not None
    caller, org = api.caller, api.scope.org
    names = sorted(w for o, w in api.app.workspaces if o == org and caller.covers(org, w))
    return answer(teams.WorkspaceList(items=[_workspace(api, n) for n in names]))


@router.get(
    "/workspaces/{name}",
    operation_id="get_workspace",
    response_model=teams.Workspace,
    responses={404: {"model": wire.Detail}, **BAD_NAME},
)
def get_workspace(api: Api, name: WorkspaceName) -> Response:
    """A workspace: its quota on this cluster and what it holds there now."""
    _covered(api, name)
    return answer(_workspace(api, name))


@admin.put(
    "/workspaces/{name}",
    operation_id="put_workspace",
    response_model=teams.Workspace,
    responses={201: {"model": teams.Workspace, "description": "Made now."}, **BAD_NAME},
    openapi_extra={"requestBody": {"required": False, "content": {"application/json": {"schema": {}}}}},
)
async def put_workspace(api: Api, name: WorkspaceName) -> Response:
    """Make a workspace of the org (200 when it is there already)."""
    require_org_admin(api, "making a workspace")
    made = _made(api, name)
    return answer(_workspace(api, name), 201 if made else 200)


@admin.put(
    "/workspaces/{name}/quota",
    operation_id="set_workspace_quota",
    response_model=teams.Workspace,
    responses={422: {"model": wire.Problems | wire.Detail, "description": "A bad name or quota."}},
)
async def set_quota(api: Api, name: WorkspaceName, body: teams.QuotaWrite) -> Response:
    """Set a workspace's quota on this cluster (made if it is not there yet): GPUs, and runs
    holding machines at once; left out or null, no limit. Runs holding more keep what they hold;
    no more is placed until the workspace is under its quota."""
    require_org_admin(api, "setting a quota")
    _made(api, name)
    org, cluster = api.scope.org, api.scope.cluster
    api.engine.store.put_quota(org, name, cluster, body.gpus, body.runs, api.clock.now())
    api.engine.set_quota(f"{org}/{name}", Quota(body.gpus, body.runs))
    api.on_change()
    api.audit(
        "set", "quota", name, {"cluster": cluster, "gpus": body.gpus, "runs": body.runs}, workspace=name
    )
    return answer(_workspace(api, name))


# ---- tokens --------------------------------------------------------------------------------------


def _refused(exc: AuthError) -> ApiError:
    return ApiError(exc.status, wire.Detail(detail=str(exc)))


@admin.get("/tokens", operation_id="list_tokens", response_model=teams.TokenList)
def list_tokens(api: Api) -> Response:
    """The tokens this admin may revoke (an org's admin: the org's; a workspace's: the workspace's),
    by name; never their text. The server's own token (``server``) is not listed."""
    assert api.caller is not None
    rows = api.app.tokens.visible(api.caller)
    return answer(teams.TokenList(items=[teams.TokenInfo.model_validate(r) for r in rows]))


@admin.post(
    "/tokens",
    operation_id="create_token",
    status_code=201,
    response_model=teams.TokenCreated,
    responses={
        403: {"model": wire.Detail, "description": "Beyond the caller's scope."},
        409: {"model": wire.Detail},
        422: {"model": wire.Problems | wire.Detail},
    },
)
async def create_token(api: Api, body: teams.TokenCreate) -> Response:
    """Make a token for a workspace (the path's, unless named) or (``*``) the whole org, with a role: its
    text is in this answer, and never again (the server keeps a digest of it)."""
    assert api.caller is not None
    workspace = None if body.workspace == teams.EVERY else body.workspace or api.scope.workspace
    try:
        row, text = api.app.tokens.create(api.caller, body.name, Role(body.role), workspace, api.clock.now())
    except AuthError as exc:
        raise _refused(exc) from exc
    if workspace is not None:
        _made(api, workspace)
    shown = {"role": row["role"], "workspace": workspace, "org_wide": workspace is None}
    api.audit("create", "token", body.name, shown, workspace=workspace)
    return answer(teams.TokenCreated.model_validate({**row, "token": text}), 201)


@admin.delete(
    "/tokens/{name}",
    operation_id="revoke_token",
    response_model=teams.TokenInfo,
    responses={404: {"model": wire.Detail}},
)
def revoke_token(api: Api, name: TokenName) -> Response:
    """Revoke a token: refused (401) from the very next call on."""
    assert api.caller is not None
    try:
        row = api.app.tokens.revoke(api.caller, name)
    except AuthError as exc:
        raise _refused(exc) from exc
    api.audit("revoke", "token", name, {"role": row["role"]}, workspace=row["workspace"])
    return answer(teams.TokenInfo.model_validate(row))
