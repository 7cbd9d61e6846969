"""The options of the commands with a plain argv route, declared once.

Each command's options are one frozen dataclass (``ValidateOptions``, ``PlanOptions``,
``ApplyOptions``, ``UnlockOptions``; the reads typed all day: ``GetRunsOptions``,
``WorkersOptions``, ``DescribeRunOptions``, ``LogsOptions``, ``SourcesOptions``) whose fields
carry their ``Flag`` (names, help, kind, default, choices, environment variable). From it are
made, both:

* typer's command (``typer_command``: its signature, built from the fields in their order, so
  ``--help`` lists them as declared), and
* the plain argv route (``parse``: the same options read without importing typer, which costs
  every such command a few hundred milliseconds on a shared two-core machine; anything it does
  not know, a value out of its choices say, goes to typer, which answers as for any command),
  and its ``--help`` (``plainhelp``: typer's text, written by click from the same fields).

Both routes give the command's body one value, the dataclass, with the same fields: lists as
tuples of strings, a choice as its word.

Must not touch: what a command does with its options; typer at import (``typer_command``
imports it when typer's app is made).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Literal

__all__ = [
    "ApplyOptions",
    "DescribeRunOptions",
    "Flag",
    "GetRunsOptions",
    "LogsOptions",
    "PlanOptions",
    "SourcesOptions",
    "UnlockOptions",
    "ValidateOptions",
    "WatchOptions",
    "WorkersOptions",
    "parse",
    "typer_command",
]

#: ``flag``: a switch; ``value``: one value; ``list``: a value that may repeat; ``args``: the
#: positional arguments (a list); ``arg``: one positional argument.
Kind = Literal["flag", "value", "list", "args", "arg"]


@dataclass(frozen=True)
class Flag:
    """One option or argument of a command line (``names``: none for an argument)."""

    names: tuple[str, ...]
    help: str
    kind: Kind = "value"
    #: typer's type, which its help shows (``TEXT``, ``PATH``, ``FLOAT``, ``INTEGER``)
    type: Literal["text", "path", "float", "int"] = "text"
    choices: tuple[str, ...] = ()
    env: str | None = None
    minimum: float | None = None
    metavar: str | None = None
    required: bool = False
    #: false: the command checks the value itself, in typer's words (``logs --since``): given,
    #: the command goes to typer
    plain: bool = True


#: A command's options: frozen, and made with ``__init__`` only (no ``__eq__``, ``__hash__`` or
#: ``__repr__``, which nothing compares or prints): each method a dataclass makes is compiled at
#: import, and this module is imported by every command of the plain route (11 classes: about
#: half of its 13-23 ms import, 2 December 2026, load 3).
_options = dataclass(frozen=True, eq=False, repr=False)


def _opt(flag: Flag, default: Any = None) -> Any:
    """A dataclass field carrying ``flag``; lists default to an empty tuple."""
    if flag.kind in ("list", "args"):
        return field(default=(), metadata={"flag": flag})
    if flag.kind == "flag":
        default = False if default is None else default
    return field(default=default, metadata={"flag": flag})


# ---- the options several commands share, each declared once ---------------------------------

FILES = Flag(("--file", "-f"), "Run spec files or folders (recursive); repeatable.", "list", "path")
TEMPLATE = Flag(("--template",), "Apply this template to every run.")
SETS = Flag(("--set",), "A template parameter, key=value; repeatable.", "list")
PRUNE = Flag(("--prune",), "Delete runs this source applied that the files no longer hold.", "flag")
ALLOW_EMPTY = Flag(("--allow-empty",), "With --prune: allow deleting every run of the source.", "flag")
SOURCE = Flag(("--source",), "The source's name (default: the git remote and path, else the folder).")
STATE = Flag(("--state",), "Where sources' state is kept when the cluster keeps none (a database URL).")
SERVER = Flag(
    ("--server",),
    "The cluster: http(s)://… an Astraeus API, slurm://[PARTITION] (default: the local one).",
    env="ASTRA_SERVER",
)
TOKEN = Flag(("--token",), "The bearer token.", env="ASTRA_TOKEN")
#: the seeds' commands' server (``astra astraeus …``, ``get workers``): an Astraeus API only
API_SERVER = Flag(("--server",), "The Astraeus API (default: the local one).", env="ASTRA_SERVER")
#: ``-o`` of every listing (``listing.print_listing``)
LIST_OUTPUT = Flag(("--output", "-o"), "table, json or yaml.", choices=("table", "json", "yaml"))
VERBOSE = Flag(("--verbose", "-v"), "Show unchanged runs (=) too.", "flag")
GIT = Flag(("--git",), "A git repository's URL: its files as of the fetched commit (not with -f).")
REF = Flag(("--ref",), "With --git: a branch or a tag (default: HEAD).")
PATH = Flag(("--path",), "With --git: the folder in the repository.")
GIT_TOKEN_FILE = Flag(("--git-token-file",), "With --git: a file holding an HTTPS token.")
REVISION = Flag(("--revision",), "The files as of this older commit (a rollback; of --git, or of -f's repo).")
STRICT = Flag(("--strict",), "Warnings (a run without a time limit, …) are errors.", "flag")
CONFIG = Flag(
    ("--config", "-c"), "astra.yaml: several sources, each with its own status and lock.", type="path"
)
AGE_IDENTITY = Flag(
    ("--age-identity",),
    "An age identity file (age-keygen's): decrypts the secrets astra.yaml's sources declare.",
)
REPLACE = Flag(
    ("--replace",),
    "Plan this run as replaced (stopped, started again) though its file is unchanged; repeatable.",
    "list",
)


@_options
class ValidateOptions:
    """``astra validate``'s options."""

    paths: tuple[str, ...] = _opt(
        Flag(
            (),
            "Files or folders (searched recursively for *.yaml, *.yml, *.json).",
            "args",
            "path",
            required=True,
        )
    )
    output: str = _opt(
        Flag(
            ("--output", "-o"),
            "text: FILE:LINE:COLUMN: PATH: MESSAGE; json: a list.",
            choices=("text", "json"),
        ),
        "text",
    )
    template: str | None = _opt(
        Flag(("--template",), "Apply this template to every run (as a 'template:' block would).")
    )
    sets: tuple[str, ...] = _opt(
        Flag(("--set",), "A template parameter, key=value (a YAML value); repeatable.", "list")
    )
    strict: bool = _opt(Flag(("--strict",), "Warnings are errors (exit 1).", "flag"))


@_options
class PlanOptions:
    """``astra plan``'s options (``paths``: run specs given as plain arguments, as with ``-f``)."""

    paths: tuple[str, ...] = _opt(Flag((), "Run spec files or folders, as with -f.", "args", "path"))
    files: tuple[str, ...] = _opt(FILES)
    template: str | None = _opt(TEMPLATE)
    sets: tuple[str, ...] = _opt(SETS)
    prune: bool = _opt(PRUNE)
    allow_empty: bool = _opt(ALLOW_EMPTY)
    output: str = _opt(
        Flag(
            ("--output", "-o"),
            "text, json (the saved plan's format), or markdown (a pull request's comment).",
            choices=("text", "json", "markdown"),
        ),
        "text",
    )
    out: str | None = _opt(Flag(("--out",), "Save the plan here, for 'astra apply FILE'.", type="path"))
    detailed_exitcode: bool = _opt(
        Flag(("--detailed-exitcode",), "Exit 0: no changes, 2: changes, 1: error.", "flag")
    )
    verbose: bool = _opt(VERBOSE)
    source: str | None = _opt(SOURCE)
    state: str | None = _opt(STATE)
    server: str | None = _opt(SERVER)
    token: str | None = _opt(TOKEN)
    git: str | None = _opt(GIT)
    ref: str | None = _opt(REF)
    path: str | None = _opt(PATH)
    git_token_file: str | None = _opt(GIT_TOKEN_FILE)
    revision: str | None = _opt(REVISION)
    strict: bool = _opt(STRICT)
    replace: tuple[str, ...] = _opt(REPLACE)
    config: str | None = _opt(
        Flag(
            ("--config", "-c"),
            "astra.yaml: plan its source --source NAME (or its only one) with its secrets and alerts.",
            type="path",
        )
    )
    age_identity: str | None = _opt(AGE_IDENTITY)
    status_context: str | None = _opt(
        Flag(
            ("--status-context",),
            "Post the plan's verdict on its commit as a status with this context (in CI), "
            "through the workspace's github/gitlab alerts.",
            metavar="CTX",
        )
    )


@_options
class ApplyOptions:
    """``astra apply``'s options (``targets``: a saved plan, or run specs as with ``-f``)."""

    targets: tuple[str, ...] = _opt(
        Flag(
            (),
            "A plan saved by 'astra plan --out'; or run spec files or folders, as with -f.",
            "args",
            "path",
            metavar="[PLANFILE | PATH...]",
        )
    )
    files: tuple[str, ...] = _opt(FILES)
    template: str | None = _opt(TEMPLATE)
    sets: tuple[str, ...] = _opt(SETS)
    prune: bool = _opt(PRUNE)
    allow_empty: bool = _opt(ALLOW_EMPTY)
    yes: bool = _opt(Flag(("--yes", "-y"), "Apply without asking.", "flag"))
    dry_run: bool = _opt(Flag(("--dry-run",), "Plan and check everything, change nothing.", "flag"))
    wait: bool = _opt(
        Flag(
            ("--wait",),
            "Follow the runs until each is Ready (a Service: Running for --settle seconds without "
            "a restart) or ends (Batch); 1 naming each that failed or restarted, and at once when "
            "a worker cannot start at all or a run has spent half its restart budget (5 of 10) "
            "on the same failure.",
            "flag",
        )
    )
    settle: float = _opt(
        Flag(
            ("--settle",),
            "With --wait: how long a Service runs without a restart to be Ready.",
            type="float",
            minimum=0,
        ),
        10.0,
    )
    verbose: bool = _opt(VERBOSE)
    source: str | None = _opt(SOURCE)
    state: str | None = _opt(STATE)
    server: str | None = _opt(SERVER)
    token: str | None = _opt(TOKEN)
    git: str | None = _opt(GIT)
    ref: str | None = _opt(REF)
    path: str | None = _opt(PATH)
    git_token_file: str | None = _opt(GIT_TOKEN_FILE)
    revision: str | None = _opt(REVISION)
    allow_dirty: bool = _opt(
        Flag(("--allow-dirty",), "In CI (CI=true): apply files that differ from their commit.", "flag")
    )
    strict: bool = _opt(STRICT)
    replace: tuple[str, ...] = _opt(REPLACE)
    config: str | None = _opt(
        Flag(
            ("--config", "-c"),
            "astra.yaml: apply its source --source NAME (or its only one) with its secrets and alerts.",
            type="path",
        )
    )
    age_identity: str | None = _opt(AGE_IDENTITY)


@_options
class UnlockOptions:
    """``astra force-unlock``'s options."""

    lock_id: str = _opt(
        Flag((), "The lock's id, as the refused apply said it.", "arg", metavar="ID", required=True), ""
    )
    source: str | None = _opt(SOURCE)
    state: str | None = _opt(STATE)
    server: str | None = _opt(SERVER)
    token: str | None = _opt(TOKEN)


@_options
class WatchOptions:
    """``astra watch``'s options (typer's route only: a watch lasts; its start-up is no matter)."""

    paths: tuple[str, ...] = _opt(Flag((), "Files or folders to watch.", "args", "path"))
    interval: str = _opt(
        Flag(
            ("--interval",),
            "Between full resyncs (±10% jitter; --git: a fetch at each): 1m, 30s, or seconds.",
        ),
        "5m",
    )
    template: str | None = _opt(TEMPLATE)
    sets: tuple[str, ...] = _opt(Flag(("--set",), "A template parameter, key=value.", "list"))
    prune: bool = _opt(PRUNE)
    allow_empty: bool = _opt(ALLOW_EMPTY)
    once: bool = _opt(Flag(("--once",), "Reconcile once and exit (1 unless Ready).", "flag"))
    source: str | None = _opt(SOURCE)
    state: str | None = _opt(STATE)
    server: str | None = _opt(SERVER)
    token: str | None = _opt(TOKEN)
    git: str | None = _opt(GIT)
    ref: str | None = _opt(REF)
    path: str | None = _opt(PATH)
    git_token_file: str | None = _opt(GIT_TOKEN_FILE)
    config: str | None = _opt(CONFIG)
    webhook_secret_file: str | None = _opt(
        Flag(
            ("--webhook-secret-file",),
            "A file with the secret that signs POST /sources/NAME/hook (a signed call: a pass now).",
        )
    )
    age_identity: str | None = _opt(AGE_IDENTITY)


# ---- the reads typed all day ----------------------------------------------------------------


@_options
class GetRunsOptions:
    """``astra get runs``'s options."""

    names: tuple[str, ...] = _opt(Flag((), "Only these runs (default: every run).", "args"))
    output: str = _opt(
        Flag(
            ("--output", "-o"),
            "table, wide (adds FILE REVISION), json or yaml.",
            choices=("table", "wide", "json", "yaml"),
        ),
        "table",
    )
    selector: tuple[str, ...] = _opt(
        Flag(("--selector", "-l"), "Only runs with these labels: key=value[,…].", "list")
    )
    states: tuple[str, ...] = _opt(Flag(("--state",), "Only runs in this state (repeatable).", "list"))
    watch: bool = _opt(
        Flag(("--watch", "-w"), "Look again every 2 s and print the table when it changes.", "flag")
    )
    server: str | None = _opt(SERVER)
    token: str | None = _opt(TOKEN)


@_options
class WorkersOptions:
    """``astra get workers``' (and ``astra astraeus workers``') options."""

    run: str = _opt(Flag((), "The run.", "arg", required=True), "")
    output: str = _opt(LIST_OUTPUT, "table")
    server: str | None = _opt(API_SERVER)
    token: str | None = _opt(TOKEN)


@_options
class DescribeRunOptions:
    """``astra describe run``'s options."""

    name: str = _opt(Flag((), "The run.", "arg", required=True), "")
    all_events: bool = _opt(
        Flag(("--all-events",), "Every event of the run (default: the latest 50).", "flag")
    )
    server: str | None = _opt(SERVER)
    token: str | None = _opt(TOKEN)


@_options
class LogsOptions:
    """``astra logs``' options."""

    target: str = _opt(
        Flag((), "A worker (sweep-17), or a run: its leader, or --all.", "arg", required=True), ""
    )
    follow: bool = _opt(Flag(("--follow", "-f"), "Keep printing new output until the worker ends.", "flag"))
    attempt: int | None = _opt(
        Flag(("--attempt",), "That attempt's output (1 the first; default: the latest).", type="int")
    )
    tail: int | None = _opt(Flag(("--tail",), "Only the last N lines.", type="int", minimum=0))
    since: str | None = _opt(
        Flag(
            ("--since",),
            "Only lines written this long ago or later (30s, 10m, 1h, 2d), or since an RFC 3339 "
            "time (2024-05-01T12:00:00Z; without an offset: local time).",
            plain=False,
        )
    )
    every: bool = _opt(Flag(("--all",), "For a run: every worker, each line prefixed with its name.", "flag"))
    server: str | None = _opt(SERVER)
    token: str | None = _opt(TOKEN)


@_options
class SourcesOptions:
    """``astra status``' and ``astra source list``'s options."""

    output: str = _opt(LIST_OUTPUT, "table")
    state: str | None = _opt(STATE)
    server: str | None = _opt(SERVER)
    token: str | None = _opt(TOKEN)


def flags_of(options: type) -> list[tuple[str, Flag]]:
    """Each field's name and ``Flag``, in the order declared."""
    return [(f.name, f.metadata["flag"]) for f in fields(options)]


def _value(flag: Flag, raw: Any) -> Any:
    """What the dataclass holds of a value typer or ``parse`` gave (``None``: not given)."""
    if flag.kind in ("list", "args"):
        return tuple(str(v) for v in raw or ())
    if raw is None or flag.kind == "flag":
        return raw
    if flag.choices:
        return str(getattr(raw, "value", raw))
    if flag.type in ("float", "int"):
        return {"float": float, "int": int}[flag.type](raw)
    return str(raw)


def made(options: type, given: dict[str, Any]) -> Any:
    """``options`` from what was given (by typer or ``parse``); the rest as declared."""
    kept = {}
    for name, flag in flags_of(options):
        if name in given and given[name] is not None:
            kept[name] = _value(flag, given[name])
    return options(**kept)


# ---- the plain argv route ------------------------------------------------------------------


def parse(options: type, args: list[str]) -> Any:
    """``options`` of plain arguments, read without typer; ``None`` when anything is not plain
    (an unknown option, ``--help``, ``--``, a value out of its choices or range, a required
    argument missing): typer then answers."""
    by_name = {n: (name, flag) for name, flag in flags_of(options) for n in flag.names}
    positional = [(name, flag) for name, flag in flags_of(options) if not flag.names]
    given: dict[str, Any] = {}
    rest = iter(args)
    for arg in rest:
        name, eq, inline = arg.partition("=") if arg.startswith("--") else (arg[:2], "", arg[2:])
        if not arg.startswith("-") or arg == "-":
            if not positional:
                return None
            given.setdefault(positional[0][0], []).append(arg)
            continue
        if name not in by_name:
            return None
        param, flag = by_name[name]
        if not flag.plain:
            return None
        if flag.kind == "flag":
            if eq or inline:
                return None
            given[param] = True
            continue
        value = inline if (eq or inline) else next(rest, None)
        if value is None or not _plain_value(flag, value):
            return None
        if flag.kind == "list":
            given.setdefault(param, []).append(value)
        else:
            given[param] = value
    for param, flag in flags_of(options):
        if flag.env and param not in given and os.environ.get(flag.env):
            given[param] = os.environ[flag.env]
        if flag.kind == "arg":
            if len(given.get(param, ())) != 1:
                return None  # one argument: typer says what is missing or extra
            given[param] = given[param][0]
        elif flag.required and not given.get(param):
            return None
    return made(options, given)


def _plain_value(flag: Flag, value: str) -> bool:
    """Whether ``value`` is one typer would take as it is."""
    if flag.choices:
        return value in flag.choices
    if flag.type in ("float", "int"):
        try:
            number = float(value) if flag.type == "float" else int(value)
        except ValueError:
            return False
        return flag.minimum is None or number >= flag.minimum
    return True


# ---- typer's command -----------------------------------------------------------------------


def annotated(flag: Flag, default: Any = None) -> Any:
    """typer's ``Annotated[type, Option(...)]`` (or ``Argument``) of ``flag``, and its default
    (``...``: required), for a typer signature."""
    from pathlib import Path
    from typing import Annotated

    base: Any = {"text": str, "path": Path, "float": float, "int": int}[flag.type]
    if flag.choices:  # typer's choices are an Enum's values
        base = _choices(flag.choices)
        default = base(default)
    if flag.kind in ("list", "args"):
        kind: Any = list[base] if flag.required else list[base] | None
        default = ... if flag.required else None
    elif flag.kind == "flag":
        kind, default = bool, bool(default)
    elif flag.kind == "arg":
        kind, default = base, ...
    else:
        kind = base if default is not None else base | None
    return Annotated[kind, typer_info(flag)], default


def _choices(values: tuple[str, ...]) -> Any:
    """An Enum of ``values``, each its own name."""
    from enum import StrEnum

    return StrEnum("Choice", [(v, v) for v in values])


def typer_info(flag: Flag) -> Any:
    """typer's ``Option`` (or ``Argument``) of ``flag``."""
    import typer

    if not flag.names:
        return typer.Argument(help=flag.help, metavar=flag.metavar, show_default=False)
    if flag.kind == "list":
        return typer.Option(*flag.names, help=flag.help, show_default=False)
    return typer.Option(*flag.names, help=flag.help, envvar=flag.env, min=flag.minimum)


def typer_command(options: type, body: Callable[[Any], int], name: str, doc: str) -> Callable[..., None]:
    """A typer command of ``options``' fields (in their order) that calls ``body`` with them
    and exits with its code."""
    import inspect

    import typer

    parameters, hints = [], {}
    for f in fields(options):
        hint, default = annotated(f.metadata["flag"], f.default)
        hints[f.name] = hint
        parameters.append(
            inspect.Parameter(
                f.name,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                default=inspect.Parameter.empty if default is ... else default,
                annotation=hint,
            )
        )

    def command(**given: Any) -> None:
        raise typer.Exit(body(made(options, given)))

    setattr(command, "__signature__", inspect.Signature(parameters))  # noqa: B010 (what typer reads)
    command.__annotations__ = {**hints, "return": None}
    command.__name__ = command.__qualname__ = name
    command.__doc__ = doc
    return command
