"""``SlurmCluster``: the ``Cluster`` protocol over a Slurm cluster, composed of the package's parts.

Owns: the protocol's methods (each under the records' lock: a change or an observation at a
time), the address (``slurm://[PARTITION][?images=host|pyxis]``), refusing what a submitted
job cannot take in place (``mapping.update_errors``), carrying out what the observe step
decides (``observe.Action``: ``match`` over the closed set), and the cluster's drives (the
table ``astra drive create|list|delete --server slurm://`` keeps in the state folder, or the one
a library user gives; a drive in use by a run not ended is not deleted).

Must not touch: the reconciler's policy (what to create, update or prune), the spec's rules,
Slurm's words (``commands``, ``decode``), the files' layout (``records``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, assert_never, cast, get_args
from urllib.parse import parse_qs, urlsplit

from reconciler.runspec.errors import InvalidSpec
from reconciler.runspec.lifecycle import RESTARTED_AFTER
from reconciler.runspec.models import Run
from reconciler.runspec.normalize import normalize
from reconciler.runspec.parse import parse_run
from reconciler.runspec.vocabulary import same

from ..base import ClusterError, Conflict, LiveRun, NotFound, Rejected, Unreachable, WorkerInfo
from .clustersecrets import ClusterSecrets
from .commands import COMMAND_TIMEOUT, SlurmCommands
from .dependencies import Blocked, blocked, waves
from .drives import SlurmDrives, drive_problem, mounted_drives, parse_drives
from .groups import group_gpus
from .held import awaited, held_words
from .mapping import to_submission, update_errors
from .observe import (
    CancelJobs,
    FailRun,
    RestartGroups,
    ResubmitUnit,
    StartNow,
    observe,
    report,
)
from .queue import Queue
from .records import RunRecords, default_state_dir, group_record, new_record
from .secrets import SlurmSecrets
from .stopping import stop_of
from .submission import Images, Submission, comment_for, comment_nonce, spec_hash
from .submit import needs_options, new_nonce, resubmit, submit_group_jobs

__all__ = ["SUBMIT_AT_ONCE", "SlurmCluster"]

#: A run as observed: the run, and its workers.
Observed = tuple[LiveRun, list[WorkerInfo]]
#: How many ``sbatch`` calls a batch of creates keeps in flight: slurmctld answers several at
#: once, and each call's own start-up (munge, the client) overlaps the others'.
SUBMIT_AT_ONCE = 4


class SlurmCluster(ClusterSecrets):
    """A Slurm cluster reached through its commands on the PATH."""

    def __init__(
        self,
        partition: str | None = None,
        *,
        state_dir: str | os.PathLike[str] | None = None,
        images: Images | None = None,
        clock: Callable[[], float] = time.time,
        timeout: float = COMMAND_TIMEOUT,
        drives: Mapping[str, str] | None = None,
    ):
        """``drives``: each drive's folder by name (``ValueError`` if one is not a drive); none:
        the table in the state folder (``drives.json``), read at each submission."""
        self.partition = partition or None
        self._drives = parse_drives(drives) if drives is not None else None
        self.address = f"slurm://{partition or ''}"
        self.state_dir = Path(state_dir) if state_dir is not None else default_state_dir()
        self.records = RunRecords(self.state_dir)
        self.secrets = SlurmSecrets(self.state_dir)
        self.commands = SlurmCommands(self.partition, timeout=timeout, images=images)
        self._clock = clock

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> SlurmCluster:
        """``slurm://``, ``slurm://PARTITION``, optionally ``?images=host|pyxis``."""
        parts = urlsplit(url)
        if parts.scheme != "slurm":
            raise ValueError(f"not a slurm:// address: {url}")
        images = parse_qs(parts.query).get("images", [None])[0]
        if images not in (None, *get_args(Images)):
            raise ValueError(f"images must be host or pyxis, not {images}")
        partition = (parts.netloc + parts.path).strip("/") or None
        return cls(partition, images=cast("Images | None", images), **kwargs)

    # ---- the protocol ----------------------------------------------------------------------------

    def list_runs(self) -> list[LiveRun]:
        with self.records.locked():
            return self._live_runs()

    def _live_runs(self) -> list[LiveRun]:
        """Every run, observed (the caller holds the lock)."""
        names = self.records.names()
        if not names:
            return []
        queue = self._queue(names)  # every run observed is named: the queue's rows of their jobs
        seen: dict[str, Observed | None] = {}
        return [found[0] for n in names if (found := self._observed(n, queue, seen)) is not None]

    def get_run(self, name: str) -> LiveRun | None:
        with self.records.locked():
            if not self.records.exists(name):
                return None
            found = self._observed(name, self._queue(), {})
            return found[0] if found is not None else None

    def create_run(self, document: dict[str, Any]) -> LiveRun:
        failed = self.create_runs([document])[0]
        if failed is not None:
            raise failed
        live = self.get_run(str(document["metadata"]["name"]))
        assert live is not None  # just made, under the lock
        return live

    def create_runs(self, documents: list[dict[str, Any]]) -> list[ClusterError | None]:
        """Many runs created under one hold of the lock, each submitted as ``create_run`` would,
        ``SUBMIT_AT_ONCE`` ``sbatch`` calls at a time, a run after the runs of the batch it
        depends on (``dependencies.waves``: their job ids are its ``--dependency``); what each
        creation met: ``None`` (made), or the error (``Conflict``, ``Rejected``, any
        ``ClusterError``). Nothing is observed: the next ``list_runs`` reads the queue once for
        every run (a ``squeue`` after each ``sbatch`` made a first apply slower the longer the
        queue). ``Unreachable`` is raised: nothing may be concluded from silence (the runs made
        before it are recorded)."""
        made: list[ClusterError | None] = [None] * len(documents)
        with self.records.locked():
            taken: set[str] = set()
            todo: list[tuple[int, Run, dict[str, Any]]] = []
            for i, document in enumerate(documents):
                try:
                    doc = _own_copy(document)
                    run = self._parse(doc)
                    if run.metadata.name in taken or self.records.exists(run.metadata.name):
                        raise Conflict(f"run {run.metadata.name} already exists on {self.address}")
                except ClusterError as exc:
                    made[i] = exc
                    continue
                taken.add(run.metadata.name)
                todo.append((i, run, doc))
            with ThreadPoolExecutor(SUBMIT_AT_ONCE, thread_name_prefix="astra-sbatch") as pool:
                for wave in waves([run for _, run, _ in todo]):
                    batch = [todo[k] for k in wave]
                    calls = [functools.partial(self._submit_new, run, doc) for _, run, doc in batch]
                    for (i, _, _), outcome in zip(batch, pool.map(_outcome, calls), strict=True):
                        made[i] = outcome
                    lost = next((m for m in made if isinstance(m, Unreachable)), None)
                    if lost is not None:
                        raise lost
        return made

    def _submit_new(self, run: Run, doc: dict[str, Any]) -> None:
        """Submit a new run and save its record (the caller holds the lock)."""
        nonce = new_nonce()
        sub = self._submission(run, nonce)
        now = self._clock()
        needs, awaiting = self._waits_at_create(run)
        hold = bool(awaiting["runs"] or awaiting["secrets"])
        if sub.jobs:
            record = self._group_record(run, doc, sub, now)
            self._submit_groups(
                record,
                run,
                sub,
                restart=0,
                why="",
                not_before=None,
                now=now,
                needs=needs,
                hold=hold,
                files=not awaiting["secrets"],
            )
        else:
            copies = list(range(sub.size)) if sub.kind == "array" else [0]
            # a secret not set: no file yet; ``held`` writes them all before it releases the job
            files = [] if awaiting["secrets"] else copies
            extra = needs_options(needs, hold=hold) + self._secrets_env(run, nonce, files)
            job_id = self._sbatch(sub.script, extra)
            record = new_record(run, doc, sub, now, job_id=job_id, nonce=nonce)
        if run.spec.depends_on or hold:
            record["dependency"], record["awaiting"] = needs, awaiting
        for attempt in record["attempts"] if hold else ():
            attempt["held"] = True
        self.records.save(record)

    def update_run(self, name: str, document: dict[str, Any], resource_version: int) -> LiveRun:
        doc = _own_copy(document)
        new = self._parse(doc)
        if new.metadata.name != name:
            raise Rejected(f"the document names {new.metadata.name}, not {name}")
        with self.records.locked():
            record = self.records.load_or_404(name, self.address)
            if record["resource_version"] != resource_version:
                raise Conflict(
                    f"run {name} changed since it was read (resource_version "
                    f"{record['resource_version']}, not {resource_version})"
                )
            old_n, new_n = normalize(record["document"]), normalize(doc)
            errors = update_errors(old_n, new_n)
            if errors:
                raise Rejected("; ".join(f"{e['path']}: {e['message']}" for e in errors), errors)
            if not same(old_n["spec"], new_n["spec"]):
                assert new.spec.array is not None
                self._throttle(record, new.spec.array.max_parallel or 0, new)
            record["document"] = doc
            record["spec_hash"] = spec_hash(new)
            record["resource_version"] += 1
            self.records.save(record)
            found = self._observed(name, self._queue(), {})
            assert found is not None  # just saved, under the lock
            return found[0]

    def delete_run(self, name: str) -> None:
        """Stop the run's jobs gracefully and forget it: its ``stop_signal`` now, its record and
        logs gone at once; then (outside the lock, which other commands wait for) a plain
        ``scancel`` of what is left once ``stop_grace_seconds`` have passed (``stopping``)."""
        with self.records.locked():
            record = self.records.load_or_404(name, self.address)
            jobs = sorted({str(a["job_id"]) for a in record["attempts"]})
            signal, grace = stop_of(parse_run(record["document"]))
            if grace == 0:
                self.commands.scancel(jobs)
            else:
                self.commands.signal(jobs, signal)
            self.records.remove(name)
            self.secrets.forget({a["nonce"] for a in record["attempts"]})
        if grace:
            self._end_after(jobs, grace)

    def _end_after(self, jobs: list[str], grace: float) -> None:
        """The second half of a graceful stop: wait for ``jobs`` to end, at most ``grace`` seconds
        (Slurm is asked every half second), then ``scancel`` what is left (SIGTERM, then SIGKILL
        after the cluster's KillWait)."""
        deadline = time.monotonic() + grace
        left = self.commands.live(jobs)
        while left and time.monotonic() < deadline:
            time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
            left = self.commands.live(left)
        if left:
            self.commands.scancel(left, check=False)

    def workers(self, name: str) -> list[WorkerInfo]:
        with self.records.locked():
            self.records.load_or_404(name, self.address)
            found = self._observed(name, self._queue(), {})
            assert found is not None  # its record was just read, under the lock
            return found[1]

    def logs(self, worker: str) -> str:
        with self.records.locked():
            text = self.records.worker_log(worker)
        if text is None:
            raise NotFound(f"no worker {worker} on {self.address}")
        return text

    def rerun(self, name: str, *, failed: bool = False) -> LiveRun:
        """A finished run runs again: whole, or its failed copies in a new array (``rerun``)."""
        from .rerun import rerun

        return rerun(self, name, failed=failed)

    # ---- what the partition offers ---------------------------------------------------------------

    def placement(self, documents: list[dict[str, Any]]) -> dict[str, dict[str, str]] | None:
        """Where runs would start now, as ``sbatch --test-only`` says (``outlook``); submits nothing."""
        from .outlook import placement_of

        return placement_of(self, documents, self._clock())

    def node_gpus(self) -> int | None:
        """The most GPUs one node of the partition has (``sinfo``), or None when it has none."""
        return self.commands.node_gpus()

    def node_count(self) -> int | None:
        """How many nodes the partition has (``sinfo %D``), or None when sinfo does not say."""
        return self.commands.node_count()

    def images(self) -> Images:
        return self.commands.images()

    # ---- drives ----------------------------------------------------------------------------------

    def drive_table(self) -> dict[str, str]:
        """Each drive's folder on the cluster's shared filesystem, by name."""
        return dict(self._drives) if self._drives is not None else self.records.drives()

    def drives(self) -> list[dict[str, Any]]:
        """Each drive (``name``, ``path``, ``used_by``: the runs not ended that mount it), by name."""
        with self.records.locked():
            return self._drive_rows(self._live_runs())

    def create_drive(self, name: str, path: str) -> dict[str, Any]:
        """Name an existing folder of the shared filesystem as a drive (astra makes none);
        ``Rejected`` for a bad name or folder, ``Conflict`` when the name is taken."""
        problem = drive_problem(name, path)
        if problem is None and not os.path.isdir(path):
            problem = (
                f"no folder {path} on this host: on Slurm a drive is a folder of the cluster's shared "
                "filesystem, which astra does not make"
            )
        if problem is not None:
            raise Rejected(problem)
        with self._table() as table:
            if name in table:
                raise Conflict(f"drive {name!r} already exists on {self.address}: {table[name]}")
            table[name] = path
        return {"name": name, "path": path, "used_by": []}

    def delete_drive(self, name: str) -> dict[str, Any]:
        """Forget a drive (its folder and files stay); ``Conflict`` while a run not ended mounts it."""
        with self._table() as table:
            if name not in table:
                raise NotFound(f"drive {name!r} does not exist on {self.address}")
            row = next(r for r in self._drive_rows(self._live_runs(), table) if r["name"] == name)
            if row["used_by"]:
                runs = ", ".join(row["used_by"])
                raise Conflict(
                    f"drive {name!r} is in use by run {runs}: delete it, or wait for it to end, first"
                )
            del table[name]
        return row

    @contextlib.contextmanager
    def _table(self) -> Iterator[dict[str, str]]:
        """The drives table to change, under the lock, saved when the block ends without error."""
        if self._drives is not None:
            raise Rejected("this cluster was given its drives: change them where they were given")
        with self.records.locked():
            table = self.records.drives()
            yield table
            self.records.save_drives(table)

    def _drive_rows(self, runs: list[LiveRun], table: dict[str, str] | None = None) -> list[dict[str, Any]]:
        used: dict[str, list[str]] = {}
        for r in runs:
            if not r.final:
                for d in mounted_drives(parse_run(r.document)):
                    used.setdefault(d, []).append(r.name)
        table = self.drive_table() if table is None else table
        return [{"name": n, "path": p, "used_by": used.get(n, [])} for n, p in sorted(table.items())]

    # ---- observe, and carry out what it decides ---------------------------------------------------

    def _queue(self, names: Collection[str] | None = None) -> Queue:
        """What ``squeue`` says; with ``names``, of those runs' jobs only (``commands.squeue``):
        given when every run the observation may look at is among them (a run's dependencies
        are observed with it)."""
        return Queue(self.commands.squeue_text(names))

    def _observed(self, name: str, queue: Queue, seen: dict[str, Observed | None]) -> Observed | None:
        """Run ``name`` observed (``None``: no such run), the runs it depends on first, each once
        in a pass (``seen``; one met again in a cycle, which validate refuses, counts as none)."""
        if name in seen:
            return seen[name]
        if not self.records.exists(name):
            return None
        seen[name] = None
        record = self.records.load(name)
        waits = None
        deps = record["document"].get("spec", {}).get("depends_on")
        if deps and not record.get("unmet"):
            others = {}
            for d in deps:
                other = self._observed(d["run"], queue, seen)
                others[d["run"]] = other[0] if other is not None else None
            run = parse_run(record["document"])
            waits = blocked(run, others)
            self._follow(record, run, waits)
        elif any(awaited(record)) and not record.get("unmet"):
            self._release(record, parse_run(record["document"]))
        words = waits[0] if waits is not None else held_words(record, self.address)
        seen[name] = self._observe(record, queue, words)
        return seen[name]

    def _follow(self, record: dict[str, Any], run: Run, waits: Blocked | None) -> None:
        """Keep a waiting run's Slurm dependency on the jobs astra holds for the runs it waits
        for, and release it once nothing it waits for is missing (``held``), or cancel its jobs
        once a dependency can no longer be met (``dependencies``)."""
        if waits is not None and waits[1]:
            first = sorted(
                {str(a["job_id"]) for a in record["attempts"] if a["restart"] == 0 and not a["why"]}
            )
            self.commands.scancel(first, check=False)
            record["unmet"] = waits[0]
            self.records.save(record)
            return
        if waits is None and not any(awaited(record)):
            return  # met: Slurm starts it (or has)
        self._release(record, run)

    def _observe(
        self, record: dict[str, Any], queue: Queue, waits: str | None = None
    ) -> tuple[LiveRun, list[WorkerInfo]]:
        """Decode, judge and decide (``observe``), act (resubmit, cancel), remember, and report
        one run (``waits``: the words of what it waits for, other runs or secrets: ``held``)."""
        now = self._clock()
        self._ending(record, now)
        found = observe(record, queue.of(record), now, waits)
        record.setdefault("seen", {}).update(found.remember)
        for action in found.actions:
            match action:
                case CancelJobs(job_ids):
                    self._stop(record, found.run, list(job_ids), now)
                case RestartGroups(r, only, pending):
                    held = self._hold_restart(record, found.run)  # a secret deleted since: held
                    self._submit_groups(
                        record,
                        found.run,
                        None,
                        restart=r.restart,
                        why=r.why,
                        not_before=r.not_before,
                        now=now,
                        only=set(only) if only is not None else None,
                        pending=set(pending) if pending is not None else None,
                        cause=r.cause,
                        hold=held,
                        files=not held,
                    )
                    if held and waits is None:  # said at once, as a unit's restart is
                        found.again, waits = True, held_words(record, self.address)
                case ResubmitUnit(r):
                    held = self._hold_restart(record, found.run)
                    resubmit(record, found.run, r, self._sbatch, now, self._secrets_env, hold=held)
                    if held and waits is None:  # said at once: observed again with its words
                        found.again, waits = True, held_words(record, self.address)
                case StartNow(attempt, job_id):
                    self.commands.update(job_id, "StartTime=now")
                    record["attempts"][attempt]["nudged"] = True
                case FailRun(job_ids):
                    self._stop(record, found.run, list(job_ids), now)
                    record["failed_cancelled"] = True
                case _:
                    assert_never(action)
        if found.again:
            self.records.save(record)
            return self._observe(record, self._queue(), waits)
        if found.remember or found.actions:
            self.records.save(record)
        return report(record, found)

    def _stop(self, record: dict[str, Any], run: Run, jobs: list[str], now: float) -> None:
        """A graceful stop astra decided while observing: the signal now, and the jobs left
        ended by the first observation after the grace (``_ending``), as no process of astra's
        stays to wait."""
        signal, grace = stop_of(run)
        if not grace:
            self.commands.scancel(jobs, check=False)
            return
        self.commands.signal(jobs, signal)
        record.setdefault("stopping", []).append({"jobs": jobs, "until": now + grace})
        self.records.save(record)

    def _ending(self, record: dict[str, Any], now: float) -> None:
        """The graceful stops whose grace has passed: what is left of their jobs is cancelled."""
        due = [s for s in record.get("stopping") or () if s["until"] <= now]
        if due:
            self.commands.scancel(sorted({j for s in due for j in s["jobs"]}), check=False)
            record["stopping"] = [s for s in record["stopping"] if s["until"] > now]
            self.records.save(record)

    # ---- submissions -----------------------------------------------------------------------------

    def _sbatch(self, script: str, extra: list[str]) -> int:
        return self.commands.sbatch(script, extra)

    def _parse(self, doc: dict[str, Any]) -> Run:
        try:
            return parse_run(doc)
        except InvalidSpec as exc:
            raise Rejected(str(exc), [e.to_json() for e in exc.errors]) from exc

    def submission_for(self, run: Run, nonce: str, generation: str | None = None) -> Submission:
        """The run's submission on this partition, its ``errors`` included (asking the cluster only
        what the run needs to know: GPUs per node, nodes, drives); makes and submits nothing."""
        log_dir = self.records.log_dir(run.metadata.name)
        gpus = run.spec.task_template.requested_resources if run.spec.task_template else None
        asks_gpus = (gpus is not None and gpus.gpu_requests is not None) or any(group_gpus(run))
        groups = run.spec.task_groups
        return to_submission(
            run,
            nonce=nonce,
            log_dir=str(log_dir),
            partition=self.partition,
            node_gpus=self.node_gpus() if asks_gpus else None,
            images=self.images(),
            nodes_available=self.node_count() if groups and len(groups) > 1 else None,
            generation=generation,
            drives=self._drives_for(run),
        )

    def _drives_for(self, run: Run) -> SlurmDrives | None:
        """What the cluster knows of drives (and of the node's sandbox, which secret files need
        too), asked only of a run that mounts some or reads secret files."""
        templates = [g.task_template for g in run.spec.task_groups or ()] + [run.spec.task_template]
        if not mounted_drives(run) and not any(t is not None and t.secret_files for t in templates):
            return None
        if self.images() == "pyxis":
            return SlurmDrives(self.drive_table())
        sandbox, why = self.commands.node_sandbox()
        return SlurmDrives(self.drive_table(), sandbox, why)

    def _submission(self, run: Run, nonce: str, generation: str | None = None) -> Submission:
        """``submission_for``; ``Rejected`` with every field it cannot carry; its log folder made."""
        sub = self.submission_for(run, nonce, generation)
        log_dir = self.records.log_dir(run.metadata.name)
        if sub.errors:
            errors = [e.to_json() for e in sub.errors]
            raise Rejected("; ".join(e.format() for e in sub.errors), errors)
        log_dir.mkdir(parents=True, exist_ok=True)
        return sub

    def _group_record(self, run: Run, doc: dict[str, Any], sub: Submission, now: float) -> dict[str, Any]:
        return group_record(run, doc, sub, now)

    def _submit_groups(
        self,
        record: dict[str, Any],
        run: Run,
        sub: Submission | None,
        *,
        restart: int,
        why: str,
        not_before: float | None,
        now: float,
        only: set[int] | None = None,
        pending: set[int] | None = None,
        needs: str | None = None,
        hold: bool = False,
        cause: str = RESTARTED_AFTER["Failed"],
        files: bool = True,
    ) -> None:
        """Submit the group jobs, in ``start_after`` order: all of them (``sub``, or a new
        generation with a new leader file) or ``only`` some groups, in the current generation;
        ``needs``: the run's ``--dependency`` on other runs (``hold``: some are not created yet);
        ``files``: each job's secrets file written (not for a job held for a secret not set)."""
        if sub is None:
            nonce = new_nonce()
            generation = record["generation"] if only is not None else nonce
            sub = self._submission(run, nonce, generation=generation)
        else:
            generation = comment_nonce(sub.comment)
        nonce, before = comment_nonce(sub.comment), len(record["attempts"])
        submit_group_jobs(
            record,
            sub,
            self._sbatch,
            generation=generation,
            restart=restart,
            why=why,
            not_before=not_before,
            now=now,
            only=only,
            pending=pending,
            needs=needs,
            hold=hold,
            cause=cause,
            secrets=lambda groups: self._group_secrets(run, nonce, groups, write=files),
        )
        for attempt in record["attempts"][before:] if not files else ():
            attempt["held"] = True  # no file yet: ``held`` writes it, then releases the job

    def _throttle(self, record: dict[str, Any], cap: int, run: Run) -> None:
        """``max_parallel`` in place, on the array job (the record's first submission)."""
        first = record["attempts"][0]
        self.commands.throttle(first["job_id"], cap, comment_for(run, first["nonce"]))


def _outcome(submit: Callable[[], None]) -> ClusterError | None:
    """What one submission met: nothing (made), or the cluster's error."""
    try:
        submit()
    except ClusterError as exc:
        return exc
    return None


def _own_copy(document: dict[str, Any]) -> dict[str, Any]:
    """A plain copy of a document to keep, without the server's resource_version."""
    doc: dict[str, Any] = json.loads(json.dumps(document))
    if isinstance(doc.get("metadata"), dict):
        doc["metadata"].pop("resource_version", None)
    return doc
