"""The body of ``astra plan`` and the steps ``apply``, ``watch`` and ``status`` share, free of
typer: ``astra plan`` with plain arguments runs ``plan_command`` without importing typer at all
(``reconciler.cli.main``'s plain route, ``flags.parse``), and the typer command calls the same
function with the same ``PlanOptions``.

``Exit(code)`` ends a command with that code (``app.run`` and ``reconciler.cli.main`` turn it
into the exit code); ``failures()`` turns our errors into one line and ``Exit(1)``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .output import echo, error

__all__ = [
    "Exit",
    "Git",
    "Setup",
    "apply_setup",
    "checkout_of",
    "failures",
    "git_of",
    "impossible_asks",
    "plan_command",
    "plan_files",
    "plan_warnings",
    "read_token",
    "require_files",
    "setup",
    "shown_plan",
    "source_setup",
    "sources_store",
    "with_outlook",
]


class Exit(Exception):
    """End the command with ``code`` (what it had to say is said already)."""

    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


@dataclass
class Setup:
    source: Any
    cluster: Any
    store: Any


@dataclass(frozen=True)
class Git:
    """Where a source's files come from in git: ``--git URL --ref REF --path DIR`` (a remote),
    ``--git-token-file FILE``, and ``--revision SHA`` (an older commit: of the remote, or of the
    repository the ``-f`` folders are in)."""

    url: str | None = None
    ref: str | None = None
    folder: str | None = None
    token_file: str | None = None
    revision: str | None = None

    def remote(self) -> Any:
        from ..git import Remote
        from ..home import astra_home

        assert self.url is not None
        return Remote(self.url, self.ref, home=astra_home(), token=read_token(self.token_file))

    def default_name(self) -> str:
        from ..git import clean_folder, redact

        assert self.url is not None
        return f"{redact(self.url)}//{clean_folder(self.folder)}".rstrip("/")


def read_token(path: str | None) -> str | None:
    """The token in ``path`` (its first line), or ``None``; the token itself is never shown."""
    if not path:
        return None
    from ..git import SourceError

    try:
        with open(os.path.expanduser(path), encoding="utf-8") as f:
            return f.readline().strip() or None
    except OSError as exc:
        raise SourceError(f"cannot read the token file {path}: {exc.strerror or exc}") from exc


def checkout_of(paths: list[str], git: Git | None) -> Any:
    """The ``Checkout`` the git options name (``None``: the folders as they are on disk)."""
    if git is None or (git.url is None and git.revision is None):
        return None
    from ..git import checkout_commit
    from ..home import astra_home

    if git.url is None:
        return checkout_commit(paths, str(git.revision), astra_home())
    remote = git.remote()
    fetched = remote.fetch()
    if git.revision is None:
        return remote.checkout(fetched.revision, git.folder)
    revision = remote.describe(remote.commit(git.revision), rollback=True)
    return remote.checkout(revision, git.folder)


def setup(
    paths: list[str],
    *,
    source: str | None,
    state: str | None,
    server: str | None,
    token: str | None,
    template: str | None = None,
    sets: list[str] | None = None,
    prune: bool = False,
    allow_empty: bool = False,
    git: Git | None = None,
    start: bool = True,
    replace: list[str] | tuple[str, ...] = (),
) -> Setup:
    """The source, the cluster (with retries) and the store the options name (``start=False``, a
    command that only reads: the local server is not started; with ``--state`` it needs no
    cluster at all, and ``cluster`` is ``None`` when none runs)."""
    import os

    from ..reconcile import Source, retrying
    from ..state import default_source_name, open_store

    missing = [p for p in paths if not os.path.exists(p)]
    if missing and (git is None or git.url is None):  # said first: a typo leaves no source behind
        error(f"{', '.join(missing)}: no such file or folder")
        raise Exit(1)
    cluster = _cluster_of(server, token, start, state)
    checkout = checkout_of(paths, git)
    if git is not None and git.url is not None:
        name = source or git.default_name()
        paths = list(checkout.shown) if checkout is not None else paths
    else:
        name = source or default_source_name(paths)
    src = Source(
        name,
        tuple(paths),
        template,
        tuple(sets or ()),
        prune,
        allow_empty,
        checkout=checkout,
        replace=tuple(replace),
    )
    return Setup(src, None if cluster is None else retrying(cluster), open_store(state, cluster))


def _cluster_of(server: str | None, token: str | None, start: bool, state: str | None) -> Any:
    """The cluster the options name; ``None`` when none runs, the command only reads
    (``start=False``) and the state is kept elsewhere (``--state``): reading it needs no cluster."""
    from ..clusters.base import ClusterError
    from .connect import connect

    try:
        return connect(server, token) if start else connect(server, token, start=False)
    except ClusterError:
        if start or not state:
            raise
        return None


def sources_store(state: str | None, server: str | None, token: str | None) -> Any:
    """The sources' store the options name, for a command that only reads it (``astra status``,
    ``astra source list``): ``setup``'s store, without a source or the reconciler (``reconcile``
    costs such a command a third of its start-up); the local server is never started."""
    from ..state import open_store

    return open_store(state, _cluster_of(server, token, False, state))


def plan_files(paths: list[str], options: Any) -> tuple[Setup, Any]:
    """``source_setup`` of the options, then the plan of the files (the local cache used)."""
    from ..load import default_cache
    from ..reconcile import plan_source

    s = source_setup(paths, options)
    made = plan_source(s.source, s.cluster, s.store, time.time(), cache=default_cache())
    return s, made


@contextmanager
def failures() -> Iterator[None]:
    """Our errors as one line and ``Exit(1)`` (the files' problems one per line first). Their
    classes are imported only when something was raised: ``reconciler.apply`` costs a plan 5 ms."""
    try:
        yield
    except Exception as exc:  # ours: said in one line, Exit(1); anything else is raised again as it is
        from ..apply import ApplyFailed
        from ..clusters.base import ClusterError
        from ..git import SourceError
        from ..plan import PlanError
        from ..reconcile import LoadFailed, ReconcileError
        from ..state import StateError

        ours = (ClusterError, StateError, PlanError, ReconcileError, ApplyFailed, SourceError)
        if isinstance(exc, LoadFailed):
            for e in exc.errors:
                echo(e.format(), err=True)
        elif not isinstance(exc, ours):
            raise
        error(str(exc))
        raise Exit(1) from None


#: The actions that start a run, and those that send no document, by their words (an ``Action`` is
#: its word: compared as one, it costs a tenth of ``.value``, for each of a plan's 10,000 noops).
_STARTS = ("create", "replace")
_SENDS_NOTHING = ("noop", "delete")


def impossible_asks(made: Any, cluster: Any) -> list[str]:
    """``RUN: why`` for each run the plan would start that no machine of the cluster could ever
    hold (asked of the cluster only when the plan starts a run that asks for GPUs), and each
    whose outlook (``with_outlook``, when ``made`` has it) is that it would fail."""
    from ..plan import describe_ask, impossible_ask
    from .refusals import with_failed_outlooks

    starting = [c for c in made.changes if c.action in _STARTS and describe_ask(c.after) is not None]
    capacity = getattr(cluster, "capacity", None)
    known = capacity() if starting and capacity is not None else None
    found = ((c.address, impossible_ask(c.after, known)) for c in starting) if known is not None else ()
    return with_failed_outlooks(made, {name: why for name, why in found if why})


def with_outlook(made: Any, cluster: Any) -> Any:
    """``made`` with each create's and replace's outlook (where it would start now, or why it
    would wait), when the cluster answers a dry run (``placement``: the http cluster's
    ``POST /runs:placement``); asked only when the plan starts a run. A cluster that has no
    answer, or fails to give one (said at debug level), leaves the plan as it was: the dry run
    never fails a plan."""
    import dataclasses
    import logging

    from ..clusters.base import ClusterError

    starting = [c for c in made.changes if c.action in _STARTS and c.after is not None]
    ask = getattr(cluster, "placement", None)
    if not starting or ask is None:
        return made
    try:
        seen = ask([c.after for c in starting])
    except ClusterError as exc:
        logging.getLogger(__name__).debug("no placement: %s", exc)
        return made
    if not seen:
        return made
    changes = tuple(
        dataclasses.replace(c, outlook=seen[c.address]) if c.action in _STARTS and c.address in seen else c
        for c in made.changes
    )
    return dataclasses.replace(made, changes=changes)


def plan_warnings(made: Any) -> list[str]:
    """The warnings (``reconciler.runspec.lint``) of the documents the plan would send, in words:
    ``RUN (FILE): PATH: warning: MESSAGE``."""
    from ..runspec.lint import lint

    out = []
    sent = [c for c in made.changes if c.after is not None and c.action not in _SENDS_NOTHING]
    for c in sorted(sent, key=lambda c: c.address):
        where = f"{c.address} ({c.file})" if c.file else c.address
        out += [f"{where}: {w.format()}" for w in lint(c.after)]
    return out


def require_files(
    files: list[Path] | list[str] | tuple[str, ...] | None,
    git: Git | None = None,
    paths: list[Path] | list[str] | tuple[str, ...] | None = None,
) -> list[str]:
    """The run specs given, with ``-f`` or as plain arguments (as ``astra validate`` takes them);
    none with ``--git URL``."""
    given = [*(files or []), *(paths or [])]
    if git is not None and git.url is not None:
        if given:
            error("give -f PATH or --git URL (with --path DIR), not both")
            raise Exit(1)
        return []
    if not given:
        error("give the run specs: -f PATH (files or folders), or --git URL")
        raise Exit(1)
    return [str(f) for f in given]


def source_name(options: Any, given: Git, specs: list[str]) -> str:
    """The source a command's options name before it plans: ``--source``, else ``--git``'s, else
    the files' (``state.default_source_name``)."""
    from ..state import default_source_name

    return options.source or (given.default_name() if given.url else default_source_name(specs))


def git_of(options: Any) -> Git:
    """The git options of a command's options (``PlanOptions``, ``ApplyOptions``)."""
    return Git(options.git, options.ref, options.path, options.git_token_file, options.revision)


def source_setup(paths: list[str], options: Any) -> Setup:
    """``setup`` of the source a command's options name (``PlanOptions``, ``ApplyOptions``)."""
    return setup(
        paths,
        source=options.source,
        state=options.state,
        server=options.server,
        token=options.token,
        template=options.template,
        sets=list(options.sets),
        prune=options.prune,
        allow_empty=options.allow_empty,
        git=git_of(options),
        replace=options.replace,
    )


def apply_setup(planfile: Path | None, options: Any) -> tuple[Any, Setup]:
    """``astra apply``'s saved plan (``None`` for -f) and the source, cluster and store its
    options name (the files: ``-f`` and the plain arguments)."""
    from ..plan import plan_from_json

    if planfile is None:
        files = [*options.files, *options.targets] or None
        return None, source_setup(require_files(files, git_of(options)), options)
    try:
        saved = plan_from_json(json.loads(planfile.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        error(f"cannot read the plan {planfile}: {exc}")
        raise Exit(1) from None
    s = setup(
        [str(planfile.parent)],
        source=saved.source,
        state=options.state,
        server=options.server,
        token=options.token,
    )
    return saved, s


def plan_command(options: Any) -> int:
    """Show what apply would change, and what it costs; change nothing.

    + create, ~ update in place, -/+ replace (with the workers, GPUs and time it stops),
    - delete (only with --prune, only runs this source applied), = unchanged (with -v).

    Examples:

        astra plan -f examples/

        astra plan examples/laptop

        astra plan -f runs/ --prune --out plan.json --detailed-exitcode

        astra plan --git https://github.com/acme/runs.git --ref main --path runs -o markdown

        astra plan -f runs/ --replace nightly-eval   (rerun it, the plan reviewed)

        astra plan -c astra.yaml --source team-a --age-identity age.txt   (its secrets and alerts too)
    """
    # its help, typer's and the plain route's; the body of astra plan: the exit code
    from ..plan import plan_to_json
    from .declaring import configured, with_declared

    with failures():
        options, declared = configured(options)
    given = git_of(options)
    specs = require_files(options.files, given, options.paths)
    from .plan_status import finished, verdict

    with failures(), verdict(options, specs, source_name(options, given, specs)) as seen:
        s, made = plan_files(specs, options)
        made = with_declared(made, s, declared)[0]
        seen.planned(made, s)
        made = with_outlook(made, s.cluster)
        impossible = impossible_asks(made, s.cluster)
    data = plan_to_json(made)
    if options.out is not None:
        Path(options.out).write_text(_saved(data), encoding="utf-8")
    if options.output == "markdown":
        from ..plan.render_markdown import render_markdown

        sys.stdout.write(render_markdown(data))
        warned: list[str] = []
    else:
        if options.output == "json":
            sys.stdout.write(_saved(data))
        else:
            sys.stdout.write(shown_plan(data, verbose=options.verbose))
            if options.out is not None:
                out = options.out
                echo(f"Saved the plan to {out}: 'astra apply {out}' carries out exactly this plan.")
        warned = plan_warnings(made)
        for line in warned:
            echo(line, err=True)
    strict = f"{len(warned)} warning{'s' if len(warned) != 1 else ''}, and --strict: they are errors"
    refused = impossible[0] if impossible else (strict if options.strict and warned else None)
    finished(options, specs, seen, made, refused)
    if impossible:
        for line in impossible:
            error(line)
        return 1
    if options.strict and warned:
        error(strict)
        return 1
    return 2 if options.detailed_exitcode and made.has_changes else 0


def shown_plan(data: dict[str, Any], *, verbose: bool) -> str:
    """A plan's JSON form as the terminal shows it: its revision, its changes (in colour when
    stdout is a terminal that takes it)."""
    from ..plan import render_plan
    from ..plan.render_markdown import revision_lines
    from .colour import enabled, paint_plan

    return paint_plan(revision_lines(data) + render_plan(data, verbose=verbose), enabled())


def _saved(data: dict[str, Any]) -> str:
    """A plan's JSON form as saved (``--out``) and printed (``-o json``)."""
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
