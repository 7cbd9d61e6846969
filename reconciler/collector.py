"""The one place astra pauses or freezes Python's cyclic garbage collector: ``gc_paused()``.

Why at all: a plan, a validate or a load keeps many small trees (documents, entries) and makes
no cycles; the cyclic collector would walk them again and again (a quarter of a warm load of
3,000 files; 30 ms after a plan of 10,000 runs, at exit). Reference counting still frees
everything as usual; only the search for cycles waits. Measured in ``task bench``.

Where: only at the entry of a unit of work, once: a command (``cli.main``: validate, plan,
apply), a loop's pass (``loop.steps.Reconciler.reconcile_once``), a server's batch of runs
(``api.batch``) and the server's start (its long-lived state frozen). The library's calls
(``plan_source``, ``apply_plan``) leave the collector as their caller has it.

``with gc_paused():`` pauses the collector for the block and runs it again after (when it ran
before: blocks nest). Its options cover the other uses:

* ``exiting=True``: the process ends right after the block (a CLI command): what is alive then is
  frozen (``gc.freeze``) so that nothing walks it on the way out;
* ``keeping=True``: what the block made lives as long as the process (a server's batch of runs:
  the engine holds them until they are deleted): as the block ends, one collection of what is
  not frozen yet (what the block made, and what came since the last such block or the server's
  start; no cycle is left in it) and what survived is frozen with the rest of the long-lived
  state (``astra server`` freezes its own as it starts). The collector's full passes then walk
  only what is new: at 100,000 runs held each walked them all (about a second each, a dozen
  times during one apply). As with the server's start, a frozen object that is later part of a
  cycle is not collected; reference counting frees everything else;
* ``resumed()``: the collector runs in a block inside a paused one (``astra apply --wait``,
  which may follow the runs for hours once the apply is done), and is paused again after it;
* ``pause=False``: the collector keeps running in the block (a long-lived loop), and
  ``settle()`` on what the block yields collects once and freezes what survived (what a full
  reconcile pass keeps alive lives on); leaving the block unfreezes it.

Must not touch: anything but the ``gc`` module's switches.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Collector", "gc_paused", "resumed"]


class Collector:
    """What ``gc_paused`` yields: ``settle()`` collects once and freezes what is left."""

    def __init__(self) -> None:
        self.frozen = False

    def settle(self) -> None:
        gc.collect()
        gc.freeze()
        self.frozen = True


@contextmanager
def gc_paused(*, pause: bool = True, exiting: bool = False, keeping: bool = False) -> Iterator[Collector]:
    """The cyclic collector paused in the block (see the module docstring)."""
    collecting = gc.isenabled()
    if pause:
        gc.disable()
    collector = Collector()
    try:
        yield collector
    finally:
        if exiting:
            gc.freeze()
        elif keeping:
            gc.collect()
            gc.freeze()
        elif collector.frozen:
            gc.unfreeze()
        if pause and collecting:
            gc.enable()


@contextmanager
def resumed() -> Iterator[None]:
    """The cyclic collector running in the block, though a ``gc_paused`` around it paused it."""
    paused = not gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        if paused:
            gc.disable()
