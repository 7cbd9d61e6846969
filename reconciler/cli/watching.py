"""The body of ``astra watch``: one source (folders, or a remote with ``--git``) or the sources
of ``astra.yaml`` (``-c``), driven by ``reconciler.loop``. Thin: it builds the reconcilers and
their event sources from the options and runs them; every step is the loop's.

A source of astra.yaml that declares secrets (``secrets: [{name, file}]``, committed encrypted
with age) has them decrypted with ``--age-identity FILE`` and set at each apply; the alerts it
declares (``alerts:``) are created, updated and (with prune) deleted alike (``loop.declared``).

A source with a webhook secret (``--webhook-secret-file``, or ``webhook_secret_file`` in
astra.yaml) sets it on the control plane (``PUT /sources/{name}/hook``) and asks every
``HOOK_POLL`` seconds whether the webhook was called (``loop.HookEvents``): a signed call starts
the source's next pass at once. The webhook needs an Astraeus API (``--server http…``).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from .output import echo, error
from .planning import Exit, Git, failures, read_token, require_files, setup

__all__ = ["HOOK_POLL", "watch_command"]

#: Seconds between two looks at a source's webhook count.
HOOK_POLL = 2.0


def print_status(name: str, status: dict[str, Any]) -> None:
    stamp = time.strftime("%H:%M:%S", time.localtime(status.get("updated_at") or time.time()))
    state, reason = status.get("state"), status.get("reason")
    line = f"{stamp} {name}: {state}" + ("" if reason == state else f" {reason}")
    if status.get("message"):
        line += f": {status['message']}"
    echo(line)


def _seconds(interval: str | int | None, default: float) -> float:
    from ..git import SourceError
    from ..runspec.quantities import parse_duration

    if interval is None:
        return default
    try:
        return float(interval)
    except ValueError:
        pass
    try:
        return float(parse_duration(str(interval)))
    except ValueError as exc:
        raise SourceError(f"--interval {interval}: give a duration (1m, 30s, 1h) or seconds") from exc


def _sleeping(timeout: float) -> dict[str, set[str]]:
    time.sleep(timeout)
    return {}


def _reconciler(s: Any, git: Git | None, *, cache: Any, declared: Any = None) -> Any:
    """A ``Reconciler`` of the setup's source, fetching the remote ``git`` names (if any)."""
    from ..loop import Reconciler, RemoteOrigin
    from ..state import git_commit, owner

    origin = None
    if git is not None and git.url is not None:
        origin = RemoteOrigin(git.remote(), git.folder)
    paths = list(s.source.paths)
    return Reconciler(
        s.source,
        s.cluster,
        s.store,
        clock=time.time,
        who=owner(),
        cache=cache,
        origin=origin,
        commit=(lambda: None) if origin is not None else (lambda: git_commit(paths)),
        declared=declared,
    )


def _hook(s: Any, secret_file: str | None) -> bool:
    """Set the source's webhook secret on its control plane; whether it has one."""
    if not secret_file:
        return False
    from ..git import SourceError

    secret = read_token(secret_file)
    if not secret or not hasattr(s.store, "set_hook_secret"):
        raise SourceError(
            f"source {s.source.name}: a webhook needs an Astraeus API (--server http…) and a secret of "
            "at least 16 characters in the secret file"
        )
    s.store.set_hook_secret(s.source.name, secret)
    return True


def watch_command(
    paths: list[str],
    *,
    interval: str,
    template: str | None,
    sets: list[str] | None,
    prune: bool,
    allow_empty: bool,
    once: bool,
    source: str | None,
    state: str | None,
    server: str | None,
    token: str | None,
    git: str | None,
    ref: str | None,
    folder: str | None,
    git_token_file: str | None,
    config: str | None,
    webhook_secret_file: str | None,
    age_identity: str | None = None,
) -> int:
    """``astra watch`` (its help is the typer command's); the exit code (``--once``: 0 if Ready).

    Over 60 lines with its parameters, one a line: the body is under 40."""
    from ..load import default_cache
    from ..loop import FileEvents, HookEvents, Watch

    if config is not None:
        return _fleet(config, interval, once, state, server, token, age_identity)
    given = Git(git, ref, folder, git_token_file)
    with failures():
        names = require_files(paths, given)
        seconds = _seconds(interval, 300.0)
        options: dict[str, Any] = dict(
            state=state, server=server, token=token, template=template, sets=sets, prune=prune
        )
        if git is not None:
            s = setup(["."], source=source or given.default_name(), allow_empty=allow_empty, **options)
            s.source = dataclasses.replace(s.source, paths=(folder or ".",), probe=False)
        else:
            s = setup(names, source=source, allow_empty=allow_empty, **options)
        reconciler = _reconciler(s, given, cache=default_cache())
        hooked = _hook(s, webhook_secret_file)
    name = s.source.name
    if once:
        status = reconciler.reconcile_once()
        print_status(name, status)
        return 0 if status.get("state") == "Ready" else 1
    what = git if git is not None else ", ".join(names)
    echo(f"watching {what} as source {name} on {s.cluster.address} (Ctrl-C stops)")
    if hooked:
        events: Any = HookEvents(
            [name], s.store.hook_count, poll=HOOK_POLL, sleep=time.sleep, clock=time.time
        )
        events = events.single(name)
    elif git is not None:
        events = lambda timeout: _sleeping(timeout).get(name, set())  # noqa: E731 (a remote has no file events)
    else:
        events = FileEvents(names)
    Watch(
        reconciler, events, interval=seconds, clock=time.time, on_status=lambda st: print_status(name, st)
    ).run()
    return 0


def _fleet(
    config: str,
    interval: str,
    once: bool,
    state: str | None,
    server: str | None,
    token: str | None,
    age_identity: str | None = None,
) -> int:
    """``astra watch -c astra.yaml``: every source it declares (see the module docstring).

    Over 60 lines with its parameters, one a line: each source's watch made, then the fleet run, in one
    place."""
    from ..load import default_cache
    from ..loop import Fleet, HookEvents, Watch
    from ..runspec.astrafile import load_astra_file

    declared, problems = load_astra_file(config)
    if declared is None:
        for p in problems:
            echo(p.format(), err=True)
        error(f"{len(problems)} problems in {config}: nothing is watched")
        raise Exit(1)
    cache = default_cache()
    watches: dict[str, Watch] = {}
    hooked: dict[str, Any] = {}
    with failures():
        default = _seconds(interval, 60.0)
        for d in declared.sources:
            git = Git(d.repo, d.ref, d.folder, d.token_file) if d.repo else None
            paths = [] if d.path is None else [d.path]
            s = setup(
                paths or ["."],
                source=d.name,
                state=state,
                server=d.cluster or server,
                token=token,
                prune=d.prune,
                allow_empty=d.allow_empty,
            )
            if git is not None:
                s.source = dataclasses.replace(s.source, paths=(d.folder or ".",), probe=False)
            if _hook(s, d.webhook_secret_file):
                hooked[d.name] = s.store

            def said(st: dict[str, Any], name: str = d.name) -> None:
                print_status(name, st)

            from ..loop.declared import declared_of

            watches[d.name] = Watch(
                _reconciler(s, git, cache=cache, declared=declared_of(d, age_identity)),
                lambda timeout: set(),
                interval=float(d.interval) if d.interval else default,
                clock=time.time,
                on_status=said,
            )
    if once:
        states = []
        for name, w in watches.items():
            status = w.reconciler.reconcile_once()
            print_status(name, status)
            states.append(status.get("state"))
        return 0 if all(st == "Ready" for st in states) else 1
    echo(f"watching {len(watches)} sources of {config}: {', '.join(watches)} (Ctrl-C stops)")
    events: Any = _sleeping
    if hooked:
        events = HookEvents(
            list(hooked), lambda n: hooked[n].hook_count(n), poll=HOOK_POLL, sleep=time.sleep, clock=time.time
        )
    Fleet(watches, events, clock=time.time).run()
    return 0
