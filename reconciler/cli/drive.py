"""``astra drive create NAME [--path DIR] | list | delete NAME``: a workspace's drives.

Thin: options in, one API call (``/drives``, through ``remote.call``), a line or a table out. A
drive is a named folder of the cluster's host that runs mount (``datavolume_refs``); ``--path``
names it (made here, with its parents, when it does not exist: the local cluster runs on this
host), else the server makes one under its home (``drives/NAME``).

On a Slurm cluster (``--server slurm://``) one call of ``SlurmCluster``'s instead: a drive is an
existing folder of the cluster's shared filesystem that ``--path`` names (astra makes none),
kept in the Slurm state folder's table (``clusters/slurm/drives.py``, docs/slurm.md "Drives").
"""

from __future__ import annotations

import os
from typing import Annotated

import typer

from .day2 import failing, slurm_named
from .listing import ListFormat, print_listing
from .options import ListOutput, ServerOpt, TokenOpt
from .output import echo, error
from .remote import called

__all__ = ["drive_app"]

drive_app = typer.Typer(
    name="drive",
    help="Drives: named folders that runs mount (datavolume_refs), one workspace's.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


@drive_app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="The drive's name (lower-case letters, digits, -).")],
    path: Annotated[
        str | None,
        typer.Option("--path", help="Its folder (made if missing); default: a folder under astra's home."),
    ] = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Create a drive: NAME at DIR, or at a folder the server makes under its home.

    On Slurm (--server slurm://): --path names an existing folder of the cluster's shared filesystem."""
    slurm = slurm_named(server)
    if slurm is not None:
        if path is None:
            error("on Slurm a drive is a folder of the cluster's shared filesystem: give --path FOLDER")
            raise typer.Exit(1)
        with failing():
            made = slurm.create_drive(name, os.path.abspath(os.path.expanduser(path)))
        echo(f"drive {made['name']} created on {slurm.address}: {made['path']}")
        return
    body: dict[str, str] = {"name": name}
    if path is not None:
        folder = os.path.abspath(os.path.expanduser(path))
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as exc:
            error(f"cannot make {folder}: {exc.strerror or exc}")
            raise typer.Exit(1) from exc
        body["path"] = folder
    made = called("POST", "/drives", server=server, token=token, json=body).json()
    echo(f"drive {made['name']} created in workspace {made['workspace']}: {made['path']}")


@drive_app.command("list")
def list_drives(
    output: ListOutput = ListFormat.table,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """List the drives: NAME PATH USED-BY. Never starts the local server."""
    slurm = slurm_named(server)
    if slurm is not None:
        with failing():
            items = slurm.drives()
    else:
        items = called("GET", "/drives", server=server, token=token, start=False).json()["items"]
    if output is not ListFormat.table:
        print_listing(items, output)
        return
    rows = [(d["name"], d["path"], ",".join(d["used_by"]) or "-") for d in items]
    widths = [max(len(r[i]) for r in [("NAME", "PATH", "USED-BY"), *rows]) for i in range(2)]
    for r in [("NAME", "PATH", "USED-BY"), *rows]:
        echo(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]}")


@drive_app.command("delete")
def delete(
    name: Annotated[str, typer.Argument(help="The drive to forget (its folder and files stay).")],
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Delete a drive: refused while a run not ended mounts it; its folder and files stay."""
    slurm = slurm_named(server)
    if slurm is not None:
        with failing():
            gone = slurm.delete_drive(name)
    else:
        gone = called("DELETE", f"/drives/{name}", server=server, token=token, start=False).json()
    echo(f"drive {gone['name']} deleted (its folder {gone['path']} is left as it is)")
