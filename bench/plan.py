"""Benchmark of plan, apply and watch: N specs against a live ``astra server`` that holds them all.

``main(folder, n)`` starts ``astra server`` on a free loopback port (a temporary ``ASTRA_HOME``
and SQLite database, and an inventory of small machines on which no generated run fits, so
the scheduler refuses every run at once: the server holds them, and no process is started),
applies every spec once (``astra apply -f DIR --yes``, timed), then measures, each as a cold
process, the median of ``repeat`` interleaved rounds, after one round that is not counted (a
server just seeded makes its listings at their first reads):

* **cold plan**: ``astra plan -f DIR`` with the local cache folder deleted first;
* **warm plan**: the same with the cache the cold plan left (nothing changed);
* **the floor**: ``python -c`` walking DIR, reading and sha256-hashing every file;
* **cold validate**: ``astra validate DIR``.

Then one in-process cProfile of the warm plan (the same calls the command makes), and
``astra watch DIR`` as a subprocess: after its first pass (``Ready``), ``changes`` times one
file's label is rewritten, and two latencies are taken from the write: until the run's
``resource_version`` changed on the server (polled every 5 ms: the change is live), and until
watch printed its ``Ready`` line for that pass (the apply done, bookkeeping included: the
figure the target is checked against).

Targets: warm plan ≤ 3× the floor; cold plan ≤ 2× cold validate; watch p50 ≤ 250 ms.
The server and the watch process are always stopped, whatever happens.
"""

from __future__ import annotations

import cProfile
import os
import pstats
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from .hotpath import profile_grid, profile_rows
from .measure import Run, Sample, grid, run_cold

__all__ = ["main"]

TOKEN = "bench-token"
SOURCE = "bench"
TARGET_WARM, TARGET_COLD, TARGET_WATCH_MS = 3.0, 2.0, 250.0
ANCHORS = (
    "Terraform: about 8 min to plan 1,600 resources",
    "Flux: 1,000 Kustomizations reconciled in 4 m 16 s",
)
#: 16 machines of 8 small GPUs (128 GPUs: the client's check that a machine could hold each run
#: passes), each with one core and 1 GiB: every generated run asks for more, so the scheduler
#: refuses each at once (Failed, "never fits") and starts no process.
INVENTORY = "machines:\n" + "".join(
    f"  - name: small-{i:02d}\n    gpus: 8\n    gpu_model: T4\n    gpu_memory_gb: 16\n"
    "    cpu_cores: 1\n    memory_bytes: 1Gi\n"
    for i in range(16)
)
FLOOR_CODE = """\
import hashlib, os, sys
n = 0
for root, dirs, files in os.walk(sys.argv[1]):
    dirs[:] = sorted(d for d in dirs if not d.startswith("."))
    for name in sorted(files):
        if name.endswith((".yaml", ".yml", ".json")) and not name.startswith("."):
            with open(os.path.join(root, name), "rb") as f:
                hashlib.sha256(f.read()).hexdigest()
            n += 1
print(n)
"""
SUMMARY = re.compile(r"Plan: (\d+) to create, (\d+) to update, (\d+) to replace, (\d+) to delete\.")
START_TIMEOUT = 60.0
WATCH_READY_TIMEOUT = 1800.0
CHANGE_TIMEOUT = 120.0


def main(
    folder: Path,
    n: int,
    *,
    repeat: int = 3,
    changes: int = 20,
    apply_n: int = 500,
    astra: str | None = None,
    py: str = sys.executable,
) -> dict[str, Any]:
    """Run the whole part; print its tables; return its figures."""
    astra = astra or str(Path(py).parent / "astra")
    files = sorted(p for p in folder.rglob("*") if p.suffix in (".yaml", ".yml", ".json"))
    if len(files) != n:
        raise SystemExit(f"bench plan: {len(files)} spec files in {folder}, not {n}")
    work = Path(tempfile.mkdtemp(prefix="astra-bench-plan-"))
    server: subprocess.Popen | None = None
    watcher: _Watcher | None = None
    originals: dict[Path, bytes] = {}
    report: dict[str, Any] = {"n": n, "repeat": repeat}
    # a SIGTERM (a CI timeout, kill PID) ends this through the finally below, which stops the children
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        server, url = _start_server(work, py)
        client_home = work / "client"
        client_home.mkdir()
        env = _client_env(client_home)
        conn = ["--server", url, "--token", TOKEN, "--source", SOURCE]
        print(f"\nplan, apply and watch: {n} specs against astra server at {url} (SQLite, loopback)")

        # ---- the first apply, timed on its own server; then the server is seeded --------------
        report["apply"] = _measure_apply(work, folder, files, apply_n, py, astra)
        a = report["apply"]
        print(
            f"first apply (astra apply -f DIR --yes) of {a['n']} runs on an empty server: "
            f"{a['wall_s']:.1f} s ({a['runs_per_s']:.1f} runs/s)"
        )
        if a["n"] < n:
            print(
                f"  the first {a['n']} of the {n} specs (--apply-n): each run applied costs one create and "
                f"one small inventory write, so an apply grows as n"
            )
        seed = _seed(url, folder)
        held = _count_runs(url)
        if held != n:
            raise SystemExit(f"bench plan: the server holds {held} runs after seeding, not {n}")
        report["seed"] = {"wall_s": round(seed, 3), "server_holds": held}
        print(
            f"server seeded through its API with what an apply of all {n} leaves (each run created, "
            f"the source's inventory written once): {seed:.1f} s; server holds {held} runs"
        )

        # ---- cold plan, warm plan, the floor, cold validate: interleaved rounds -----------------
        cache = client_home / "cache"
        plan_argv = [astra, "plan", "-f", str(folder), *conn]
        commands = {
            "cold plan": (plan_argv, "astra plan -f DIR (cache folder deleted first)"),
            "warm plan": (plan_argv, "astra plan -f DIR (cache warm, nothing changed)"),
            "floor: read + sha256": (
                [py, "-c", FLOOR_CODE, str(folder)],
                "python -c '<os.walk, read each file, sha256>' DIR",
            ),
            "cold validate": ([astra, "validate", str(folder)], "astra validate DIR"),
        }
        samples = {name: Sample(name, shown) for name, (_, shown) in commands.items()}
        for f in files:
            f.read_bytes()  # the page cache
        for name, (argv, _) in commands.items():  # one round not counted: a server just seeded
            if name == "cold plan":  # builds what it keeps (its listings) at the first reads
                shutil.rmtree(cache, ignore_errors=True)
            _check_output(_run(env, argv), name, n)
        for _ in range(repeat):
            for name, (argv, _) in commands.items():
                if name == "cold plan":
                    shutil.rmtree(cache, ignore_errors=True)
                run = _run(env, argv)
                _check_output(run, name, n)
                samples[name].runs.append(run)
        report["measurements"] = {k: s.to_json(n) for k, s in samples.items()}
        print(_table(samples, n))
        warm, floor = samples["warm plan"].wall, samples["floor: read + sha256"].wall
        cold, validate = samples["cold plan"].wall, samples["cold validate"].wall

        # ---- one profile of the warm plan, in this process --------------------------------------
        report["profile"] = _profile_warm(folder, url, cache)
        print(_profile_text(report["profile"]))

        # ---- one file changed under astra watch ------------------------------------------------
        watcher = _Watcher([astra, "watch", str(folder), "--interval", "86400", *conn], env)
        ready = watcher.wait_for(lambda line: " Ready " in line, WATCH_READY_TIMEOUT)
        report["watch_first_pass_s"] = round(ready, 3)
        print(f"\nastra watch: first full pass Ready after {ready:.1f} s; now {changes} one-file changes")
        picks = [files[(i * 7919) % len(files)] for i in range(changes)]
        for p in picks:
            originals.setdefault(p, p.read_bytes())
        live_ms, ready_ms = [], []
        for i, path in enumerate(picks):
            to_live, to_done = _one_change(watcher, url, path, i)
            live_ms.append(to_live)
            ready_ms.append(to_done)
        report["watch"] = {
            "changes": changes,
            "detected_by": "live: the run's resource_version changed (GET every 5 ms); "
            "done: watch printed Ready for the pass",
            "live_ms": [round(x, 1) for x in live_ms],
            "done_ms": [round(x, 1) for x in ready_ms],
            "live_p50_ms": round(_pct(live_ms, 50), 1),
            "live_p95_ms": round(_pct(live_ms, 95), 1),
            "done_p50_ms": round(_pct(ready_ms, 50), 1),
            "done_p95_ms": round(_pct(ready_ms, 95), 1),
        }
        w = report["watch"]
        print(
            f"write → run updated on the server: p50 {w['live_p50_ms']:.0f} ms, "
            f"p95 {w['live_p95_ms']:.0f} ms\n"
            f"write → watch's pass done (Ready): p50 {w['done_p50_ms']:.0f} ms, "
            f"p95 {w['done_p95_ms']:.0f} ms"
        )

        # ---- verdicts ---------------------------------------------------------------------------
        report["ratios"] = [
            _verdict("warm plan / floor (read + sha256)", warm / floor, f"<= {TARGET_WARM:g}x", TARGET_WARM),
            _verdict("cold plan / cold validate", cold / validate, f"<= {TARGET_COLD:g}x", TARGET_COLD),
            _verdict(
                "watch: write → apply done, p50",
                w["done_p50_ms"],
                f"<= {TARGET_WATCH_MS:g} ms",
                TARGET_WATCH_MS,
                unit="ms",
            ),
        ]
        print(_ratio_text(report["ratios"]))
        report["anchors"] = list(ANCHORS)
        print(
            f"\nanchors, for context: {ANCHORS[0]}; {ANCHORS[1]}.\n"
            f"here: {a['n']} runs applied in {a['wall_s']:.0f} s; {n} runs planned cold in {cold:.1f} s, "
            f"warm in {warm:.2f} s; one changed file applied by watch in "
            f"{w['done_p50_ms'] / 1000:.1f} s (p50)"
        )
        return report
    finally:
        if watcher is not None:
            watcher.stop()
        for path, data in originals.items():
            path.write_bytes(data)
        if server is not None:
            _stop(server, signal.SIGTERM, 60)
        shutil.rmtree(work, ignore_errors=True)
        signal.signal(signal.SIGTERM, previous)


def _terminated(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)


# ---- the server ---------------------------------------------------------------------------------


def _measure_apply(work: Path, folder: Path, files: list[Path], k: int, py: str, astra: str) -> dict:
    """``astra apply -f`` of the first ``k`` specs into an empty server of its own, timed."""
    k = min(k, len(files))
    subset = work / "apply-subset"
    for f in files[:k]:
        target = subset / f.relative_to(folder)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, target)
    side = work / "apply-server"
    side.mkdir()
    server, url = _start_server(side, py)
    try:
        (side / "client").mkdir()
        env = _client_env(side / "client")
        argv = [astra, "apply", "-f", str(subset), "--yes", "--server", url, "--token", TOKEN]
        run = _run(env, [*argv, "--source", SOURCE])
        _check(run, "astra apply -f DIR --yes")
        held = _count_runs(url)
        if held != k:
            raise SystemExit(f"bench plan: the server holds {held} runs after the apply, not {k}")
    finally:
        _stop(server, signal.SIGTERM, 60)
    return {
        "command": "astra apply -f DIR --yes --server URL --token T --source bench",
        "n": k,
        "wall_s": round(run.wall, 3),
        "runs_per_s": round(k / run.wall, 1),
        "peak_rss_mib": round(run.rss_kib / 1024, 1),
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_server(work: Path, py: str, machines: str = INVENTORY) -> tuple[subprocess.Popen, str]:
    """``astra server`` in ``work`` (its home ``work/server``) on ``machines`` (an inventory file's text)."""
    import httpx

    home = work / "server"
    home.mkdir()
    inventory = work / "inventory.yaml"
    inventory.write_text(machines, encoding="utf-8")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASTRA_")}
    env["ASTRA_HOME"] = str(home)
    argv = [py, "-m", "reconciler.cli", "server", "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--db", f"sqlite:///{home}/astra.db", "--inventory", str(inventory), "--token", TOKEN]
    log = open(work / "server.log", "wb")  # noqa: SIM115 (the child holds it)
    proc = subprocess.Popen(
        argv, env=env, cwd=work, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
    )
    log.close()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if proc.poll() is not None:
            tail = (work / "server.log").read_text(errors="replace")[-2000:]
            raise SystemExit(f"bench plan: astra server exited {proc.returncode}:\n{tail}")
        try:
            if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                _make_drives(url)
                return proc, url
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            _stop(proc, signal.SIGTERM, 10)
            raise SystemExit(f"bench plan: astra server did not answer within {START_TIMEOUT:g} s")
        time.sleep(0.05)


def _make_drives(url: str) -> None:
    """The drives the generated specs mount (``specs.DRIVES``): a run naming a drive its
    workspace does not have is refused at create."""
    import httpx

    from .specs import DRIVES

    for name, _ in DRIVES:
        made = httpx.post(
            url + "/api/drives", json={"name": name}, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
        )
        if made.status_code not in (201, 409):
            raise SystemExit(f"bench plan: making drive {name} answered {made.status_code}: {made.text}")


def _stop(proc: subprocess.Popen, sig: int, timeout: float) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _client(url: str):
    import httpx

    nodelay = httpx.HTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
    return httpx.Client(
        base_url=url + "/api", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=300, transport=nodelay
    )


def _seed(url: str, folder: Path) -> float:
    """Put the server where a whole apply of ``folder`` leaves it, through the API: the runs
    created (the normalised documents apply sends) in batches (``POST /runs:batch``), and the
    source's inventory written once."""
    from reconciler.load import load_source
    from reconciler.plan import normalize
    from reconciler.wire import BATCH_MAX

    start = time.perf_counter()
    loaded = load_source([str(folder)])
    if not loaded.ok:
        raise SystemExit(f"bench plan: the specs do not load: {loaded.errors[0].format()}")
    inventory = {}
    now = time.time()
    documents = []
    for name, item in loaded.runs.items():
        after = normalize(item.document)
        documents.append(after)
        inventory[name] = {"spec": after, "applied_at": now, "file": item.file}
    with _client(url) as c:
        for at in range(0, len(documents), BATCH_MAX):
            r = c.post("/runs:batch", json={"runs": documents[at : at + BATCH_MAX]})
            refused = [i for i in r.json().get("items", []) if i.get("status") != 201]
            if r.status_code != 200 or refused:
                raise SystemExit(f"bench plan: a batch of runs answered {r.status_code}: {r.text[:300]}")
        body = {"resource_version": 0, "inventory": inventory, "status": {}, "history": []}
        r = c.put(f"/sources/{SOURCE}", json=body)
        if r.status_code != 200:
            raise SystemExit(f"bench plan: writing the source answered {r.status_code}: {r.text[:300]}")
    return time.perf_counter() - start


def _count_runs(url: str) -> int:
    with _client(url) as c:
        r = c.get("/runs")
        r.raise_for_status()
        data = r.json()
    return len(data["items"] if isinstance(data, dict) else data)


# ---- cold processes -----------------------------------------------------------------------------


def _client_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASTRA_")}
    env["ASTRA_HOME"] = str(home)  # the local cache: HOME/cache
    return env


def _run(env: dict[str, str], argv: list[str]) -> Run:
    old = dict(os.environ)
    try:
        os.environ.clear()
        os.environ.update(env)
        return run_cold(argv)
    finally:
        os.environ.clear()
        os.environ.update(old)


def _check(run: Run, name: str) -> None:
    if run.code != 0:
        head = "\n".join((run.stdout + run.stderr).splitlines()[-30:])
        raise SystemExit(f"bench plan: {name} exited {run.code}:\n{head}")


def _check_output(run: Run, name: str, n: int) -> None:
    _check(run, name)
    if name.endswith("plan"):
        m = SUMMARY.search(run.stdout)
        if not m or m.groups() != ("0", "0", "0", "0"):
            found = m.group(0) if m else "no summary line"
            raise SystemExit(f"bench plan: {name} should change nothing, but: {found}")
    elif name == "cold validate":
        if f"{n} documents in {n} files are valid" not in run.stderr:
            raise SystemExit(f"bench plan: {name}: {run.stderr[-500:]}")
    elif run.stdout.strip() != str(n):
        raise SystemExit(f"bench plan: {name} read {run.stdout.strip()!r} files, not {n}")


# ---- the profile --------------------------------------------------------------------------------


def _profile_warm(folder: Path, url: str, cache: Path, top: int = 12) -> dict[str, Any]:
    """cProfile over what ``astra plan`` does after its imports: connect, load (warm), plan, render."""
    from reconciler.cli.plan import setup
    from reconciler.collector import gc_paused
    from reconciler.load import FileCache
    from reconciler.plan import plan_to_json, render_plan
    from reconciler.reconcile import plan_source

    def once() -> str:
        with gc_paused():  # as the command runs it
            s = setup([str(folder)], source=SOURCE, state=None, server=url, token=TOKEN)
            _, made = plan_source(s.source, s.cluster, s.store, time.time(), cache=FileCache(cache))
            return render_plan(plan_to_json(made))

    once()  # every module imported, the cache warm
    start = time.perf_counter()
    once()
    plain = time.perf_counter() - start
    profiler = cProfile.Profile()
    profiler.enable()
    once()
    profiler.disable()
    stats = pstats.Stats(profiler)
    total = stats.total_tt  # type: ignore[attr-defined]
    raw = stats.stats  # type: ignore[attr-defined]
    by_own = sorted(raw.items(), key=lambda kv: -kv[1][2])[:top]
    by_cum = sorted(raw.items(), key=lambda kv: -kv[1][3])
    cum = [kv for kv in by_cum if "reconciler" in kv[0][0] or "httpx" in kv[0][0]][:top]

    return {
        "unprofiled_s": round(plain, 3),
        "profiled_s": round(total, 3),
        "top_own": profile_rows(by_own, total),
        "top_cumulative": profile_rows(cum, total),
    }


# ---- watch --------------------------------------------------------------------------------------


class _Watcher:
    """``astra watch`` as a child; its output lines, each with the monotonic time it arrived."""

    def __init__(self, argv: list[str], env: dict[str, str]):
        self.proc = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            bufsize=0,
            start_new_session=True,
        )
        self.lines: queue.Queue[tuple[float, str]] = queue.Queue()
        self.seen: list[str] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        self.started = time.monotonic()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in iter(self.proc.stdout.readline, b""):
            self.lines.put((time.monotonic(), raw.decode("utf-8", "replace").rstrip()))
        self.lines.put((time.monotonic(), "<eof>"))

    def next_line(self, deadline: float) -> tuple[float, str]:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        try:
            at, line = self.lines.get(timeout=left)
        except queue.Empty:
            raise TimeoutError from None
        self.seen.append(line)
        if line == "<eof>":
            tail = "\n".join(self.seen[-20:])
            raise SystemExit(f"bench plan: astra watch exited {self.proc.wait()}:\n{tail}")
        return at, line

    def wait_for(self, match, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while True:
            try:
                at, line = self.next_line(deadline)
            except TimeoutError:
                tail = "\n".join(self.seen[-20:])
                raise SystemExit(f"bench plan: astra watch not Ready within {timeout:g} s:\n{tail}") from None
            if " Stalled " in line:
                raise SystemExit(f"bench plan: astra watch stalled: {line}")
            if match(line):
                return at - self.started

    def stop(self) -> None:
        """SIGTERM to its process group (SIGINT may be ignored in a background job), then SIGKILL."""
        if self.proc.poll() is None:
            with _suppress():
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with _suppress():
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


class _suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> bool:
        return exc[0] is not None and issubclass(exc[0], ProcessLookupError)


def _one_change(watcher: _Watcher, url: str, path: Path, i: int) -> tuple[float, float]:
    """Rewrite the file's ``owner`` label; the ms until the run is updated live, and until Ready."""
    text = path.read_text(encoding="utf-8")
    name = re.search(r"^  name: (\S+)$", text, re.M)
    if name is None or not re.search(r"^    owner: \S+$", text, re.M):
        raise SystemExit(f"bench plan: {path} has no metadata.name or owner label to change")
    run = name.group(1)
    changed = re.sub(r"^    owner: \S+$", f"    owner: bench-{i}", text, count=1, flags=re.M)
    with _client(url) as c:
        before = c.get(f"/runs/{run}").json()["metadata"]["resource_version"]
        while not watcher.lines.empty():  # nothing left over from the last pass
            watcher.next_line(time.monotonic() + 1)
        t0 = time.monotonic()
        path.write_text(changed, encoding="utf-8")
        deadline = t0 + CHANGE_TIMEOUT
        live = None
        while live is None:
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"bench plan: {run} was not updated on the server within {CHANGE_TIMEOUT:g} s"
                )
            version = c.get(f"/runs/{run}").json()["metadata"]["resource_version"]
            if version != before:
                live = time.monotonic()
                break
            time.sleep(0.005)
    while True:
        try:
            at, line = watcher.next_line(deadline)
        except TimeoutError:
            raise SystemExit(
                f"bench plan: no Ready from watch within {CHANGE_TIMEOUT:g} s of the write"
            ) from None
        if " Ready " in line and "1 updated" in line:
            done = at
            break
        if " Ready " in line or " Stalled " in line or "Reconciling" in line:
            raise SystemExit(f"bench plan: watch did not apply exactly one update: {line}")
    return (live - t0) * 1000, (done - t0) * 1000


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


# ---- text ---------------------------------------------------------------------------------------


def _verdict(name: str, value: float, target: str, limit: float, unit: str = "x") -> dict[str, Any]:
    ok = value <= limit
    return {
        "ratio": name,
        "value": round(value, 2),
        "unit": unit,
        "target": target,
        "verdict": "PASS" if ok else "MISS",
    }


def _table(samples: dict[str, Sample], n: int) -> str:
    rows = [("command", "wall s", "us/spec", "peak RSS MiB", "spread", "runs (s)")]
    for s in samples.values():
        rows.append(
            (
                s.name,
                f"{s.wall:.3f}",
                f"{s.wall / n * 1e6:.0f}",
                f"{s.rss_mib:.1f}",
                f"{s.spread:.0%}",
                " ".join(f"{r.wall:.2f}" for r in s.runs),
            )
        )
    notes = [f"  {s.name}: {s.command}" for s in samples.values()]
    return "\n" + grid(rows, right=range(1, 5)) + "\n" + "\n".join(notes)


def _profile_text(p: dict[str, Any]) -> str:
    out = [
        f"\nprofile of the warm plan, in-process after the imports: {p['unprofiled_s']:.3f} s unprofiled, "
        f"{p['profiled_s']:.3f} s under cProfile"
    ]
    for key, title in (("top_own", "by own time"), ("top_cumulative", "by cumulative time (astra, httpx)")):
        out += ["", profile_grid(f"top {len(p[key])} {title}", p[key], 84)]
    return "\n".join(out)


def _ratio_text(ratios: list[dict[str, Any]]) -> str:
    rows = [("target (same run)", "measured", "target", "verdict")]
    for r in ratios:
        value = f"{r['value']:.0f} ms" if r["unit"] == "ms" else f"{r['value']:.2f}x"
        rows.append((r["ratio"], value, r["target"], r["verdict"]))
    return "\n" + grid(rows, right=(1,))


if __name__ == "__main__":
    import argparse

    from .specs import write_specs

    parser = argparse.ArgumentParser(prog="python -m bench.plan", description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--apply-n", type=int, default=500)
    parser.add_argument("--dir", help="generate into this folder, or use the specs already there")
    args = parser.parse_args()
    schema = Path(__file__).resolve().parent.parent / "schema" / "run.schema.json"
    where = Path(args.dir or tempfile.mkdtemp(prefix="astra-bench-"))
    try:
        if not any(where.rglob("*.y*ml")):
            write_specs(where, args.n, modeline=f"# yaml-language-server: $schema={schema}")
        main(where, args.n, repeat=args.repeat, changes=args.changes, apply_n=args.apply_n)
    finally:
        if not args.dir:
            shutil.rmtree(where, ignore_errors=True)
