"""``astra secret set NAME [--from-file FILE] | list | delete NAME [--force] | rotate-key``: secrets.

Thin: options in, one API call (``/secrets``, through ``remote.call``), a line or a table out.
A value never comes from the command line (shell history keeps it): ``set`` reads it from
``--from-file`` or from standard input as it is (bytes, newlines kept), or, at a terminal, from
a prompt that does not echo it. No output holds a value.

On a Slurm cluster (``--server slurm://``) one call of ``SlurmCluster``'s instead (its sealed
store in the Slurm state folder, ``clusters/slurm/clustersecrets.py``), as ``astra drive`` does.
``rotate-key`` is Slurm's only: a server's key is rotated on its machine (``astra server
rotate-secrets-key``), and is refused in words here.
"""

from __future__ import annotations

import sys
import time
from typing import Annotated

import typer

from .day2 import failing, slurm_named
from .listing import ListFormat, print_listing
from .options import ListOutput, ServerOpt, TokenOpt
from .output import echo, error
from .remote import called

__all__ = ["secret_app"]

secret_app = typer.Typer(
    name="secret",
    help="Secrets: named values that runs read (env: {NAME: {secret: S}}, secret_files), one workspace's.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


def _value(from_file: str | None) -> bytes:
    """The value: the file's bytes, else standard input's (a prompt without echo at a terminal)."""
    if from_file is not None:
        try:
            with open(from_file, "rb") as f:
                return f.read()
        except OSError as exc:
            error(f"cannot read {from_file}: {exc.strerror or exc}")
            raise typer.Exit(1) from exc
    if sys.stdin.isatty():
        import getpass

        return getpass.getpass("value (not shown): ").encode()
    return sys.stdin.buffer.read()


@secret_app.command("set")
def set_secret(
    name: Annotated[str, typer.Argument(help="The secret's name (letters, digits, '-', '_', '.').")],
    from_file: Annotated[
        str | None, typer.Option("--from-file", help="Read the value from this file (else standard input).")
    ] = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Set a secret's value, from standard input or --from-file (never an argument); runs
    started from now on read it, and none running is stopped."""
    value = _value(from_file)
    slurm = slurm_named(server)
    if slurm is not None:
        with failing():
            row = slurm.put_secret(name, value)
        echo(
            f"secret {name} {'created' if row['created'] else 'set'} on {slurm.address} ({row['size']} bytes)"
        )
        if row["used_by"]:
            echo(f"read by {', '.join(row['used_by'])}: each job submitted from now on reads the new value")
        if row["released"]:
            echo(f"released {', '.join(row['released'])}, which waited for it")
        return
    done = called("PUT", f"/secrets/{name}", server=server, token=token, content=value)
    body = done.json()
    said = "created" if done.status_code == 201 else "set"
    echo(f"secret {body['name']} {said} in workspace {body['workspace']} ({body['size']} bytes)")
    if body["used_by"]:
        echo(f"read by {', '.join(body['used_by'])}: each worker started from now on reads the new value")


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


@secret_app.command("list")
def list_secrets(
    output: ListOutput = ListFormat.table,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """List the secrets: NAME SIZE SET-BY SET-AT USED-BY (never a value). Never starts the local server."""
    slurm = slurm_named(server)
    if slurm is not None:
        with failing():
            items = slurm.list_secrets()
    else:
        items = called("GET", "/secrets", server=server, token=token, start=False).json()["items"]
    if output is not ListFormat.table:
        print_listing(items, output)
        return
    head = ("NAME", "SIZE", "SET-BY", "SET-AT", "USED-BY")
    rows = [
        (s["name"], str(s["size"]), s["set_by"], _when(s["set_at"]), ",".join(s["used_by"]) or "-")
        for s in items
    ]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
    for r in [head, *rows]:
        echo("  ".join(f"{c:<{w}}" for c, w in zip(r[:4], widths, strict=True)) + f"  {r[4]}")


@secret_app.command("delete")
def delete(
    name: Annotated[str, typer.Argument(help="The secret to delete.")],
    force: Annotated[
        bool, typer.Option("--force", help="Delete it though runs read it (their next workers wait for it).")
    ] = False,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Delete a secret: refused while a run not ended reads it, unless --force."""
    slurm = slurm_named(server)
    if slurm is not None:
        with failing():
            slurm.delete_secret(name, force=force)
        echo(f"secret {name} deleted from {slurm.address}")
        return
    path = f"/secrets/{name}" + ("?force=true" if force else "")
    gone = called("DELETE", path, server=server, token=token, start=False).json()
    echo(f"secret {gone['name']} deleted from workspace {gone['workspace']}")


@secret_app.command("rotate-key")
def rotate_key(server: ServerOpt = None) -> None:
    """Seal a Slurm cluster's secrets anew with a new key, in the same key file (--server
    slurm://…); runs go on, and each job submitted from now on reads them. A server's key:
    astra server rotate-secrets-key."""
    slurm = slurm_named(server)
    if slurm is None:
        error(
            "astra secret rotate-key rotates a Slurm cluster's key (--server slurm://…); "
            "a server's secrets key is rotated on the server's machine: astra server rotate-secrets-key"
        )
        raise typer.Exit(1)
    with failing():
        done = slurm.rotate_secrets_key()
    said = f"{done['secrets']} secrets sealed with a new key in {done['key_file']}"
    echo(f"secrets key rotated on {slurm.address}: {said}")
