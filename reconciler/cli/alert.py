"""``astra alert create NAME --sink KIND … | list | delete NAME | test NAME | history [NAME]``:
a workspace's alerts, through ``/alerts``.

Thin: options in, one API call (``remote.call``), a line or a table out. A sink's URL, signing
key and token are secrets, named (``--url-secret``, ``--key-secret``, ``--token-secret``): their
values are the workspace's secret store's (``astra secret set NAME``), never an option's.
"""

from __future__ import annotations

import time
from typing import Annotated

import typer

from .listing import ListFormat, print_listing
from .options import ListOutput, ServerOpt, TokenOpt
from .output import echo, error
from .remote import called

__all__ = ["alert_app"]

alert_app = typer.Typer(
    name="alert",
    help="Alerts: tell a chat, a mailbox, a webhook or a git host what happened (runs, sources).",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


@alert_app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="The alert's name (lower-case letters, digits, -).")],
    sink: Annotated[str, typer.Option("--sink", help="webhook, slack, email, github or gitlab.")],
    url_secret: Annotated[
        str | None, typer.Option("--url-secret", help="The secret holding the URL (webhook, slack, email).")
    ] = None,
    key_secret: Annotated[
        str | None, typer.Option("--key-secret", help="The secret holding the webhook's signing key.")
    ] = None,
    token_secret: Annotated[
        str | None, typer.Option("--token-secret", help="The secret holding the GitHub or GitLab token.")
    ] = None,
    to: Annotated[list[str] | None, typer.Option("--to", help="E-mail: an address (repeatable).")] = None,
    sender: Annotated[str | None, typer.Option("--from", help="E-mail: the sender.")] = None,
    repo: Annotated[str | None, typer.Option("--repo", help="GitHub: OWNER/NAME.")] = None,
    project: Annotated[
        str | None, typer.Option("--project", help="GitLab: the project's id or path.")
    ] = None,
    api: Annotated[
        str | None, typer.Option("--api", help="GitHub or GitLab: a self-hosted API's root.")
    ] = None,
    events: Annotated[
        list[str] | None,
        typer.Option("--event", help="A kind to select (run.failed, source.stalled…); repeatable."),
    ] = None,
    sources: Annotated[
        list[str] | None, typer.Option("--source", help="A source to select; repeatable.")
    ] = None,
    labels: Annotated[
        list[str] | None, typer.Option("--label", help="A run label k=v to select; repeatable.")
    ] = None,
    severity: Annotated[
        str, typer.Option("--severity", help="The least severity: info, warning, error.")
    ] = "info",
    restarts: Annotated[
        int, typer.Option("--restarts", min=1, help="run.worker_restarted: tell at this many restarts.")
    ] = 3,
    waited: Annotated[
        str,
        typer.Option("--waited", help="run.quota_wait: tell when a run waited on its quota this long (30m)."),
    ] = "30m",
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Create or replace an alert: the events it selects and the sink it tells."""
    # Over 60 lines: its signature is its options' one declaration (typer's); the body is under 30. (A
    # comment, not the docstring: the docstring is its --help.)
    given = {
        "kind": sink,
        "url": url_secret,
        "key": key_secret,
        "token": token_secret,
        "to": to or None,
        "from": sender,
        "repo": repo,
        "project": project,
        "api": api,
    }
    pairs = [label.partition("=") for label in labels or []]
    if any(not sep for _, sep, _ in pairs):
        error("--label takes KEY=VALUE")
        raise typer.Exit(1)
    body = {
        "sink": {k: v for k, v in given.items() if v is not None},
        "events": events or [],
        "sources": sources or [],
        "labels": {k: v for k, _, v in pairs},
        "severity": severity,
        "restarts": restarts,
        "waited": waited,
    }
    made = called("PUT", f"/alerts/{name}", server=server, token=token, json=body).json()
    echo(f"alert {made['name']} saved in workspace {made['workspace']}: {sink}")


@alert_app.command("list")
def list_alerts(
    output: ListOutput = ListFormat.table, server: ServerOpt = None, token: TokenOpt = None
) -> None:
    """List the alerts: NAME SINK EVENTS SEVERITY."""
    items = called("GET", "/alerts", server=server, token=token, start=False).json()["items"]
    if output is not ListFormat.table:
        print_listing(items, output)
        return
    rows = [("NAME", "SINK", "EVENTS", "SEVERITY")]
    rows += [(a["name"], a["sink"]["kind"], ",".join(a["events"]) or "all", a["severity"]) for a in items]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        echo(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}")


@alert_app.command("delete")
def delete(
    name: Annotated[str, typer.Argument(help="The alert.")], server: ServerOpt = None, token: TokenOpt = None
) -> None:
    """Delete an alert (what it sent stays in the history)."""
    called("DELETE", f"/alerts/{name}", server=server, token=token)
    echo(f"alert {name} deleted")


@alert_app.command("test")
def test(
    name: Annotated[str, typer.Argument(help="The alert.")], server: ServerOpt = None, token: TokenOpt = None
) -> None:
    """Send a test message through the alert's sink; 'astra alert history NAME' shows the answer."""
    called("POST", f"/alerts/{name}/test", server=server, token=token)
    echo(f"a test message of alert {name} is queued: 'astra alert history {name}' shows its answer")


@alert_app.command("history")
def history(
    name: Annotated[str | None, typer.Argument(help="Only this alert's messages.")] = None,
    output: ListOutput = ListFormat.table,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """What the alerts sent, newest first: WHEN ALERT STATE TRIES EVENT ANSWER."""
    query = f"?alert={name}" if name else ""
    items = called("GET", f"/alerts:history{query}", server=server, token=token, start=False).json()["items"]
    if output is not ListFormat.table:
        print_listing(items, output)
        return
    if not items:
        echo("no messages yet")
        return
    for m in items:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(m["done_at"] or m["created_at"]))
        echo(
            f"{when}  {m['alert']}  {m['state']}  {m['attempts']}  {m['event']['text']}  {m['answer'] or '-'}"
        )
