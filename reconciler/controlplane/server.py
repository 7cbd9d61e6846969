"""``astra server``: the REST API and the scheduling loop in one process, served by uvicorn.

Owns: what the server keeps in its home (``reconciler.home.astra_home``: the token,
``server.json`` with pid, host, port and URL, ``port`` (the port it last listened on, kept across
restarts), the default SQLite database ``astra.db``, worker logs under ``logs/``), the token
(``--token``/``ASTRA_TOKEN``; else the one in ``HOME/token``; else a new one written there with
mode 0600), reading ``--inventory FILE`` (YAML; ``--inventory NAME=FILE``, repeatable: a cluster
of its own, each with its engine and executor, stepped as one: ``fleet.Fleet``), the loop that
calls ``Engine.step`` whenever something may have changed (an API write, a timer, a process
poll), and stopping (``astra server stop``: SIGTERM to the pid in ``server.json``; the server
then kills its workers' process groups and exits).

One server per home: a server holds ``HOME/serving.lock`` (``reconciler.home.home_lock``) for
as long as it runs, so a second one for the same home refuses to start, naming the first.

On start, workers that held machines when the last server ended are recovered by the ``Engine``:
a running one is marked lost and the restart rules apply. Must not touch: routes, rules, SQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import logging
import os
import secrets
import signal
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..home import HomeError, astra_home, ensure_home, home_lock
from ..serverinfo import (
    DEFAULT_PORT,
    ServerError,
    ServerInfo,
    alive,
    forget_info,
    read_info,
    read_port,
    remember_port,
    write_info,
)
from .clock import SystemClock
from .fleet import Fleet
from .inventory import Inventory, InventoryError, default_inventory, load_inventory
from .scopes import DEFAULT

__all__ = [
    "DEFAULT_PORT",
    "ServerError",
    "ServerInfo",
    "load_inventory_file",
    "read_info",
    "read_port",
    "read_token_file",
    "reexec_without_token",
    "resolve_token",
    "serve",
    "stop_server",
]

#: Seconds between polls of running processes (exits are noticed within this).
POLL_SECONDS = 0.05
log = logging.getLogger("astra.server")


def resolve_token(home: Path, given: str | None) -> str:
    """``given`` (from --token or ASTRA_TOKEN), else ``HOME/token``, else a new one saved there (0600)."""
    if given:
        return given
    path = home / "token"
    if path.exists():
        text = path.read_text().strip()
        if text:
            return text
    home.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    os.chmod(path, 0o600)
    return token


def read_token_file(path: str | os.PathLike[str]) -> str:
    """The token in ``path`` (its first line); ``ServerError`` when it cannot be read or is empty."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.readline().strip()
    except OSError as exc:
        raise ServerError(f"cannot read the token file {path}: {exc.strerror or exc}") from exc
    if not text:
        raise ServerError(f"the token file {path} is empty")
    return text


def reexec_without_token(token: str, args: list[str]) -> None:
    """Run ``astra server ARGS`` again in this process, with the token out of sight; never returns.

    A token given with ``--token`` shows in ``/proc/PID/cmdline``, and one in ``ASTRA_TOKEN`` in
    ``/proc/PID/environ``, where removing it from ``os.environ`` changes nothing. So the process
    starts over (``exec``): the same options, ``ASTRA_TOKEN`` left out of the environment, and
    the token handed through a pipe (``--token-file /dev/fd/N``) that only this process holds.
    """
    import sys

    read, write = os.pipe()
    os.write(write, token.encode("utf-8") + b"\n")  # far below a pipe's buffer
    os.close(write)
    os.set_inheritable(read, True)
    env = {k: v for k, v in os.environ.items() if k != "ASTRA_TOKEN"}
    # -P: this astra, never one in the working folder (python -m puts the working folder first)
    argv = [sys.executable, "-P", "-m", "reconciler.cli", "server", *args, "--token-file", f"/dev/fd/{read}"]
    os.execve(sys.executable, argv, env)


def load_inventory_file(path: str | os.PathLike[str] | None) -> Inventory:
    """The built-in inventory, or the machines of a YAML (or JSON) file."""
    if path is None:
        return default_inventory()
    from ruamel.yaml import YAML, YAMLError

    try:
        data = YAML(typ="safe", pure=True).load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ServerError(f"cannot read the inventory {path}: {exc.strerror or exc}") from exc
    except YAMLError as exc:
        raise ServerError(f"{path}: not valid YAML: {exc}") from exc
    except RecursionError as exc:  # ruamel's composer recurses once a level
        raise ServerError(f"{path}: nests too deeply to be an inventory (a few levels are enough)") from exc
    try:
        return load_inventory(data)
    except InventoryError as exc:
        raise ServerError(f"{path}: {exc}") from exc


def stop_server(home: Path, timeout: float = 30.0) -> ServerInfo | None:
    """Stop the server of ``home``; the one stopped, or ``None`` when none runs."""
    info = read_info(home)
    if info is None:
        return None
    os.kill(info.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while alive(info.pid):
        if time.monotonic() > deadline:
            os.kill(info.pid, signal.SIGKILL)
            break
        time.sleep(0.05)
    forget_info(home, info.pid)
    return info


@dataclass(frozen=True)
class ServeOptions:
    """What ``astra server`` is given, once (its command line's options): where it listens, its
    store, its clusters' machines, what it keeps and where, and the keys it reads.

    ``inventory``: the default cluster's machines file (``None``: the built-in machines);
    ``clusters``: the other clusters' files, by name; ``any_port_if_busy``: when ``port`` is
    taken, listen on any free port (the local server astra starts: 8750 when free);
    ``audit_keep``: the audit events a workspace keeps (``None``: ``api.context.AUDIT_KEEP``);
    ``work_root``: where each run's working folder is made (``None``: ``HOME/work``);
    ``secrets_key_file``: the key the secrets are sealed with (``None``: ``HOME/secrets.key``,
    made 0600 the first time; a file named must exist); ``age_identity``: an age identity file,
    read at the start (a wrong one stops it in words), that opens the secrets a source sends
    still sealed (``api.secrets``)."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    db: str | None = None
    inventory: str | None = None
    clusters: Mapping[str, str] = field(default_factory=dict)
    any_port_if_busy: bool = False
    audit_keep: int | None = None
    work_root: Path | None = None
    secrets_key_file: str | None = None
    age_identity: str | None = None


def serve(options: ServeOptions, *, token: str | None = None, home: Path | None = None) -> None:
    """Run the control plane until SIGTERM or SIGINT (``options``: ``ServeOptions``)."""
    home = home or astra_home()
    os.umask(0o077)  # what the server writes (database, logs, server.json) is its user's alone
    try:
        _serve_home(options, token, home, _age_identities(options.age_identity))
    except Exception as exc:  # a full disk, at any point of the start, in the API's words
        from .store.full import disk_full, full_words

        if not disk_full(exc):
            raise
        from .store import default_url

        raise ServerError(full_words(options.db or default_url(home))) from None


def _age_identities(path: str | None) -> list[object] | None:
    """The identities of ``astra server --age-identity FILE`` (``ServerError`` in words)."""
    if path is None:
        return None
    from ..agekeys import AgeError, read_identities

    try:
        return read_identities(path)
    except AgeError as exc:
        raise ServerError(f"--age-identity: {exc}") from None


def _serve_home(options: ServeOptions, token: str | None, home: Path, age: list[object] | None) -> None:
    """``serve`` in its home: one server per home (``home_lock``)."""
    try:
        ensure_home(home)
        with home_lock(home, "serving", timeout=0, purpose=f"serve {home}"):
            others = {name: load_inventory_file(path) for name, path in options.clusters.items()}
            _serve(options, token, home, others, age)
    except HomeError as exc:
        running = read_info(home)
        if running is not None and running.pid != os.getpid():
            where = f"(pid {running.pid}, {running.url})"
            raise ServerError(f"an astra server already runs for {home} {where}") from None
        raise ServerError(str(exc)) from None


def _serve(
    options: ServeOptions,
    token: str | None,
    home: Path,
    others: dict[str, Inventory],
    age: list[object] | None,
) -> None:
    machines = load_inventory_file(options.inventory)
    token = resolve_token(home, token or os.environ.get("ASTRA_TOKEN"))
    sock = _listen(options.host, options.port, options.any_port_if_busy)
    try:
        remember_port(home, sock.getsockname()[1])
        clusters = {DEFAULT: machines, **others}
        asyncio.run(_main(sock, home, options, clusters, token, age))
    finally:
        sock.close()


def _listen(host: str, port: int, any_port_if_busy: bool) -> socket.socket:
    """A listening socket on ``host:port`` (any free port when it is taken and that is allowed)."""
    try:
        sock = socket.create_server((host, port), reuse_port=False)
    except OSError as exc:
        if not (any_port_if_busy and port and exc.errno == errno.EADDRINUSE):
            raise ServerError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
        return _listen(host, 0, False)
    # accepted connections inherit it: a response's head and body must not wait for an ACK
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


async def _main(
    sock: socket.socket,
    home: Path,
    options: ServeOptions,
    inventories: dict[str, Inventory],
    token: str,
    age: list[object] | None,
) -> None:
    """Serve until stopped: the default cluster's engine (and each other cluster's, on the same
    store) behind the API, stepped by ``_schedule``; each run's working folder under
    ``work_root`` (``HOME/work``). Over 60 lines: the server's parts are made in the order they
    depend on each other and stopped in the reverse one, which reads best as one sequence."""
    import uvicorn

    from .api import create_app

    _Server = _server_class()
    from .store import SecretBox, Store, default_url
    from .store.secretbox import KEY_FILE

    clock = SystemClock()
    key = Path(options.secrets_key_file) if options.secrets_key_file is not None else None
    box = SecretBox.at(key or home / KEY_FILE, create=key is None)
    store = Store(options.db or default_url(home), box)
    members = _members(store, home, inventories, clock.now(), options.work_root)
    engine, executor = members[DEFAULT]
    fleet = Fleet(members)
    runner: tuple[Any, Any] = (engine, executor) if len(members) == 1 else (fleet, fleet)
    wake = asyncio.Event()
    loop = asyncio.get_running_loop()

    def wake_up() -> None:  # a route runs in a worker thread (see api.context)
        loop.call_soon_threadsafe(wake.set)

    from .api.context import AUDIT_KEEP

    others = {name: e for name, (e, _) in members.items() if name != DEFAULT}
    app = create_app(
        engine,
        token,
        clock,
        on_change=wake_up,
        audit_keep=options.audit_keep or AUDIT_KEEP,
        clusters=others,
        drives_root=home / "drives",
        private_folders={"astra's home": home, "the runs' working folders": executor.work_root},
    )
    app.state.age_identities = age  # ``api.secrets``: sealed values it opens
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    info = ServerInfo(os.getpid(), host, port, f"http://{shown}:{port}")
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    server = _Server(config)
    # Everything so far (the modules, the app, the state loaded) lives as long as the server:
    # out of the collector's full passes, which pause every thread, the event loop's too
    # (/healthz waited 0.4 s for one while a step made 10,000 workers)
    gc.freeze()
    alerts = _alerts(store, clock, info.url, app.state.astra.metrics.record_delivery)
    app.state.alerts, app.state.alerts_wake = alerts.delivery, alerts.wake
    loop_task = asyncio.create_task(_schedule(runner[0], runner[1], clock, wake, app.state.astra))
    write_info(home, info)
    print(f"astra server listening on {info.url} (home {home}, pid {info.pid})", flush=True)
    try:
        await server.serve(sockets=[sock])
    finally:
        loop_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop_task
        alerts.stop()
        async with app.state.astra.gate:  # no route is using the engine any more
            runner[1].shutdown()
            store.close()
        forget_info(home, info.pid)


def _members(
    store: Any, home: Path, inventories: dict[str, Inventory], now: float, work_root: Path | None
) -> dict[str, tuple[Any, Any]]:
    """Each cluster's engine and executor, on the one store, in the one sandbox (which the
    server says as it starts, with the bounds it can keep)."""
    from ..sandbox import find_sandbox, no_sandbox_warning
    from .bounds import bounds_said, find_cgroups
    from .engine import Engine
    from .executor import ProcessExecutor

    sandbox, said = find_sandbox(hidden=[home])
    print(said if sandbox is not None else no_sandbox_warning(said), flush=True)
    cgroups = find_cgroups() if sandbox is not None else None
    if sandbox is not None:
        print(bounds_said(cgroups), flush=True)

    def drive_folder(workspace: str, name: str) -> str | None:
        row = store.drive_row(name, workspace)
        return None if row is None else row["path"]

    def secret_value(workspace: str, name: str) -> bytes | None:
        return store.secret_value(name, workspace)

    members = {}
    for name, machines in inventories.items():
        made = ProcessExecutor(
            home,
            work_root=work_root,
            sandbox=sandbox,
            drives=drive_folder,
            cgroups=cgroups,
            secrets=secret_value,
        )
        members[name] = (Engine(store, machines, made, now, name), made)
    return members


def _alerts(store: Any, clock: Any, root: str, counted: Any) -> Any:
    """The alerts' delivery task (``alerts.delivery``): its own thread, started; each try's end
    ``counted`` (``/metrics``)."""
    from .alerts import Delivery, DeliveryTask
    from .alerts.wiring import run_link, store_secrets

    delivery = Delivery(store, store_secrets(store), clock=clock.now, link=run_link(root), counted=counted)
    return DeliveryTask(delivery).start()


def _server_class():
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, but a SIGTERM ends ``serve`` without re-raising it afterwards, so
        that the control plane's own shutdown (killing its workers) runs before the process exits."""

        def handle_exit(self, sig: int, frame: Any) -> None:
            if self.should_exit and sig == signal.SIGINT:
                self.force_exit = True
            else:
                self.should_exit = True

    return Server


async def _schedule(engine: Any, executor: Any, clock: SystemClock, wake: asyncio.Event, api: Any) -> None:
    """Step the engine whenever something may have changed; sleep until the next thing is due.

    A step runs in a worker thread, holding the API's gate (``ApiContext.gate``, which every
    route holds while it runs): the engine is never used by two threads at once, and the event
    loop stays free, so ``/healthz`` answers while a step places 10,000 workers. The processes
    of the workers a step released start after it, in a worker thread too, outside the gate
    (``Engine.start_processes``: the executor alone, which no route uses), so that no request
    waits on a fork; the next step, at once, writes their facts (pid, start time). While workers
    wait to be started (``executor.queued``) or runs to be admitted (``engine.more``: a slice
    of workers is made per step), the loop steps again at once, after the routes already waiting
    at the gate (``api.gate.Gate`` serves its waiters first come, first served). Each step's
    duration goes to ``/metrics`` (``api.metrics``)."""
    gate = api.gate
    while True:
        async with gate:
            now = clock.now()
            began = time.perf_counter()
            await _off_loop(engine, engine.step, now, start=False)
            api.metrics.record_tick(time.perf_counter() - began)
            nxt = engine.next_wakeup(now)
            queued = bool(getattr(executor, "queued", None))
            more = engine.more
            timeout = POLL_SECONDS if executor.busy else 60.0
        started = await _off_loop(engine, engine.start_processes) if queued else 0
        if queued or more or started:
            await asyncio.sleep(0)
            continue
        if nxt is not None:
            timeout = min(timeout, max(0.0, nxt - clock.now()))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), timeout)
        wake.clear()


async def _off_loop(engine: Any, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``call(*args, **kwargs)`` (a step of ``engine``, or its processes' starts) in a worker
    thread: what it returns, ``None`` if it failed. A failure is logged (the next step retries);
    a cancelled wait (the server stopping) still lets the call end before the engine is closed."""
    step = asyncio.ensure_future(asyncio.to_thread(call, *args, **kwargs))
    try:
        return await asyncio.shield(step)
    except asyncio.CancelledError:
        await asyncio.wait([step])
        raise
    except Exception as exc:  # keep serving: the error is logged, the next step retries
        from .store.full import disk_full, full_words

        if disk_full(exc):  # one line, not a traceback a step
            first = engine if hasattr(engine, "store") else next(iter(engine.members.values()))[0]
            log.warning("a scheduling step waits: %s", full_words(first.store.url))
            return None
        log.exception("a scheduling step failed")
        return None
