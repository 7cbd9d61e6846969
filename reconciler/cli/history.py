"""``astra history [SOURCE]`` and ``astra diff REV1 REV2``: thin commands over the source's
memory and the plan.

``history`` lists each apply of a source, newest first: when, the revision and its commit's
subject and author, who ran it, what it changed, the result and its note (a rollback, a
force-push). ``diff`` says what applying REV2 would change where REV1 was applied, in run terms
(created, replaced, updated in place, deleted), not in lines: REV1's runs are applied to an
in-memory cluster (``clusters.fake``) and REV2 is planned against it with prune.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Annotated, Any

import typer

from .listing import ListFormat, print_listing
from .options import ListOutput, ServerOpt, TokenOpt
from .output import echo
from .plan import Files, GitPath, GitRef, GitTokenFile, GitUrl, StateUrl
from .planning import Exit, Git, failures, require_files, setup

__all__ = ["diff", "history"]

_ACTIONS = (("created", "+"), ("configured", "~"), ("replaced", "-/+"), ("deleted", "-"))


def history(
    source: Annotated[
        str | None, typer.Argument(help="The source (default: the current folder's).", show_default=False)
    ] = None,
    output: ListOutput = ListFormat.table,
    state: StateUrl = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Each apply of a source, newest first: revision, commit subject and author, who, when, what changed."""
    from ..state import default_source_name, person

    with failures():
        name = source or default_source_name(["."])
        s = setup(["."], source=name, state=state, server=server, token=token, start=False)  # only reads
        entries = s.store.read(s.source.name).history
    rows = [e.to_json() for e in reversed(entries)]
    if output is not ListFormat.table:
        print_listing(rows, output)
        return
    if not rows:
        echo(f"no applies of source {s.source.name} yet")
        return
    table = [["WHEN", "REVISION", "SUBJECT", "AUTHOR", "WHO", "CHANGES", "RESULT"]]
    for r in rows:
        revision = r.get("revision") or {}
        shown = revision.get("id") or r.get("commit") or "-"
        if "sha1:" in shown:
            head, _, rest = shown.partition("sha1:")
            shown = f"{head}sha1:{rest[:7]}" + ("+dirty" if rest.endswith("+dirty") else "")
        changes = r.get("changes") or {}
        said = " ".join(f"{mark}{len(changes.get(k, []))}" for k, mark in _ACTIONS if changes.get(k)) or "-"
        result = r["result"] + (f" ({r['note']})" if r.get("note") else "")
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["when"]))
        subject = str(revision.get("subject") or "-")[:50]
        author = str(revision.get("author") or "-")
        table.append([when, shown[:40], subject, author, person(r["who"]), said, result])
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def diff(
    rev1: Annotated[str, typer.Argument(help="The commit applied (the before).", show_default=False)],
    rev2: Annotated[str, typer.Argument(help="The commit to compare (the after).", show_default=False)],
    files: Files = None,
    git: GitUrl = None,
    ref: GitRef = None,
    path: GitPath = None,
    git_token_file: GitTokenFile = None,
    output: Annotated[str, typer.Option("--output", "-o", help="text, json or markdown.")] = "text",
) -> None:
    """What applying REV2 would change where REV1 was applied, in runs: created, replaced,
    updated in place, deleted (of -f's repository, or of --git's).

    Example: astra diff HEAD~1 HEAD -f runs/
    """
    from ..plan import plan_to_json, render_plan
    from ..plan.render_markdown import render_markdown

    given = Git(git, ref, path, git_token_file)
    with failures():
        paths = require_files(files, given)
        made = diff_revisions(paths, given, rev1, rev2)
    data = plan_to_json(made)
    if output == "json":
        echo(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False))
    elif output == "markdown":
        sys.stdout.write(render_markdown(data))
    else:
        sys.stdout.write(f"Diff {rev1} → {rev2}\n" + render_plan(data))
    raise Exit(0)


def diff_revisions(paths: list[str], git: Git, rev1: str, rev2: str) -> Any:
    """The plan of ``rev2``'s files where ``rev1``'s were applied (see the module docstring)."""
    from ..apply import apply_plan
    from ..clusters.fake import FakeCluster
    from ..load import load_source
    from ..reconcile import LoadFailed, Source, make_plan, shown_as, with_revision
    from .planning import checkout_of

    cluster = FakeCluster("diff://", now=time.time)
    store = cluster.source_store()
    plans = []
    for rev in (rev1, rev2):
        checkout = checkout_of(paths, Git(git.url, git.ref, git.folder, git.token_file, rev))
        loaded = shown_as(load_source(checkout.paths), checkout)  # no cache: each run's document
        if not loaded.ok:
            raise LoadFailed(loaded.errors)
        source = Source("diff", tuple(checkout.shown), prune=True, allow_empty=True, probe=False)
        plans.append(with_revision(make_plan(source, loaded, cluster, store, time.time()), checkout, loaded))
        if rev == rev1:
            apply_plan(plans[0], cluster, store, now=time.time, who="astra diff")
    return plans[1]
