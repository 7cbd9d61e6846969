"""The process executor: each worker is a local process on this host, in its own process group.

Owns: turning the scheduler's decisions into processes and their ends into observations.

* ``PlaceWorker``: the image is recorded, not pulled (there is no container runtime here): the
  pull is reported begun and done at once (``ImagePulling``, then ``WorkerReady``), so the
  worker passes through Pulling (``Pulling image IMAGE``, in its events) to ReadyToStart.
* ``StartWorker``: queued; ``spawn(limit)`` starts a slice of the queue (the driver calls it
  between ticks, so that thousands of forks never hold the control plane at once):
  ``command`` + ``args`` run as a process in a new session (so a new process
  group), in its run's own working folder (``work_root/RUN``, ``HOME/work/RUN`` by default,
  made as the worker starts: never the server's working folder, which another workspace's runs
  would share), with exactly this environment: ``PATH`` and ``HOME`` of
  the host (what a command on the host needs to be found and run), then the template's ``env``
  and the variables of CONTRACT §6 from ``scheduler.worker_env`` (``RANK``, ``WORLD_SIZE``,
  ``SLURM_PROCID``, ``SLURM_NTASKS``; ``MASTER_ADDR``=127.0.0.1 and ``MASTER_PORT`` in
  multi-worker runs; the ``ASTRAEUS_ARRAY_*`` variables and ``ASTRAEUS_REPLICA_INDEX`` in
  arrays; never ``SLURM_ARRAY_TASK_ID``). Nothing else of the server's environment leaks in: not
  its token, not a Slurm variable of the shell that started it. Output (stdout and stderr) goes
  to ``HOME/logs/<run>/<worker>.<attempt>.log`` (``<run>`` its key: ``ORG/WORKSPACE/CLUSTER/NAME``
  outside the default workspace), written by the process itself (appending: past ``log_bytes``,
  100 MiB, its first part is cut and a line says so: ``logcap``); beside it, ``.times``: how far
  the log had grown at the clock's ``now`` of a step, marked about once a second while the
  worker runs and once when it ends (``logtimes``: what ``logs?since=`` reads).
  With a ``sandbox`` (``sandbox.Sandbox``: the server gives one where bubblewrap works), the
  process is the sandbox's, which runs the command with that environment, and each drive of
  ``datavolume_refs`` bind-mounted at its ``mount_path`` (its folder from ``drives``: the
  run's workspace's drive of that name, whatever the cluster), each descriptor the command
  line needs opened as it starts (``sandbox.opened``: a drive swapped for a symbolic link ends
  the worker, 126, in words). Without
  one, a worker with drives is never started (the scheduler holds its run: ``no_sandbox``).
  A worker that reads secrets (``worker_secrets``: read through ``secrets`` as it starts) gets
  them in its environment and, in the sandbox, as read-only files; its output then reaches its
  log through a pipe and a thread that masks every value (``masking``).
* ``StopWorker`` (cancel, time limit, preemption, a failed run): the template's ``stop_signal``
  (TERM) to the whole process group, SIGKILL to it ``stop_grace_seconds`` (30) later. When a
  worker's main process ends, whatever it left in its group is killed too, as a container's
  end would.
* ``pop_due(now)``: the observations ready now: workers ready, and exits (``WorkerExited`` with
  the exit code; killed by signal N is 128+N). With ``ended=False``, what the decisions made
  alone: the processes are not polled (a step polls them once, not after each of its ticks:
  with a hundred processes running that was 0.4 ms of each step).

The same three calls as ``simulation.SimulatedExecutor`` (``handle``, ``pop_due``,
``next_time``), so the driver runs either. Must not touch: the store, the scheduler's records
(it reads them), HTTP.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.runspec.lifecycle import STOP_GRACE_DEFAULT, STOP_SIGNAL_DEFAULT, STOP_SIGNALS
from reconciler.runspec.models import TaskTemplate

from ..processes import process_alive, process_start_time  # re-exported: the executor's API
from ..runspec.messages import MAX_PROCESSES_DEFAULT
from ..sandbox import NO_SANDBOX_REASON, Mount, Sandbox, SandboxRefused, Word, opened
from .bounds import Cgroups, join, nproc_prefix, reached_words
from .logcap import LOG_BYTES, cut
from .logtimes import LogMarks, Marked
from .masking import Masker, pump
from .scheduler import (
    ClusterState,
    Decision,
    ImagePulling,
    Observation,
    PlaceWorker,
    StartWorker,
    StopWorker,
    WorkerExited,
    WorkerReady,
    worker_env,
)
from .scopes import shown, workspace_of
from .worker_secrets import Given, gather

__all__ = ["HOST_VARIABLES", "LEADER_ADDRESS", "ProcessExecutor", "process_alive", "process_start_time"]

#: What a worker takes from the host's environment: enough to find and run a host command.
HOST_VARIABLES = ("PATH", "HOME")
#: Every worker of the local executor runs on this host: the leader is reached on loopback.
LEADER_ADDRESS = "127.0.0.1"
NO_COMMAND = (
    "this worker names no command, and the local executor cannot run an image's entrypoint: "
    "give task_template.command"
)
#: A worker's files are made as a command of the user's shell makes them (the server's own
#: umask, 077, keeps its database and logs private; a worker's results are the user's to share).
WORKER_UMASK = 0o022
#: How long one slice of starts (``spawn``) goes on at most, seconds: the step that spawns holds
#: the engines' gate, so every request waits for it
SPAWN_SECONDS = 0.025
#: A stop signal's name (``task_template.stop_signal``) as the signal sent.
SIGNALS = {name: getattr(signal, f"SIG{name}") for name in STOP_SIGNALS}


@dataclass(slots=True)
class _Spawn:
    """A worker released to start, waiting for its process (``spawn`` starts a slice of them)."""

    worker: str
    argv: list[Word]
    env: dict[str, str]
    log: Path
    #: its working folder (made as it starts)
    cwd: str
    #: its bounds, where it runs in a sandbox: (its cgroup's key, max processes, memory bytes)
    bounds: tuple[str, int, int | None] | None = None
    #: the run's secrets this worker reads (``worker_secrets``): its output is masked with them
    given: Given | None = None


@dataclass(slots=True)
class _Proc:
    worker: str
    popen: subprocess.Popen[bytes] | None
    pgid: int
    kill_at: float | None = None
    #: its log, and how far it had grown at its last mark
    log: Marked | None = None
    #: as ``_Spawn.bounds``, when it has a cgroup of its own
    bounds: tuple[str, int, int | None] | None = None


class ProcessExecutor:
    """Runs workers as local processes; see the module docstring for what each decision does."""

    def __init__(
        self,
        home: str | os.PathLike[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        work_root: str | os.PathLike[str] | None = None,
        grace: float | None = None,
        host_env: dict[str, str] | None = None,
        sandbox: Sandbox | None = None,
        drives: Callable[[str, str], str | None] | None = None,
        cgroups: Cgroups | None = None,
        log_bytes: int = LOG_BYTES,
        secrets: Callable[[str, str], bytes | None] | None = None,
    ) -> None:
        self.home = Path(home)
        self.logs = self.home / "logs"
        #: every worker's working folder, where one is given (an embedded plane's tests); else
        #: each run has its own, ``work_root/RUN`` (made as its first worker starts)
        self.cwd = str(cwd) if cwd is not None else None
        self.work_root = Path(work_root) if work_root is not None else self.home / "work"
        #: seconds between the stop signal and SIGKILL for every worker, over each template's
        #: ``stop_grace_seconds`` (``None``: the template's); tests shorten it
        self.grace = grace
        source = os.environ if host_env is None else host_env
        self.host_env = {k: source[k] for k in HOST_VARIABLES if k in source}
        self.sandbox = sandbox
        #: where a sandboxed worker's cgroup is made (its processes and memory bounded), if anywhere
        self.cgroups = cgroups
        #: a worker's log keeps its last ``log_bytes`` at most (``logcap``)
        self.log_bytes = log_bytes
        #: what tells this server's cgroups from another's on the host (its home's)
        self.bounds_key = hashlib.sha256(str(self.home.resolve()).encode()).hexdigest()[:12]
        #: a drive's folder on this host by its workspace (``ORG/WORKSPACE``) and name (``None``:
        #: the workspace has no such drive)
        self.drives = drives or (lambda _workspace, _name: None)
        #: a secret's value by its workspace (``ORG/WORKSPACE``) and name (``None``: none such),
        #: read as each worker starts (the store's ``secret_value``)
        self.secrets = secrets or (lambda _workspace, _name: None)
        #: why a worker with drives cannot run here (the scheduler holds its run), or None
        self.no_sandbox: str | None = None if sandbox is not None else NO_SANDBOX_REASON
        self.running: dict[str, _Proc] = {}
        #: Workers released to start whose process ``spawn`` has not started yet, in order.
        self.queued: dict[str, _Spawn] = {}
        self.stopping: list[_Proc] = []
        self.due: list[Observation] = []
        self.marks = LogMarks()
        #: Process facts changed since the last ``drain_facts``: {worker: {pid, pid_started, log, image}}.
        self.facts: dict[str, dict[str, Any]] = {}

    # -- the executor protocol ---------------------------------------------------------------

    def handle(self, d: Decision, state: ClusterState, now: float) -> None:
        if isinstance(d, PlaceWorker):
            w = state.workers[d.worker]
            self.facts.setdefault(w.name, {})["image"] = state.template(w).image
            self.due.extend((ImagePulling(d.worker), WorkerReady(d.worker)))
        elif isinstance(d, StartWorker):
            self._start(d.worker, state)
        elif isinstance(d, StopWorker):
            template = state.template(state.workers[d.worker])
            given = template.stop_grace_seconds
            grace = (STOP_GRACE_DEFAULT if given is None else given) if self.grace is None else self.grace
            self.stop(d.worker, grace, SIGNALS[template.stop_signal or STOP_SIGNAL_DEFAULT])

    def pop_due(self, now: float, *, ended: bool = True) -> list[Observation]:
        out, self.due = self.due, []
        if not ended:
            return out
        for name, proc in list(self.running.items()):
            assert proc.popen is not None
            code = proc.popen.poll()
            if code is None:
                continue
            del self.running[name]
            _killpg(proc.pgid, signal.SIGKILL)  # what the worker left behind in its group
            _mark(proc, now, self.log_bytes)  # its last output, by its end
            code = 128 - code if code < 0 else code
            out.append(WorkerExited(name, code, self._bounds_reached(proc, code)))
        self._reap_stopping(now)
        if self.marks.due(now):
            procs = [*self.running.values(), *self.stopping]
            logs = [p.log for p in procs if p.log is not None]
            self.marks.round(logs, now)
            for marked in logs:
                if marked.size > self.log_bytes:
                    cut(marked, self.log_bytes)
        return out

    def next_time(self) -> float | None:
        """Now (``-inf``) while observations or starts wait; else whenever a process ends (polled)."""
        return float("-inf") if self.due or self.queued else None

    @property
    def busy(self) -> bool:
        """Processes are starting, running or being stopped, or a start failed and its end waits
        to be observed: the driver should poll them."""
        return bool(self.running or self.stopping or self.queued or self.due)

    def spawn(self, limit: int) -> int:
        """Start the processes of at most ``limit`` released workers, oldest first, for at most
        ``SPAWN_SECONDS`` (the first always starts); how many.

        A fork costs milliseconds, so a 10,000-copy array would hold the control plane for a
        minute if every process started in the tick that released it: the driver starts them a
        slice at a time between ticks, and answers requests in between. On a busy machine a
        fork of the server takes tens of milliseconds: a slice of 32 held every request for over
        a second, so a slice also ends when its time is up.
        """
        started = 0
        ends = time.monotonic() + SPAWN_SECONDS
        while self.queued and started < limit and (started == 0 or time.monotonic() < ends):
            name = next(iter(self.queued))
            self._launch(self.queued.pop(name))
            started += 1
        return started

    def drain_facts(self) -> dict[str, dict[str, Any]]:
        out, self.facts = self.facts, {}
        return out

    # -- processes ---------------------------------------------------------------------------

    def log_path(self, run: str, worker: str, attempt: int) -> Path:
        """``logs/RUN/WORKER.ATTEMPT.log``, ``RUN`` the run's key (a folder per workspace)."""
        return self.logs / run / f"{shown(worker)}.{attempt}.log"

    def environment(self, state: ClusterState, worker: str) -> dict[str, str]:
        """Exactly the environment the worker's process gets."""
        w = state.workers[worker]
        return {**self.host_env, **worker_env(state.runs[w.run].run, w, LEADER_ADDRESS)}

    def _start(self, name: str, state: ClusterState) -> None:
        """Queue the worker's process (``spawn`` starts it) with its command, environment and log."""
        w = state.workers[name]
        template = state.template(w)
        log = self.log_path(w.run, name, max(w.attempts, 1))
        facts = self.facts.setdefault(name, {})
        facts.update({"log": str(log), "pid": None, "pid_started": None, "image": template.image})
        if not template.command:
            self._not_started(name, log, 127, NO_COMMAND)
            return
        argv: list[Word] = [template.command, *(template.args or [])]
        env = self.environment(state, name)
        cwd = self.run_folder(w.run)
        given = gather(template, workspace_of(w.run), self.secrets, self.sandbox is not None)
        if isinstance(given, str):
            self._not_started(name, log, 126, given)
            return
        if self.sandbox is not None or template.datavolume_refs:
            boxed = self._sandboxed([template.command, *(template.args or [])], env, template, w.run, given)
            if isinstance(boxed, tuple):
                given.close()
                self._not_started(name, log, *boxed)
                return
            argv = boxed
            memory = template.requested_resources.memory_bytes if template.requested_resources else None
            bounds = (
                f"{self.bounds_key}.{w.run}.{name}.{max(w.attempts, 1)}",
                template.max_processes or MAX_PROCESSES_DEFAULT,
                memory,
            )
            self.queued[name] = _Spawn(name, argv, env, log, cwd, bounds, given or None)
            return
        self.queued[name] = _Spawn(name, argv, env, log, cwd, given=given or None)

    def run_folder(self, run: str) -> str:
        """The run's working folder: ``work_root/RUN`` (``RUN`` its key), or the one given."""
        return self.cwd if self.cwd is not None else str(self.work_root / run)

    def _sandboxed(
        self, argv: list[str], env: dict[str, str], template: TaskTemplate, run: str, given: Given
    ) -> list[Word] | tuple[int, str]:
        """The sandbox's command line for ``argv`` with the template's drives; or why it cannot
        start (an exit code and a reason): no sandbox, a drive gone, a command not found (the
        sandbox would say so only as its own exit 1: the host's look-up says it as a shell does)."""
        if self.sandbox is None:
            return 126, NO_SANDBOX_REASON
        mounts = []
        workspace, cwd = workspace_of(run), self.run_folder(run)
        for ref in template.datavolume_refs or ():
            folder = self.drives(workspace, ref.name)
            if folder is None or not os.path.isdir(folder):
                where = "does not exist" if folder is None else f"has no folder ({folder})"
                return 126, f"drive {ref.name!r} {where}"
            mounts.append(Mount(folder, ref.mount_path, ref.mode == "ReadOnly"))
        command = argv[0]
        if "/" in command:
            there = os.path.join(cwd, command)
            found = there if os.path.exists(there) else None
        else:
            found = shutil.which(command, path=env.get("PATH", ""))
        if found is None:
            return 127, f"Could not start {command!r}: No such file or directory"
        args_fd = given.sandbox_args(switched=self.sandbox.worker is not None) if given else None
        return self.sandbox.argv(argv, cwd=cwd, env=env, mounts=mounts, found=found, args_fd=args_fd)

    def _launch(self, job: _Spawn) -> None:
        """Start one queued worker; one that cannot be started ends Failed, in words.

        Whatever goes wrong (a command not found, a log folder that cannot be made, an argument
        the OS refuses) ends this worker alone: it exits 127 (not found) or 126 with the cause
        as its reason and in its log, and the other workers go on.
        """
        name, log, given = job.worker, job.log, job.given
        command = str(job.argv[0])
        env: dict[str, str | bytes] = dict(job.env)
        if given is not None and self.sandbox is None:
            env.update(given.env)  # no sandbox: the process's own environment, its user's alone
        masked = os.pipe() if given is not None else None
        try:
            log.parent.mkdir(parents=True, exist_ok=True)
            Path(job.cwd).mkdir(parents=True, exist_ok=True)
            appended = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o666)
            with opened(job.argv) as (argv, fds), os.fdopen(appended, "wb") as out:
                popen = subprocess.Popen(
                    self._bounded(job, argv),
                    env=env,
                    cwd=job.cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=out if masked is None else masked[1],
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    close_fds=True,
                    pass_fds=(*fds, *(given.fds if given is not None else ())),
                    umask=WORKER_UMASK,
                )
        except SandboxRefused as exc:  # a drive's folder swapped since it was registered: said
            self._not_started(name, log, 126, str(exc))
            return
        except (OSError, ValueError, TypeError) as exc:  # what Popen and open raise for a bad start
            words = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            code = 127 if isinstance(exc, FileNotFoundError) else 126
            if masked is not None:
                os.close(masked[0])
            self._not_started(name, log, code, f"Could not start {command!r}: {words}")
            return
        finally:
            if given is not None:
                given.close()
            if masked is not None:
                os.close(masked[1])
        if masked is not None and given is not None:
            pump(masked[0], log, Masker(given.values))
        facts = self.facts.setdefault(name, {})
        facts.update({"pid": popen.pid, "pid_started": process_start_time(popen.pid)})
        bounds = job.bounds if self.cgroups is not None else None
        self.running[name] = _Proc(name, popen, popen.pid, log=Marked(log), bounds=bounds)

    def _bounded(self, job: _Spawn, argv: list[str]) -> list[str]:
        """A sandboxed worker's command line in its bounds: joining its cgroup (made here), or
        with ``RLIMIT_NPROC`` where no cgroup can be made; others' as they are."""
        if job.bounds is None:
            return argv
        key, processes, memory = job.bounds
        if self.cgroups is None:
            return [*nproc_prefix(processes), *argv]
        return join(self.cgroups.make(key, processes, memory), argv)

    def _bounds_reached(self, proc: _Proc, code: int) -> str | None:
        """The worker's reason when it reached a bound (its cgroup removed), or ``None``."""
        if proc.bounds is None or self.cgroups is None:
            return None
        key, processes, memory = proc.bounds
        words = reached_words(self.cgroups.reached(key), processes, memory)
        self.cgroups.remove(key)
        if words is None:
            return None
        if proc.log is not None:
            with contextlib.suppress(OSError), open(proc.log.log, "a", encoding="utf-8") as log:
                log.write(f"astra: {words}\n")
        return f"{words} (exit code {code})"

    def _not_started(self, name: str, log: Path, code: int, reason: str) -> None:
        """The worker ends at once with ``code`` and ``reason``; the reason goes to its log if it can."""
        with contextlib.suppress(OSError):  # no log folder: the reason still reaches the worker's row
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(f"astra: {reason}\n", encoding="utf-8", errors="backslashreplace")
        self.due.append(WorkerExited(name, code, f"{reason} (exit code {code})"))

    def stop(self, name: str, grace: float, sig: int = signal.SIGTERM) -> None:
        """Send ``sig`` to the worker's process group now, SIGKILL it ``grace`` seconds later
        (its ``stop_grace_seconds``: time to write a checkpoint)."""
        job = self.queued.pop(name, None)
        if job is not None:
            if job.given is not None:
                job.given.close()
            return  # never started
        proc = self.running.pop(name, None)
        if proc is None:
            return
        _killpg(proc.pgid, sig)
        proc.kill_at = time.monotonic() + grace
        self.stopping.append(proc)

    def kill_orphan(self, pid: int | None, started: str | None) -> bool:
        """Kill the process group of a worker left by an earlier server (after a crash)."""
        if pid and process_alive(pid, started):
            _killpg(pid, signal.SIGKILL)
            return True
        return False

    def _reap_stopping(self, now: float) -> None:
        keep = []
        moment = time.monotonic()
        for proc in self.stopping:
            if proc.popen is None or proc.popen.poll() is not None:
                _killpg(proc.pgid, signal.SIGKILL)  # anything left in its group
                _mark(proc, now, self.log_bytes)
                if proc.bounds is not None and self.cgroups is not None:
                    self.cgroups.remove(proc.bounds[0])
                continue
            if proc.kill_at is not None and moment >= proc.kill_at:
                _killpg(proc.pgid, signal.SIGKILL)
                proc.kill_at = None
            keep.append(proc)
        self.stopping = keep

    def shutdown(self) -> None:
        """Kill every worker's process group now (the server is stopping)."""
        for proc in [*self.running.values(), *self.stopping]:
            _killpg(proc.pgid, signal.SIGKILL)
            if proc.popen is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.popen.wait(timeout=5)
        self.running.clear()
        self.stopping.clear()
        self.queued.clear()


def _mark(proc: _Proc, now: float, log_bytes: int) -> None:
    if proc.log is not None:
        LogMarks.mark(proc.log, now)
        if proc.log.size > log_bytes:
            cut(proc.log, log_bytes)


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
