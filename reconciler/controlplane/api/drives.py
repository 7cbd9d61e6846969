"""Drives (``/drives``): a workspace's named folders, and the check that a run names only those.

Owns the drives' routes (create, list, read, delete). A run whose ``datavolume_refs`` names a
drive the workspace does not have is accepted and waits for it (``controlplane.needs``); making
or deleting a drive asks every engine of the server again (``Engine.recheck``).

A drive is a folder of the cluster's host: given (an existing folder), or made
by the server under its home (``drives/NAME``; another workspace's ``drives/ORG.WORKSPACE/NAME``,
which no drive's name can be; where the app was given one: ``drives_root``). A drive is its
workspace's (the path's org and workspace), on every cluster of the server (they share the
host). A drive a run not ended names (on any cluster) cannot be deleted (409, naming the runs);
deleting one forgets it and leaves its folder and files as they are. A token's role applies as
on every route (``read`` lists and reads, ``write`` creates and deletes), but only an admin of
the org may name the folder (``path``): a write token of a workspace could otherwise mount any
folder of the host, another workspace's drives or the server's home; the audit trail
records each drive created or deleted (``Scoped.audit``).

Must not touch: scheduling rules, SQL (the store's ``KeptDrives``), processes, the sandbox.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi import Path as PathParam
from fastapi.responses import Response

from ...runspec.vocabulary import FINAL_RUN_STATES
from ...wire import models as wire
from ...wire.drives import Drive, DriveCreate, DriveList
from ..needs import mounts
from ..scopes import DEFAULT_SCOPE, scope_of, shown
from ..store import NameExists, NotFound
from ..store.drives import workspace_words
from .context import Api, ApiError, ApiRoute, Responses, answer, problem, require_org_admin

__all__ = [
    "drive_missing",
    "drives_root",
    "mounts",
    "private_folder",
    "recheck_needs",
    "router",
    "runs_needing",
    "used_by",
    "workspace_drives",
]

router = APIRouter(tags=["drives"], route_class=ApiRoute)

DriveName = Annotated[str, PathParam(description="The drive's name.")]
NOT_FOUND: Responses = {404: {"model": wire.Detail}}
INVALID: Responses = {422: {"model": wire.Problems, "description": "The body's problems, one per field."}}


def drive_missing(name: str, workspace: str) -> str:
    """``drive 'results' does not exist in workspace team-a`` (``workspace``: ``ORG/WORKSPACE``)."""
    return f"drive {name!r} does not exist in {workspace_words(workspace)}"


def drives_root(request: Request, api: Api) -> Path | None:
    """Where the server makes the call's workspace's drives given no folder (``HOME/drives``;
    another workspace's: ``HOME/drives/ORG.WORKSPACE``), if the app has one."""
    root: Path | None = getattr(request.app.state, "drives_root", None)
    org, workspace, _ = api.scope
    if root is None or (org, workspace) == DEFAULT_SCOPE[:2]:
        return root
    return root / f"{org}.{workspace}"


def private_folder(request: Request, folder: str) -> str | None:
    """Why ``folder`` (resolved) cannot be a drive: it lies in, or holds, astra's home or the
    runs' working folders (a worker would reach the server's database and token, or another
    run's files, through it); ``None``: it can."""
    private: dict[str, str] = getattr(request.app.state, "private_folders", {})
    for what, there in private.items():
        if _inside(folder, there):
            return f"{folder} lies inside {what} ({there}): give a folder outside it"
        if _inside(there, folder):
            return f"{folder} holds {what} ({there}), which no worker may see: give a folder outside it"
    return None


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def workspace_drives(api: Api) -> set[str]:
    """The names of the call's workspace's drives."""
    return {row["name"] for row in api.engine.store.drive_rows(api.scope.workspace_key)}


def used_by(api: Api, name: str) -> list[str]:
    """The workspace's runs not ended whose workers mount drive ``name`` (``runs_needing``)."""
    return runs_needing(api, lambda run: any(d == name for _, d in mounts(run)))


def runs_needing(api: Api, needs: Callable[[Any], bool]) -> list[str]:
    """The workspace's runs not ended whose spec ``needs`` says yes to (a drive they mount, a
    secret they read): the call's cluster's by name, in submission order, then any other
    cluster's (``NAME on cluster C``)."""
    found: list[str] = []
    for cluster, engine in sorted(api.app.clusters.items(), key=lambda c: c[0] != api.scope.cluster):
        runs = (r for r in engine.state.runs.values() if scope_of(r.name)[:2] == api.scope[:2])
        live = sorted((r for r in runs if r.state not in FINAL_RUN_STATES), key=lambda r: r.seq)
        on = "" if cluster == api.scope.cluster else f" on cluster {cluster}"
        found += [shown(r.name) + on for r in live if needs(r.run)]
    return found


def _drive(api: Api, row: dict[str, Any]) -> Drive:
    return Drive.model_validate({**row, "used_by": used_by(api, row["name"])})


def _the_drive(api: Api, name: str) -> dict[str, Any]:
    workspace = api.scope.workspace_key
    row = api.engine.store.drive_row(name, workspace)
    if row is None:
        raise ApiError(404, wire.Detail(detail=drive_missing(name, workspace)))
    return row


@router.get("/drives", operation_id="list_drives", response_model=DriveList)
def list_drives(api: Api) -> Response:
    """The workspace's drives, by name."""
    rows = api.engine.store.drive_rows(api.scope.workspace_key)
    return answer(DriveList(items=[_drive(api, r) for r in rows]))


@router.post(
    "/drives",
    status_code=201,
    operation_id="create_drive",
    response_model=Drive,
    responses={
        409: {"model": wire.Detail, "description": "The workspace has a drive of that name."},
        **INVALID,
    },
)
def create_drive(request: Request, api: Api, body: DriveCreate) -> Response:
    """Create a drive: an existing folder (``path``), or one the server makes under its home."""
    workspace = api.scope.workspace_key
    if api.engine.store.drive_row(body.name, workspace) is not None:
        said = f"drive {body.name!r} exists in {workspace_words(workspace)}"
        raise ApiError(409, wire.Detail(detail=said))
    if body.path is not None:
        require_org_admin(api, "a drive of a folder of the host's choosing (path)")
        folder = os.path.normpath(body.path)
        if not os.path.isdir(folder):
            raise problem("path", f"{folder} is not a folder of the cluster's host: make it first")
        folder = os.path.realpath(folder)  # resolved once: the sandbox mounts this folder alone
        refused = private_folder(request, folder)
        if refused:
            raise problem("path", refused)
    else:
        root = drives_root(request, api)
        if root is None:
            raise problem("path", "this server keeps no drives of its own: give the drive's folder")
        made = root / body.name
        try:
            made.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise problem("path", f"cannot make {made}: {exc.strerror or exc}") from exc
        folder = str(made)
    try:
        row = api.engine.store.create_drive(body.name, folder, api.clock.now(), workspace)
    except NameExists as exc:
        raise ApiError(409, wire.Detail(detail=str(exc))) from exc
    api.audit("create", "drive", body.name, {"path": folder})
    recheck_needs(api)
    return answer(_drive(api, row), 201)


@router.get("/drives/{name}", operation_id="get_drive", response_model=Drive, responses=NOT_FOUND)
def get_drive(api: Api, name: DriveName) -> Response:
    """One drive, with the runs that mount it."""
    return answer(_drive(api, _the_drive(api, name)))


@router.delete(
    "/drives/{name}",
    operation_id="delete_drive",
    response_model=Drive,
    responses={**NOT_FOUND, 409: {"model": wire.Detail, "description": "A run not ended mounts it."}},
)
def delete_drive(api: Api, name: DriveName) -> Response:
    """Forget a drive (its folder and files stay); refused while a run not ended mounts it."""
    drive = _drive(api, _the_drive(api, name))
    if drive.used_by:
        runs = ("run " if len(drive.used_by) == 1 else "runs ") + ", ".join(drive.used_by)
        said = f"drive {name!r} is in use by {runs}: delete it, or wait for it to end, first"
        raise ApiError(409, wire.Detail(detail=said))
    try:
        api.engine.store.delete_drive(name, api.scope.workspace_key)
    except NotFound as exc:
        raise ApiError(404, wire.Detail(detail=str(exc))) from exc
    api.audit("delete", "drive", name, {"path": drive.path})
    recheck_needs(api)
    return answer(drive)


def recheck_needs(api: Api) -> None:
    """A drive or a secret was made or deleted: every cluster's runs ask again what they wait for
    (each is its workspace's on every cluster of the server), and the schedulers wake."""
    for engine in api.app.clusters.values():
        engine.recheck()
    api.on_change()
