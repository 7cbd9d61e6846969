"""Time for the control plane: the one place that reads a clock.

Owns: the ``Clock`` protocol, ``SystemClock`` (real, monotonic seconds) and ``ManualClock`` (a
simulated clock that only moves when told). The scheduler never reads a clock: the driver reads
one and passes ``now`` in. Must not touch: the scheduler, the store, the executor.
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "ManualClock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """Seconds, as a float, that never go backwards."""

    def now(self) -> float: ...


class SystemClock:
    """The real clock: wall-clock seconds since the epoch at start, advanced monotonically."""

    def __init__(self) -> None:
        self._origin = time.time() - time.monotonic()

    def now(self) -> float:
        return self._origin + time.monotonic()


class ManualClock:
    """A simulated clock: starts at ``start`` and moves only by ``advance`` or ``set``."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        if seconds < 0:
            raise ValueError("a clock does not go backwards")
        self._now += seconds
        return self._now

    def set(self, when: float) -> float:
        if when < self._now:
            raise ValueError("a clock does not go backwards")
        self._now = float(when)
        return self._now
