"""``astra logs WORKER|RUN``: a worker's output; ``-f`` follows it until the worker ends.

A run's name means its leader (the worker of rank 0; an array's copy 0), or with ``--all`` every
worker, each line prefixed with the worker's name; without ``--all`` it says on stderr which one
it shows, and how to see another. ``--tail N`` keeps the last N lines; ``--attempt N`` reads that
attempt's output where the cluster keeps it (the control plane does; Slurm keeps the latest
attempt's output files only, and says so in one line). ``--since`` (``10m``, as ``astra events
--since``, or an RFC 3339 time) keeps the lines written since then, where the cluster knows when
each line was written (the control plane does, to within about a second; ``--tail`` applies
after it, and ``-f`` follows from it); Slurm's output files keep no times, and it says so in one
line. On Slurm the output comes from the jobs' output files (``SlurmCluster.logs``).

Without typer: ``logs_command`` takes ``flags.LogsOptions`` and is run by the plain argv route
or by typer's command made of them (``day2_commands``).

Must not touch: the clusters' insides (``Cluster.logs``, and ``worker_logs`` where a cluster
reads attempts and times), the clock (``day2.clock``, ``day2.sleep``).
"""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING, Any

from .day2 import failing, open_cluster
from .output import echo

if TYPE_CHECKING:
    from .flags import LogsOptions

__all__ = ["FOLLOW_EVERY", "logs_command", "read_log"]

#: How long ``-f`` waits between two reads.
FOLLOW_EVERY = 1.0
#: Worker states after which no more output comes (unless the worker restarts: see ``_ended``).
_ENDED = frozenset({"Completed", "Failed", "Stopped", "Down"})


def logs_command(options: LogsOptions) -> int:
    """Print a worker's output, or a run's (its leader's; --all: every worker's).

    Examples:

        astra logs sweep-17 --tail 20

        astra logs llama-ft -f --since 10m

        astra logs sweep --all
    """
    target, follow, attempt, tail, every = (
        options.target,
        options.follow,
        options.attempt,
        options.tail,
        options.every,
    )
    start = None if options.since is None else since_time(options.since)
    with failing():
        cluster = open_cluster(options.server, options.token)
        if start is not None and not callable(getattr(cluster, "worker_logs", None)):
            raise _no_times(cluster)  # before any look-up: Slurm's output files keep no times
        run, workers = _targets(cluster, target, every)
        _say_masking(cluster, run)
        prefix = len(workers) > 1 or every
        following = follow and attempt is None
        ends = None if following else tail  # the server reads only the end (-f needs it whole)
        texts = {w: read_log(cluster, w, attempt, start, ends) for w in workers}
        partial = dict.fromkeys(workers, "")  # followed with prefixes: a line is printed once whole
        for w in workers:
            shown = _tailed(texts[w], tail)
            if following and prefix:
                shown, _, partial[w] = shown.rpartition("\n")
                shown += "\n" if shown else ""
            _print(shown, w if prefix else None)
        if following:
            _follow(cluster, run, workers, texts, partial if prefix else None, start)
    return 0


def since_time(text: str) -> float:
    """``--since``: a duration before now (``day2.clock``; ``parse_duration``'s forms) or an RFC
    3339 time, as seconds since the epoch; a usage error (one line, exit 1) for anything else."""
    from datetime import datetime

    from ..runspec.quantities import parse_duration
    from . import day2

    with contextlib.suppress(ValueError):  # not a duration: perhaps a time
        return day2.clock() - parse_duration(text)
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        import typer  # a bad --since comes by typer's route (``flags.LogsOptions``)

        raise typer.BadParameter(
            f"{text!r} is neither a duration (30s, 10m, 1h, 2d) nor an RFC 3339 time (2024-05-01T12:00:00Z)",
            param_hint="'--since'",
        ) from None


def read_log(
    cluster: Any, worker: str, attempt: int | None, since: float | None = None, tail: int | None = None
) -> str:
    """The worker's output: its latest attempt's, or ``attempt``'s where the cluster keeps it;
    with ``since``, only the lines written then (seconds since the epoch) or later, where the
    cluster knows when each line was written; with ``tail``, it may be only the last ``tail``
    lines of that, ending at newlines, where the cluster reads only those (``_tailed`` keeps the
    same last lines of either)."""
    from .runviews import CommandFailed

    reader = getattr(cluster, "worker_logs", None)
    if tail is not None and callable(reader):
        return str(reader(worker, attempt, since=since, tail=tail))
    if attempt is None and since is None:
        return str(cluster.logs(worker))
    if not callable(reader):
        if attempt is not None:
            raise CommandFailed(
                f"{cluster.address} keeps the latest attempt's output only: leave out --attempt"
            )
        raise _no_times(cluster)
    return str(reader(worker, attempt) if since is None else reader(worker, attempt, since=since))


def _no_times(cluster: Any) -> Exception:
    """What a cluster that cannot tell when each line was written says (one line, exit 1)."""
    from .runviews import CommandFailed

    return CommandFailed(
        f"{cluster.address} does not record when each line of output was written: "
        "leave out --since (--tail N shows the last lines)"
    )


def _say_masking(cluster: Any, run: str) -> None:
    """On standard error (the output stays the worker's): that the run's secrets are masked."""
    from ..runspec.secretnames import masking_note, secrets_of_document

    live = cluster.get_run(run)
    names = secrets_of_document(live.document) if live is not None else []
    if names:
        print(f"astra: {masking_note(names)}", file=sys.stderr)


def _targets(cluster: Any, target: str, every: bool) -> tuple[str, list[str]]:
    """The run, and the workers whose output to print."""
    from .runviews import CommandFailed

    found = cluster.get_run(target)
    if found is not None:
        workers = sorted(cluster.workers(target), key=lambda w: (w.rank, w.name))
        if not workers:
            raise CommandFailed(f"run {target} has no workers yet")
        if not every and len(workers) > 1:
            _say_which(found, workers)
        return target, [w.name for w in (workers if every else workers[:1])]
    if every:
        raise CommandFailed(f"--all takes a run, and there is no run {target} on {cluster.address}")
    asked = getattr(cluster, "run_of_worker", None)
    if callable(asked):  # the server says whose it is: no listing of runs or workers
        run = asked(target)
        if run is None:
            raise CommandFailed(f"no run or worker {target} on {cluster.address}")
        return run, [target]
    from ..clusters.base import summaries  # the runs' names: the light listing, no documents

    names = sorted((r.name for r in summaries(cluster)), key=len, reverse=True)
    run = next((n for n in names if target.startswith(f"{n}-")), None)
    if run is None or target not in {w.name for w in cluster.workers(run)}:
        raise CommandFailed(f"no run or worker {target} on {cluster.address}")
    return run, [target]


def _say_which(run: Any, workers: list[Any]) -> None:
    """Which worker a run's name stands for, on stderr (as ``kubectl logs job/x`` says the pod it
    chose): an array's copy 0, or any other run's leader; how to see another, or every one."""
    import sys

    first, n = workers[0], len(workers)
    if (run.document.get("spec") or {}).get("array"):
        other = workers[min(n - 1, 1)].name
        words = f"showing copy 0 of {n} ({first.name}); name a copy (astra logs {other}) or add --all"
    else:
        words = f"showing the leader {first.name} (rank 0 of {n} workers); add --all for every worker"
    sys.stderr.write(f"astra: {words}\n")


def _tailed(text: str, tail: int | None) -> str:
    if tail is None:
        return text
    lines = text.splitlines(keepends=True)
    return "".join(lines[-tail:]) if tail else ""


def _print(text: str, prefix: str | None) -> None:
    import sys

    if prefix is None:
        sys.stdout.write(text)
    else:
        for line in text.splitlines():
            echo(f"{prefix} | {line}")
    sys.stdout.flush()


def _follow(
    cluster: Any,
    run: str,
    workers: list[str],
    texts: dict[str, str],
    partial: dict[str, str] | None,
    since: float | None,
) -> None:
    """Print what each worker writes, until every one of them has ended (or Ctrl-C); ``partial``
    (lines prefixed with the worker's name): each worker's line not yet whole; ``since``: each
    read keeps the lines written since then (the same lines, and more as they come)."""
    from . import day2

    live = set(workers)
    while live:
        try:
            day2.sleep(FOLLOW_EVERY)
        except KeyboardInterrupt:
            return
        states = {w.name: w for w in cluster.workers(run)} if cluster.get_run(run) is not None else {}
        for name in sorted(live):
            text = read_log(cluster, name, None, since)
            before = texts[name]
            new = text[len(before) :] if text.startswith(before) else text  # a new attempt: from its start
            texts[name] = text
            if partial is not None:
                whole, _, partial[name] = (partial[name] + new).rpartition("\n")
                _print(whole + "\n" if whole else "", name)
            else:
                _print(new, None)
            if _ended(states.get(name)):
                live.discard(name)
                if partial is not None and partial[name]:
                    _print(partial[name], name)


def _ended(worker: Any) -> bool:
    """No more output will come: the worker is gone, or ended and is not to be restarted."""
    if worker is None:
        return True
    return worker.state in _ENDED and "; restart" not in (worker.reason or "")
