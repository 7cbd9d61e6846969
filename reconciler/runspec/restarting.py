"""The words of a run whose workers are restarting after failures, and how they are read back.

Owns: the run's reason while some of its workers wait out a restart's backoff
(``2 of 8 workers restarting: Worker x-3: Could not start 'trainz': …; restart 6 of 10 in 300 s``),
reading a worker's restart reason back into its failure and restart number (``restart_of``), the
mark of a worker that could not start at all (the local executor's ``Could not start 'CMD': …``),
and the rule ``apply --wait`` stops on (``hopeless``).

Read by the scheduler (the run's reason), ``apply --wait`` (its verdicts) and the CLI's help.
Must not touch: pydantic, I/O, clocks: plain values and pure functions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import messages as msg
from .vocabulary import RESTART_LIMIT

__all__ = [
    "COULD_NOT_START",
    "HOPELESS_RULE",
    "Restart",
    "hopeless",
    "restart_of",
    "says_restarting",
    "workers_restarting",
]

#: How the executor's reason begins when a worker's command could not be started at all.
COULD_NOT_START = "Could not start "
#: ``apply --wait`` gives up on a run once one failure has cost this many restarts in a row.
HOPELESS_AFTER = RESTART_LIMIT // 2
#: The rule, as ``apply --help`` says it (a test holds the two together).
HOPELESS_RULE = (
    f"a worker cannot start at all or a run has spent half its restart budget "
    f"({HOPELESS_AFTER} of {RESTART_LIMIT}) on the same failure"
)

#: What every restart reason holds (``messages.RESTART_REASON``).
_MARK = "; restart "
_RESTART = re.compile(
    re.escape(msg.RESTART_REASON)
    .replace(re.escape("{reason}"), "(?P<reason>.*)")
    .replace(re.escape("{n}"), r"(?P<n>\d+)")
    .replace(re.escape("{of}"), r"(?P<of>(?: of \d+)?)")
    .replace(re.escape("{delay}"), r"(?P<delay>\d+)")
    + "$",
    re.DOTALL,
)

_PREFIX = re.compile(
    "^"
    + re.escape(msg.WORKERS_RESTARTING)
    .replace(re.escape("{k}"), r"\d+")
    .replace(re.escape("{n}"), r"\d+")
    .replace(re.escape("{worker}"), r"\S+")
    .replace(re.escape("{reason}"), "")
)

#: A Running run's reason begins with its readout (``Workers 1 running of 4; 3 of 4 workers …``).
_READOUT = re.compile(
    "^"
    + re.escape(msg.WORKERS_READOUT)
    .replace(re.escape("{running}"), r"\d+")
    .replace(re.escape("{total}"), r"\d+")
    + "; "
)


@dataclass(frozen=True)
class Restart:
    """A worker waiting to restart: why it failed, the restart it waits for, and in how long."""

    failure: str
    n: int
    delay: int
    limited: bool


def restart_of(reason: str | None) -> Restart | None:
    """The restart a worker's reason announces (``<failure>; restart N of 10 in D s``), or ``None``."""
    if not reason or _MARK not in reason:  # the common case, without the pattern
        return None
    m = _RESTART.search(reason)
    if m is None:
        return None
    # A run's reason holds its worker's after ``K of N workers restarting: Worker W: `` (and, while
    # another worker runs, after the readout): the failure is the worker's words alone.
    failure = _PREFIX.sub("", _READOUT.sub("", m["reason"], count=1), count=1)
    return Restart(failure, int(m["n"]), int(m["delay"]), bool(m["of"]))


def workers_restarting(k: int, n: int, worker: str, reason: str) -> str:
    """``K of N workers restarting: Worker W: <its reason>``: a run some of whose workers wait to restart."""
    return msg.WORKERS_RESTARTING.format(k=k, n=n, worker=worker, reason=reason)


def says_restarting(reason: str | None) -> bool:
    """Whether ``reason`` is a run's ``K of N workers restarting: …`` (not a worker's own)."""
    return bool(reason) and _PREFIX.match(reason or "") is not None


def hopeless(reason: str | None, *, same: bool = True) -> str | None:
    """Why ``apply --wait`` should stop waiting on a run with this reason (``None``: keep waiting).

    A worker that could not start at all will not start on a retry either; and a failure that
    came back on every restart until half the budget was spent is not a flake. ``same``: every
    failure seen of this run had these words (the caller remembers what it saw)."""
    if not reason:
        return None
    if COULD_NOT_START in reason:
        return "a worker cannot start at all"
    again = restart_of(reason)
    if again is not None and again.limited and same and again.n >= HOPELESS_AFTER:
        return f"{again.n} restarts of {RESTART_LIMIT} spent on the same failure"
    return None
