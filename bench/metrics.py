"""Benchmark of one scrape of ``/metrics`` with many workers held (issue 35).

``main(sizes)`` (``python -m bench --only metrics``; the sizes are the bench's ladder: 1,000 and
10,000, and 100,000 with ``--big``): for each size N, the ``Engine`` with a SQLite store, a
simulated executor and a manual clock, on N/8 machines of 8 GPUs in racks of 32, is given 10
arrays of N/10 copies of one GPU each, which never end: every copy holds its GPU (N workers
Running, N GPUs allocated), and one more array of N/10 copies waits for room. Then the text of
the metrics is made ``ASKS`` times, as ``GET /metrics`` makes it under the gate
(``Metrics.exposition``: the collectors read the scheduler's state, the store's size and its
sources): its p50 and p95, on the server's side (no HTTP).

Target: at most 50 ms at 100,000 workers held (p50). The growth from one size to the next
(×10 workers) is printed beside it: the scrape reads every run and every machine once, and the
waiting workers of the runs that have any, so it grows with them, not with the workers held.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["TARGET_MS", "main"]

ASKS = 30
ARRAYS = 10
TARGET_MS = 50.0


def _array(name: str, size: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "array": {"size": size},
            "task_template": {
                "image": "busybox",
                "command": "true",
                "requested_resources": {"gpu_requests": {"count": 1}, "cpu_cores": 1},
            },
        },
    }


def one(n: int) -> dict[str, Any]:
    """The scrape's p50 and p95 (ms) with ``n`` workers held and ``n``/10 waiting."""
    from reconciler.controlplane.api import create_app
    from reconciler.controlplane.clock import ManualClock
    from reconciler.controlplane.engine import Engine
    from reconciler.controlplane.inventory import load_inventory
    from reconciler.controlplane.simulation import Outcome, SimulatedExecutor
    from reconciler.controlplane.store import Store

    machines = [{"name": f"m{i}", "rack": f"r{i // 32}"} for i in range(n // 8)]
    with tempfile.TemporaryDirectory(prefix="astra-bench-metrics-") as home:
        store = Store(f"sqlite:///{Path(home) / 'astra.db'}")
        clock = ManualClock(1_000_000.0)
        engine = Engine(store, load_inventory({"defaults": {"gpus": 8}, "machines": machines}),
                        SimulatedExecutor(Outcome(after=None)), clock.now())  # fmt: skip
        docs = [_array(f"held-{k}", n // ARRAYS) for k in range(ARRAYS)] + [_array("waits", n // ARRAYS)]
        engine.submit_batch(docs, clock.now())
        began = time.perf_counter()
        while engine.step(clock.now()):
            pass
        placed = time.perf_counter() - began
        metrics = create_app(engine, "bench", clock).state.astra.metrics
        running = sum(1 for w in engine.state.workers.values() if w.state == "Running")
        text = metrics.exposition("default")
        times = []
        for _ in range(ASKS):
            t = time.perf_counter()
            metrics.exposition("default")
            times.append((time.perf_counter() - t) * 1000)
        store.close()
    times.sort()
    return {
        "workers_held": running,
        "lines": text.count(b"\n"),
        "bytes": len(text),
        "place_s": round(placed, 1),
        "p50_ms": round(statistics.median(times), 2),
        "p95_ms": round(times[int(len(times) * 0.95) - 1], 2),
    }


def main(sizes: list[int]) -> dict[str, Any]:
    """Each size's figures, the growth of p50 from one size to the next, and the verdict."""
    out: dict[str, Any] = {"target_ms": TARGET_MS, "sizes": {}}
    last = None
    for n in sizes:
        fig = one(n)
        if last is not None:
            fig["growth"] = round(fig["p50_ms"] / last, 2) if last else None
        last = fig["p50_ms"]
        out["sizes"][str(n)] = fig
        grew = f", ×{fig['growth']} from the size before" if "growth" in fig else ""
        print(
            f"  {n:>7} workers ({fig['workers_held']} held, {n // ARRAYS} waiting): one scrape p50 "
            f"{fig['p50_ms']} ms, p95 {fig['p95_ms']} ms ({fig['lines']} lines, {fig['bytes']} bytes){grew}"
        )
    biggest = out["sizes"][str(max(sizes))]
    out["verdict"] = "MET" if biggest["p50_ms"] <= TARGET_MS else "MISS"
    print(f"  target: at most {TARGET_MS} ms at 100,000 workers held: {out['verdict']} at {max(sizes)}")
    return out


if __name__ == "__main__":
    import sys

    main([int(a) for a in sys.argv[1:]] or [1000, 10_000])
