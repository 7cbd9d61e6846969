"""``astra token``, ``astra quota``, ``astra events`` and ``astra get workspaces``: teams on one cluster.

Thin: options in, one call to the API (``remote.call``: ``--server``/``ASTRA_SERVER``, else the
local control plane), a table (or ``-o json|yaml``) out. Which workspace a call is about is the
server URL's (``…/orgs/ORG/workspaces/W/clusters/C/api``; a bare server: the default one), except
where a command names it (``token create --workspace``, ``quota set W``). What a token may do is
the server's to decide (``controlplane.auth``): a refusal is said in its words, exit 1.

``register(app)`` adds the commands to the ``astra`` application (``cli.app``).
Must not touch: the control plane's modules (only the API's words and shapes).
"""

from __future__ import annotations

import time
from enum import StrEnum
from typing import Annotated, Any
from urllib.parse import quote

import typer

from .listing import ListFormat as Format
from .listing import print_listing
from .options import ListOutput as Output
from .options import ServerOpt, TokenOpt
from .output import echo, error
from .planning import Exit

__all__ = ["events", "get_workspaces", "quota_app", "register", "token_app"]

token_app = typer.Typer(
    name="token",
    help="The cluster's tokens: made for a workspace (or the whole org) with a role; admins only.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)
quota_app = typer.Typer(
    name="quota",
    help="Workspaces' quotas on the cluster (GPUs, runs holding machines); the org's admin only.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


class RoleName(StrEnum):
    read = "read"
    write = "write"
    admin = "admin"


class BudgetPer(StrEnum):
    month = "month"
    week = "week"


def _call(method: str, path: str, server: str | None, token: str | None, **kw: Any) -> Any:
    """The API's answer (JSON), or the server's refusal in one line (exit 1)."""
    from .remote import called

    return called(method, path, server=server, token=token, start=kw.pop("start", True), **kw).json()


def _table(rows: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def _listing(items: list[dict[str, Any]], output: Format, table: list[list[str]], empty: str) -> None:
    if output is not Format.table:
        print_listing(items, output)
    elif len(table) == 1:
        echo(empty)
    else:
        _table(table)


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


# ---- tokens -------------------------------------------------------------------------------------


@token_app.command("create")
def create_token(
    name: Annotated[str, typer.Argument(help="The token's name (lowercase letters, digits, '-').")],
    role: Annotated[RoleName, typer.Option("--role", help="read, write or admin.")],
    workspace: Annotated[
        str | None,
        typer.Option("--workspace", help="Its workspace (made if new); left out: the server URL's."),
    ] = None,
    org: Annotated[bool, typer.Option("--org", help="For every workspace of the org (not one).")] = False,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Make a token and print it: it is shown this once (the server keeps only a digest).

    Example:

        astra token create team-a-ci --workspace team-a --role write
    """
    if org and workspace is not None:
        error("give --workspace or --org, not both")
        raise Exit(1)
    body = {"name": name, "role": role.value, "workspace": "*" if org else workspace}
    made = _call("POST", "/tokens", server, token, json=body)
    where = "every workspace of org " + made["org"] if made["workspace"] is None else made["workspace"]
    echo(made["token"])
    echo(f"token {made['name']} ({made['role']} in {where}): shown once, keep it now", err=True)


@token_app.command("list")
def list_tokens(output: Output = Format.table, server: ServerOpt = None, token: TokenOpt = None) -> None:
    """List the tokens this admin may revoke: NAME WORKSPACE ROLE CREATED BY (never their text)."""
    items = _call("GET", "/tokens", server, token, start=False)["items"]
    table = [["NAME", "WORKSPACE", "ROLE", "CREATED", "BY"]]
    for t in items:
        where = t["workspace"] or "* (org " + t["org"] + ")"
        table.append([t["name"], where, t["role"], _when(t["created_at"]), t["created_by"]])
    _listing(items, output, table, "no tokens but the server's own")


@token_app.command("revoke")
def revoke_token(
    name: Annotated[str, typer.Argument(help="The token's name, as 'astra token list' shows it.")],
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Revoke a token: refused (401) from its very next call on."""
    _call("DELETE", f"/tokens/{quote(name, safe='')}", server, token, start=False)
    echo(f"token {name} revoked")


# ---- quotas and workspaces ----------------------------------------------------------------------


def _limit(value: int | None) -> str:
    return "-" if value is None else str(value)


def _workspace_rows(items: list[dict[str, Any]]) -> list[list[str]]:
    table = [["NAME", "GPUS", "QUOTA GPUS", "RUNS", "QUOTA RUNS", "PENDING"]]
    for w in items:
        u, q = w["usage"], w["quota"]
        table.append(
            [
                w["name"],
                str(u["gpus"]),
                _limit(q["gpus"]),
                str(u["runs"]),
                _limit(q["runs"]),
                str(u["pending"]),
            ]
        )
    return table


@quota_app.command("set")
def set_quota(
    workspace: Annotated[str, typer.Argument(help="The workspace (made if new).")],
    gpus: Annotated[
        int | None, typer.Option("--gpus", min=0, help="The most GPUs it holds at once; left out: no limit.")
    ] = None,
    runs: Annotated[
        int | None,
        typer.Option("--runs", min=0, help="The most runs holding machines at once; left out: no limit."),
    ] = None,
    gpu_hours: Annotated[
        int | None,
        typer.Option(
            "--gpu-hours", min=0, help="A GPU-hour budget per --per (month or week), apart from the quota."
        ),
    ] = None,
    per: Annotated[
        BudgetPer | None, typer.Option("--per", help="The budget's period: month or week (UTC).")
    ] = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Set a workspace's quota on the cluster. Its runs keep what they hold; nothing more of its
    is placed while it is at its quota (the waiting run says so: 'Workspace W is at its quota of
    N GPUs'). With neither --gpus nor --runs, the quota is lifted.

    With --gpu-hours (and --per month, the default, or week), a GPU-hour budget instead, left
    as the quota is: once the workspace's workers held that many GPU-hours in the period, its
    new runs wait ('Workspace W has used its N GPU-hours this month'); its running runs go on.

    Example:

        astra quota set team-a --gpus 16 --runs 4
        astra quota set team-a --gpu-hours 5000 --per month
    """
    if gpu_hours is not None or per is not None:
        _set_budget(workspace, gpu_hours, per, server, token)
        if gpus is None and runs is None:
            return
    body = {"gpus": gpus, "runs": runs}
    w = _call("PUT", f"/workspaces/{quote(workspace, safe='')}/quota", server, token, json=body)
    q = w["quota"]
    echo(f"workspace {w['name']}: quota {_limit(q['gpus'])} GPUs, {_limit(q['runs'])} runs")


def _set_budget(
    workspace: str, gpu_hours: int | None, per: BudgetPer | None, server: str | None, token: str | None
) -> None:
    if gpu_hours is None:
        error("--per goes with --gpu-hours N")
        raise Exit(1)
    body = {"gpu_hours": gpu_hours, "per": (per or BudgetPer.month).value}
    b = _call("PUT", f"/workspaces/{quote(workspace, safe='')}/budget", server, token, json=body)
    used = f"{b['used_gpu_hours']} used in {b['period']['label']}"
    echo(f"workspace {b['workspace']}: budget {b['gpu_hours']} GPU-hours per {b['per']} ({used})")


def get_workspaces(output: Output = Format.table, server: ServerOpt = None, token: TokenOpt = None) -> None:
    """List the workspaces this token sees, with what each holds on the cluster and its quota
    ('-': no limit): NAME GPUS QUOTA-GPUS RUNS QUOTA-RUNS PENDING."""
    items = _call("GET", "/workspaces", server, token, start=False)["items"]
    _listing(items, output, _workspace_rows(items), "no workspaces")


# ---- the audit trail ----------------------------------------------------------------------------


def events(
    run: Annotated[str | None, typer.Option("--run", help="Only this run's events.")] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="Only events this long ago or later (30m, 1h, 2d).")
    ] = None,
    output: Output = Format.table,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """The workspace's audit trail, oldest first: every write (runs created, updated, deleted;
    sources applied; tokens and quotas), who made it (the token's name), when, what changed."""
    query: dict[str, Any] = {}
    if run is not None:
        query["run"] = run
    if since is not None:
        from ..runspec.quantities import parse_duration

        try:
            query["since"] = time.time() - parse_duration(since)
        except ValueError:
            error(f"--since {since!r} is not a duration (30m, 1h, 2d)")
            raise Exit(1) from None
    from urllib.parse import urlencode

    path = "/events" + (f"?{urlencode(query)}" if query else "")
    items = _call("GET", path, server, token, start=False)["items"]
    table = [["TIME", "TOKEN", "ACTION", "WHAT", "CHANGED"]]
    for e in items:
        what = f"{e['kind']} {e['name']}" + (f" (source {e['source']})" if e["source"] else "")
        table.append([_when(e["at"]), e["token"], e["action"], what, _changed(e["detail"])])
    _listing(items, output, table, "no events")


def _changed(detail: dict[str, Any]) -> str:
    """One line of what an event changed."""
    changed = detail.get("changed")
    if isinstance(changed, dict):
        return ", ".join(f"{path}: {c['from']} -> {c['to']}" for path, c in changed.items()) or "-"
    kept = {k: v for k, v in detail.items() if k != "spec"}
    return ", ".join(f"{k}={v}" for k, v in sorted(kept.items())) or "-"


def register(app: typer.Typer) -> None:
    """Add ``token``, ``quota``, ``events`` and ``get workspaces`` to ``app``."""
    app.add_typer(token_app, name="token")
    app.add_typer(quota_app, name="quota")
    app.command("events")(events)
    get_app = typer.Typer(
        name="get", help="List what the cluster has.", no_args_is_help=True, add_completion=False
    )
    get_app.command("workspaces")(get_workspaces)
    app.add_typer(get_app, name="get")
