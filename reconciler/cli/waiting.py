"""``apply --wait``'s face: a live table while the runs settle, one line per run that did not,
and, on Ctrl-C, that the runs go on and the command to follow them.

The verdicts are ``reconciler.waiting``'s; the clock and the sleep are ``day2``'s (a test's
simulated ones there).

Must not touch: what counts as ready or failed (``reconciler.waiting``).
"""

from __future__ import annotations

from typing import Any

from .output import echo, error

__all__ = ["wait_and_report"]


def wait_and_report(cluster: Any, names: list[str], fresh: list[str], settle: float) -> int:
    """Follow ``names`` until each is done; 0 when all are good, 1 naming each that is not, 130
    on Ctrl-C (after saying the runs go on)."""
    import sys

    from ..waiting import BAD, wait_for
    from . import day2

    if not names:
        return 0
    live = _Table() if sys.stdout.isatty() else None
    try:
        with live if live is not None else _Nothing():
            verdicts = wait_for(
                cluster,
                names,
                fresh=fresh,
                sleep=day2.sleep,
                clock=day2.clock,
                settle=settle,
                on_update=live.show if live is not None else None,
            )
    except KeyboardInterrupt:
        error(f"stopped waiting: the runs go on on {cluster.address}")
        echo(f"Follow them: astra get runs {' '.join(sorted(names))} --watch", err=True)
        return 130
    bad = {n: v for n, v in verdicts.items() if v.state in BAD}
    for name, v in sorted(verdicts.items()):
        if name not in bad:
            echo(f"{name}: {v.state}" + (f" ({v.reason})" if v.reason else ""))
    for name, v in sorted(bad.items()):
        error(f"run {name} is {v.state}: {v.reason or 'no reason given'}")
    if bad:
        error(f"{len(bad)} of {len(verdicts)} runs did not succeed: {', '.join(sorted(bad))}")
        return 1
    return 0


class _Nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


class _Table:
    """A rich live table on a terminal: RUN STATE REASON, redrawn at each look."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.live import Live

        self._live = Live(console=Console(), auto_refresh=False)

    def __enter__(self) -> _Table:
        self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._live.__exit__(*exc)

    def show(self, verdicts: dict[str, Any]) -> None:
        from rich.table import Table

        t = Table("RUN", "STATE", "REASON", box=None)
        for name, v in sorted(verdicts.items()):
            t.add_row(name, v.state, v.reason)
        self._live.update(t, refresh=True)
