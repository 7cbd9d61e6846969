"""A live ``astra server`` for the benchmarks, and the client processes run against it.

``start_server(work, py)`` starts ``astra server`` on a free loopback port (a temporary
``ASTRA_HOME`` and SQLite database, and an inventory of small machines on which no generated run
fits, so the scheduler refuses every run at once: the server holds them, and no process is
started; ``HOLDING`` and ``hold_all``, for runs that must pass apply's review: machines that
could hold each, and a quota that lets none start), with the drives the generated specs
mount; ``stop`` ends it. ``seed`` puts a server where a whole apply of a folder leaves it,
through the API. ``run_in`` runs a client command as a cold process with its own environment
(``client_env``: a home of its own, for the local cache).

Used by ``bench.plan``, ``bench.apply`` and ``bench.workers``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from .measure import Run, run_cold

__all__ = [
    "HOLDING",
    "SOURCE",
    "TOKEN",
    "check",
    "client",
    "client_env",
    "count_runs",
    "hold_all",
    "run_in",
    "run_names",
    "seed",
    "start_server",
    "stop",
]

TOKEN = "bench-token"
SOURCE = "bench"
#: 16 machines of 8 small GPUs (128 GPUs: the client's check that a machine could hold each run
#: passes), each with one core and 1 GiB: every generated run asks for more, so the scheduler
#: refuses each at once (Failed, "never fits") and starts no process.
INVENTORY = "machines:\n" + "".join(
    f"  - name: small-{i:02d}\n    gpus: 8\n    gpu_model: T4\n    gpu_memory_gb: 16\n"
    "    cpu_cores: 1\n    memory_bytes: 1Gi\n"
    for i in range(16)
)
#: Machines that could hold every generated run (``bench.specs``: each GPU model, 141 GB a GPU,
#: 128 cores and 2 TiB a machine, eight of a model in one NVLink domain, rack, InfiniBand fabric
#: and RDMA network), for the benchmarks whose runs go through apply's review, which refuses a
#: run no machine could hold: ``hold_all`` then keeps every run waiting, and no process starts.
HOLDING = "machines:\n" + "".join(
    f"  - name: {model.lower()}-{i}\n    gpus: 8\n    gpu_model: {model}\n    gpu_memory_gb: 141\n"
    f"    cpu_cores: 128\n    memory_bytes: 2Ti\n    nvlink_domain: nv-{model}\n"
    f"    fabric: ib-{model}\n    rack: rack-{model}\n    rdma_network: roce-{model}\n"
    for model in ("H100", "A100", "H200", "L40S")
    for i in range(8)
)
#: a server on a machine at load 16 answered its first request 86 s after it started
START_TIMEOUT = 180.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(
    work: Path, py: str, machines: str = INVENTORY, timeout: float = START_TIMEOUT
) -> tuple[subprocess.Popen, str]:
    """``astra server`` in ``work`` (its home ``work/server``) on ``machines`` (an inventory file's
    text), waited for ``timeout`` seconds at most."""
    import httpx

    home = work / "server"
    home.mkdir(parents=True)
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
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            tail = (work / "server.log").read_text(errors="replace")[-2000:]
            raise SystemExit(f"bench: astra server exited {proc.returncode}:\n{tail}")
        try:
            if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                _make_drives(url)
                return proc, url
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            stop(proc, signal.SIGTERM, 10)
            raise SystemExit(f"bench: astra server did not answer within {timeout:g} s")
        time.sleep(0.05)


def hold_all(url: str, workspace: str = "default") -> None:
    """A quota of no run holding machines for ``workspace``: its runs are made (every worker of
    them, each array copy too) and wait Pending (``Workspace default is at its quota of 0
    running runs``)."""
    import httpx

    put = httpx.put(
        f"{url}/api/workspaces/{workspace}/quota",
        json={"runs": 0},
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=30,
    )
    if put.status_code != 200:
        raise SystemExit(f"bench: the quota of {workspace} answered {put.status_code}: {put.text}")


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
            raise SystemExit(f"bench: making drive {name} answered {made.status_code}: {made.text}")


def stop(proc: subprocess.Popen, sig: int, timeout: float) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def client(url: str):
    import httpx

    nodelay = httpx.HTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
    return httpx.Client(
        base_url=url + "/api", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=300, transport=nodelay
    )


def seed(url: str, folder: Path) -> float:
    """Put the server where a whole apply of ``folder`` leaves it, through the API, as an apply
    writes it: the source's lock taken, the runs created (the normalised documents apply sends)
    in batches (``POST /runs:batch``), each batch recording its runs in the source's inventory,
    and the lock released. (One write of the whole inventory would be over the server's 16 MiB
    limit for a body at 100,000 runs.)"""
    from reconciler.load import load_source
    from reconciler.plan import normalize
    from reconciler.wire import BATCH_MAX, LOCK_HEADER

    start = time.perf_counter()
    loaded = load_source([str(folder)])
    if not loaded.ok:
        raise SystemExit(f"bench: the specs do not load: {loaded.errors[0].format()}")
    now = time.time()
    documents = [(name, normalize(item.document), item.file) for name, item in loaded.runs.items()]
    with client(url) as c:
        took = c.post(f"/sources/{SOURCE}/lock", json={"owner": "bench-seed"})
        if took.status_code != 201:
            raise SystemExit(f"bench: locking the source answered {took.status_code}: {took.text[:300]}")
        lock = took.json()["id"]
        for at in range(0, len(documents), BATCH_MAX):
            batch = documents[at : at + BATCH_MAX]
            files = {name: file for name, _, file in batch if file is not None}
            body = {
                "runs": [doc for _, doc, _ in batch],
                "record": {"source": SOURCE, "applied_at": now, "files": files},
            }
            r = c.post("/runs:batch", json=body, headers={LOCK_HEADER: lock})
            refused = [i for i in r.json().get("items", []) if i.get("status") != 201]
            if r.status_code != 200 or refused:
                raise SystemExit(f"bench: a batch of runs answered {r.status_code}: {r.text[:300]}")
        r = c.delete(f"/sources/{SOURCE}/lock", params={"id": lock})
        if r.status_code != 204:
            raise SystemExit(f"bench: unlocking the source answered {r.status_code}: {r.text[:300]}")
    return time.perf_counter() - start


def run_names(url: str, *, summary: bool = False) -> list[str]:
    """The names of the runs the server holds (``?view=summary``: the light listing)."""
    with client(url) as c:
        r = c.get("/runs", params={"view": "summary"} if summary else None)
        r.raise_for_status()
        data = r.json()
    items = data["items"] if isinstance(data, dict) else data
    return [i["name"] if summary else i["metadata"]["name"] for i in items]


def count_runs(url: str) -> int:
    return len(run_names(url))


def client_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASTRA_")}
    env["ASTRA_HOME"] = str(home)  # the local cache: HOME/cache
    return env


def run_in(env: dict[str, str], argv: list[str], *, tree: bool = False) -> Run:
    """``argv`` as a cold process with ``env`` as its whole environment (``tree``: see ``run_cold``)."""
    old = dict(os.environ)
    try:
        os.environ.clear()
        os.environ.update(env)
        return run_cold(argv, tree=tree)
    finally:
        os.environ.clear()
        os.environ.update(old)


def check(run: Run, name: str) -> None:
    if run.code != 0:
        head = "\n".join((run.stdout + run.stderr).splitlines()[-30:])
        raise SystemExit(f"bench: {name} exited {run.code}:\n{head}")
