"""The targets of issues 19 and 29, in one place, and the growth check every figure is held to.

Each target is a limit on a ratio or a figure measured in the same ``task bench`` run. The
issue's sizes are 1,000, 10,000 and 100,000 specs: the bench's ladder is ``--n`` / 10, ``--n``
(default 10,000) and, with ``--big``, ``--big-n`` (default 100,000); its rows name the ladder's
rungs ``small``, ``main`` and ``big``, so a trial at other sizes shows the same rows.

Growth: a figure measured at sizes a < b grows ``figure(b) / figure(a)``; it is at most n log n
when that ratio is at most ``(b·ln b) / (a·ln a)`` (×13.3 from 1k to 10k, ×12.5 from 10k to 100k),
the same as its cost per spec growing at most ``ln b / ln a``. The check is on the figure as
measured (a whole command's wall time, a p50, a peak memory), fixed costs included.
"""

from __future__ import annotations

import math

__all__ = ["nlogn_bound"]

#: cold ``astra validate`` ÷ yaml-rs alone reading and parsing the same files on one core, at most
#: (issue 29: a simpler house may cost a tenth more than issue 19's 1.0)
VALIDATE_FLOOR = 1.1
#: check-jsonschema ÷ cold ``astra validate``, at least (round 1's; a reference kept)
CHECK_JSONSCHEMA = 5.0
#: warm ``astra plan`` (nothing changed), seconds a spec, at most: issue 29's 0.5 s at 10,000 and
#: 5 s at 100,000 (what a person feels, not a ratio to a floor; read + sha256 is still reported)
WARM_PLAN_S_PER_SPEC = 0.5 / 10_000
#: the first ``astra apply`` into an empty server, runs a second, at least (10,000 in 5 s; the
#: same rate at 100,000: linear)
APPLY_RUNS_PER_S = 2000.0
#: ``astra watch``: one file changed → watch's pass done, p50, ms, at most
WATCH_P50_MS = 100.0
#: at 100,000 workers: server peak RSS (MiB), ``GET /runs?view=summary`` p50 (ms), a tick p50 (ms)
WORKERS = {"rss_mib": 1024.0, "summary_ms": 50.0, "tick_ms": 200.0}
#: the peak memory of a cold ``astra plan`` at 100,000 specs (all its processes), MiB, at most
PLAN_PEAK_MIB = 600.0


def nlogn_bound(a: int, b: int) -> float:
    """The most a figure may grow from size ``a`` to size ``b`` and still be n log n."""
    return (b * math.log(b)) / (a * math.log(a))
