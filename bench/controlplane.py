"""Benchmark of the embedded control plane: the scheduler at scale, the store per tick, HTTP writes.

Owns ``main()``, which prints one table and returns the figures as a dict:

* the pure scheduler (``Simulation``, simulated executor, simulated time) on a 1,000-machine
  inventory: an array of 1,000 and of 10,000 copies (one GPU each, 60 s each) to completion, and
  1,000 gang runs (16 GPUs over two machines) to completion: wall time and decisions per second,
  and how the cost grows from 1k to 10k copies against n log n (target: 10k in < 10 s, a ratio no
  worse than 10·log(10k)/log(1k) ≈ 13.3);
* the same 10,000-copy array through the ``Engine`` with a SQLite store (one transaction per tick);
* run creations per second over HTTP against a live ``astra server`` on loopback (SQLite in WAL
  mode, each create one acknowledged transaction); the runs are refused by the scheduler at once
  (a GPU model no machine has), so no process is started.

Run: ``python -m bench.controlplane`` (or through ``task bench``). Nothing here is a test.
"""

from __future__ import annotations

import math
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]


def _inventory(machines: int = 1000):
    from reconciler.controlplane.inventory import default_inventory

    return default_inventory(racks=machines // 8, machines_per_rack=8)


def _array(name: str, size: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "array": {"size": size},
            "task_template": {
                "image": "busybox",
                "command": "true",
                "time_limit_seconds": 3600,
                "requested_resources": {"cpu_cores": 8, "memory_bytes": "32Gi", "gpu_requests": {"count": 1}},
            },
        },
    }


def _gang(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "start": "Gang",
            "task_template": {
                "image": "busybox",
                "command": "true",
                "time_limit_seconds": 3600,
                "requested_resources": {"gpu_requests": {"count": 16}, "per_gpu": {"cpu_cores": 8}},
            },
        },
    }


def simulate_array(size: int) -> dict[str, float]:
    from reconciler.controlplane.simulation import Outcome, Simulation

    sim = Simulation(_inventory(), default=Outcome(after=60.0), keep_log=False)
    counted = [0]
    sim.observer = lambda _s, decisions: counted.__setitem__(0, counted[0] + len(decisions))
    start = time.perf_counter()
    sim.submit(_array("sweep", size))
    sim.run_until_done()
    wall = time.perf_counter() - start
    assert sim.run("sweep").state == "Completed", sim.run("sweep").reason
    return {"wall": wall, "decisions": counted[0], "per_s": counted[0] / wall}


def simulate_gangs(count: int) -> dict[str, float]:
    from reconciler.controlplane.simulation import Outcome, Simulation

    sim = Simulation(_inventory(), default=Outcome(after=60.0), keep_log=False)
    counted = [0]
    sim.observer = lambda _s, decisions: counted.__setitem__(0, counted[0] + len(decisions))
    start = time.perf_counter()
    for i in range(count):
        sim.state.submit(_parse(_gang(f"gang-{i}")), sim.now)
    sim.run_until_done()
    wall = time.perf_counter() - start
    done = sum(1 for r in sim.state.runs.values() if r.state == "Completed")
    assert done == count, f"{done} of {count} gangs completed"
    return {"wall": wall, "decisions": counted[0], "per_s": counted[0] / wall}


def _parse(doc: dict[str, Any]):
    from reconciler.runspec.parse import parse_run

    return parse_run(doc)


def engine_array(size: int) -> dict[str, float]:
    """The array through the Engine and a SQLite store, in simulated time."""
    from reconciler.controlplane.clock import ManualClock
    from reconciler.controlplane.engine import Engine
    from reconciler.controlplane.simulation import Outcome, SimulatedExecutor
    from reconciler.controlplane.store import Store

    with tempfile.TemporaryDirectory() as folder:
        store = Store(f"sqlite:///{folder}/astra.db")
        clock = ManualClock(0.0)
        executor = SimulatedExecutor(Outcome(after=60.0))
        engine = Engine(store, _inventory(), executor, clock.now())
        start = time.perf_counter()
        engine.submit(_array("sweep", size), clock.now())
        steps = 0
        while engine.state.runs["sweep"].state not in ("Completed", "Failed"):
            now = clock.now()
            engine.step(now)
            steps += 1
            times = [t for t in (engine.next_wakeup(now), executor.next_time()) if t is not None]
            if not times:
                break
            clock.set(max(min(times), now))
        wall = time.perf_counter() - start
        state = engine.state.runs["sweep"].state
        store.close()
    assert state == "Completed", state
    return {"wall": wall, "decisions": engine.decisions, "per_s": engine.decisions / wall, "steps": steps}


def http_creations(count: int = 300) -> dict[str, float]:
    """Run creations per second over HTTP against a live server (SQLite, loopback)."""
    import httpx

    with tempfile.TemporaryDirectory() as folder:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = {**os.environ, "ASTRA_HOME": folder, "ASTRA_TOKEN": "bench", "PYTHONPATH": str(ROOT)}
        env.pop("ASTRA_SERVER", None)
        proc = subprocess.Popen(
            [sys.executable, "-m", "reconciler.cli", "server", "--port", str(port)],
            env=env,
            cwd=folder,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            # TCP_NODELAY: httpx writes headers and body apart, and Nagle + delayed ACK would add 40 ms
            nodelay = httpx.HTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
            headers = {"Authorization": "Bearer bench"}
            with httpx.Client(base_url=url, headers=headers, timeout=30, transport=nodelay) as c:
                while True:
                    try:
                        if c.get("/healthz").status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass
                    if time.monotonic() > deadline:
                        raise RuntimeError("the server did not start")
                    time.sleep(0.05)
                start = time.perf_counter()
                for i in range(count):
                    doc = _array(f"r-{i}", 1)
                    doc["spec"]["task_template"]["requested_resources"]["gpu_requests"]["models"] = ["B200"]
                    r = c.post("/api/runs", json=doc)
                    if r.status_code != 201:
                        raise RuntimeError(f"create failed: {r.status_code} {r.text}")
                wall = time.perf_counter() - start
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    return {"wall": wall, "count": count, "per_s": count / wall}


def main() -> dict[str, Any]:
    results: dict[str, Any] = {}
    results["array_1k"] = simulate_array(1_000)
    results["array_10k"] = simulate_array(10_000)
    results["gangs_1k"] = simulate_gangs(1_000)
    results["engine_array_10k"] = engine_array(10_000)
    results["http"] = http_creations()
    t1, t10 = results["array_1k"]["wall"], results["array_10k"]["wall"]
    nlogn = (10_000 * math.log(10_000)) / (1_000 * math.log(1_000))
    results["growth"] = {"ratio": t10 / t1, "n_log_n": nlogn, "ok": t10 / t1 <= nlogn}
    results["target_10k_under_10s"] = t10 < 10.0

    rows = [
        ("scheduler: array 1k copies", results["array_1k"]),
        ("scheduler: array 10k copies", results["array_10k"]),
        ("scheduler: 1k gang runs (16 GPUs)", results["gangs_1k"]),
        ("engine + SQLite: array 10k copies", results["engine_array_10k"]),
    ]
    print("control plane, 1,000 machines × 8 GPUs, simulated executor")
    print(f"{'case':40} {'wall s':>8} {'decisions':>10} {'decisions/s':>12}")
    for label, r in rows:
        print(f"{label:40} {r['wall']:8.2f} {r['decisions']:10d} {r['per_s']:12.0f}")
    g = results["growth"]
    print(
        f"growth 1k → 10k copies: ×{g['ratio']:.1f} (n log n: ×{g['n_log_n']:.1f}) "
        f"{'ok' if g['ok'] else 'WORSE than n log n'}; 10k under 10 s: "
        f"{'yes' if results['target_10k_under_10s'] else 'NO'}"
    )
    h = results["http"]
    print(f"HTTP run creations (SQLite, loopback): {h['per_s']:.0f}/s over {h['count']} runs")
    return results


if __name__ == "__main__":
    main()
