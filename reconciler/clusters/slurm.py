"""The ``slurm`` cluster: the ``Cluster`` protocol over a real Slurm cluster's commands.

Selected by ``--server slurm://`` (the default partition) or ``slurm://PARTITION``; an optional
``?images=host|pyxis`` says how images are honoured (default: ``pyxis`` when ``srun`` has
``--container-image``, else ``host``). It runs ``sbatch``, ``squeue --json``, ``scontrol``,
``scancel`` and ``sinfo`` from the PATH.

Owns: the run records (which Slurm jobs a run is: its inventory, with the document it was
given, its resource version and every submission, so ``get_run`` returns the document even
after Slurm has forgotten the jobs), the observe step (one ``squeue --json``, decoded by
``slurm_state``, judged by ``slurm_policy``, whose resubmissions and cancellations it carries
out), and the mapping of subprocess failures onto ``ClusterError``s.

Must not touch: the reconciler's policy (what to create, update or prune), the spec's rules.
What Slurm carries and how is ``slurm_mapping``; docs/slurm.md has the table.

Records live under ``state_dir`` (``$ASTRA_SLURM_STATE``, else ``$ASTRA_HOME/slurm``, else
``~/.astra/slurm``): ``runs/<name>.json`` and ``logs/<name>/`` (the jobs' output: on a real
cluster this must be on a filesystem the nodes share). One lock file serializes every change
and observation, so two astra processes never resubmit the same worker twice.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from reconciler.runspec.errors import InvalidSpec
from reconciler.runspec.models import Run, resolve_on_failure, resolve_start
from reconciler.runspec.normalize import RESTART_POLICY, normalize
from reconciler.runspec.parse import parse_run
from reconciler.runspec.vocabulary import (
    FINAL_RUN_STATES,
    changed_paths,
    forces_replace,
    same,
    validate_update,
)

from .base import ClusterError, Conflict, LiveRun, NotFound, Rejected, Unreachable, WorkerInfo
from .slurm_mapping import (
    Images,
    Submission,
    comment_for,
    group_gpus,
    group_offsets,
    group_order,
    parse_comment,
    spec_hash,
    to_submission,
)
from .slurm_policy import Policy, Resubmit, Unit, Verdict, group_restarts, judge, run_status
from .slurm_state import JobRow, TaskObs, observe_submission, parse_squeue

__all__ = ["SlurmCluster", "replace_message"]

#: How long one Slurm command may take before the cluster counts as unreachable.
COMMAND_TIMEOUT = 30.0
_UNREACHABLE = ("Unable to contact slurm controller", "Connection refused", "Socket timed out")
_RECORD_VERSION = 1


#: Of the fields the spec lets change in place, the ones a submitted Slurm job can take
#: (``scontrol update ArrayTaskThrottle``); metadata is astra's own record.
SLURM_IN_PLACE = (("spec", "array", "max_parallel"),)


def replace_message(path: str) -> str:
    return f"Slurm cannot change {path} of a submitted job: replace the run (delete it and create it again)"


def _default_state_dir() -> Path:
    if os.environ.get("ASTRA_SLURM_STATE"):
        return Path(os.environ["ASTRA_SLURM_STATE"])
    home = os.environ.get("ASTRA_HOME")
    return (Path(home) if home else Path.home() / ".astra") / "slurm"


class SlurmCluster:
    """A Slurm cluster reached through its commands on the PATH."""

    def __init__(
        self,
        partition: str | None = None,
        *,
        state_dir: str | os.PathLike[str] | None = None,
        images: Images | None = None,
        clock: Callable[[], float] = time.time,
        timeout: float = COMMAND_TIMEOUT,
    ):
        self.partition = partition or None
        self.address = f"slurm://{partition or ''}"
        self.state_dir = Path(state_dir) if state_dir is not None else _default_state_dir()
        self._images = images
        self._clock = clock
        self._timeout = timeout
        self._node_gpus: int | bool | None = False  # False: not asked yet

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> SlurmCluster:
        """``slurm://``, ``slurm://PARTITION``, optionally ``?images=host|pyxis``."""
        parts = urlsplit(url)
        if parts.scheme != "slurm":
            raise ValueError(f"not a slurm:// address: {url}")
        images = parse_qs(parts.query).get("images", [None])[0]
        if images not in (None, "host", "pyxis"):
            raise ValueError(f"images must be host or pyxis, not {images}")
        partition = (parts.netloc + parts.path).strip("/") or None
        return cls(partition, images=images, **kwargs)  # type: ignore[arg-type]

    # ---- the protocol --------------------------------------------------------------------------

    def list_runs(self) -> list[LiveRun]:
        with self._locked():
            names = sorted(p.stem for p in self._runs_dir().glob("*.json"))
            if not names:
                return []
            rows = self._squeue()
            return [self._observe(self._load(n), rows)[0] for n in names]

    def get_run(self, name: str) -> LiveRun | None:
        with self._locked():
            if not self._record_path(name).exists():
                return None
            return self._observe(self._load(name), self._squeue())[0]

    def create_run(self, document: dict[str, Any]) -> LiveRun:
        doc = json.loads(json.dumps(document))
        if isinstance(doc.get("metadata"), dict):
            doc["metadata"].pop("resource_version", None)
        run = self._parse(doc)
        name = run.metadata.name
        with self._locked():
            if self._record_path(name).exists():
                raise Conflict(f"run {name} already exists on {self.address}")
            nonce = uuid.uuid4().hex[:12]
            sub = self._submission(run, nonce)
            now = self._clock()
            if sub.jobs:
                record = self._group_record(run, doc, sub, now)
                self._submit_groups(record, run, sub, restart=0, why="", not_before=None, now=now)
                self._save(record)
                return self._observe(record, self._squeue())[0]
            job_id = self._sbatch(sub.script, [])
            record = {
                "version": _RECORD_VERSION,
                "name": name,
                "document": doc,
                "resource_version": 1,
                "spec_hash": spec_hash(run),
                "created_at": now,
                "kind": sub.kind,
                "size": sub.size,
                "gpus_per_worker": sub.gpus_per_worker,
                "script": sub.script,
                "attempts": [
                    {"job_id": job_id, "nonce": nonce, "indices": None, "restart": 0, "why": "", "at": now}
                ],
                "seen": {},
                "failed_cancelled": False,
            }
            self._save(record)
            return self._observe(record, self._squeue())[0]

    def update_run(self, name: str, document: dict[str, Any], resource_version: int) -> LiveRun:
        doc = json.loads(json.dumps(document))
        if isinstance(doc.get("metadata"), dict):
            doc["metadata"].pop("resource_version", None)
        new = self._parse(doc)
        if new.metadata.name != name:
            raise Rejected(f"the document names {new.metadata.name}, not {name}")
        with self._locked():
            record = self._load_or_404(name)
            if record["resource_version"] != resource_version:
                raise Conflict(
                    f"run {name} changed since it was read (resource_version "
                    f"{record['resource_version']}, not {resource_version})"
                )
            old_n, new_n = normalize(record["document"]), normalize(doc)
            errors = [e.to_json() for e in validate_update(old_n, new_n)]
            errors += [
                {"path": str(p), "message": replace_message(str(p))}
                for p in changed_paths(old_n, new_n)
                if not forces_replace(p.steps) and p.steps[0] == "spec" and p.steps not in SLURM_IN_PLACE
            ]
            if errors:
                raise Rejected("; ".join(f"{e['path']}: {e['message']}" for e in errors), errors)
            if not same(old_n["spec"], new_n["spec"]):
                assert new.spec.array is not None
                self._throttle(record, new.spec.array.max_parallel or 0, new)
            record["document"] = doc
            record["spec_hash"] = spec_hash(new)
            record["resource_version"] += 1
            self._save(record)
            return self._observe(record, self._squeue())[0]

    def delete_run(self, name: str) -> None:
        with self._locked():
            record = self._load_or_404(name)
            ids = sorted({str(a["job_id"]) for a in record["attempts"]})
            self._cmd(["scancel", *ids])
            self._record_path(name).unlink()
            shutil.rmtree(self._log_dir(name), ignore_errors=True)

    def workers(self, name: str) -> list[WorkerInfo]:
        with self._locked():
            record = self._load_or_404(name)
            return self._observe(record, self._squeue())[1]

    def logs(self, worker: str) -> str:
        with self._locked():
            for name in sorted((p.stem for p in self._runs_dir().glob("*.json")), key=len, reverse=True):
                rank = worker.removeprefix(f"{name}-")
                if worker.startswith(f"{name}-") and not rank.isdigit():
                    record = self._load(name)
                    for gi, g in enumerate(record.get("groups") or ()):
                        i = rank.removeprefix(f"{g['name']}-")
                        if rank.startswith(f"{g['name']}-") and i.isdigit() and int(i) < g["replicas"]:
                            return self._read_group_logs(record, gi, int(i))
                if worker.startswith(f"{name}-") and rank.isdigit():
                    record = self._load(name)
                    if int(rank) < record["size"]:
                        return self._read_logs(record, int(rank))
        raise NotFound(f"no worker {worker} on {self.address}")

    # ---- observe -------------------------------------------------------------------------------

    def _observe(self, record: dict[str, Any], rows: list[JobRow]) -> tuple[LiveRun, list[WorkerInfo]]:
        """Decode, judge, act (resubmit, cancel), remember, and report one run."""
        run = parse_run(record["document"])
        now = self._clock()
        policy = _policy(run)
        kind = record["kind"]
        grouped = kind in ("groups", "hetjob")
        limits = _time_limits(run)
        units = _units(record)
        seen: dict[str, Any] = record.setdefault("seen", {})
        cache: dict[int, dict[int, TaskObs]] = {}
        verdicts: dict[int, tuple[Unit, Verdict]] = {}
        changed = False
        for index, attempt in units.items():
            key = attempt["job_id"]
            if key not in cache:
                if kind == "hetjob":
                    cache[key] = observe_submission(
                        rows, key, attempt["nonce"], None, components=len(limits), time_limits=limits
                    )
                else:
                    indices = None if kind != "array" else (attempt["indices"] or range(record["size"]))
                    limit = limits[index] if kind == "groups" else limits[0]
                    cache[key] = observe_submission(rows, key, attempt["nonce"], indices, limit)
            obs = cache[key][index if kind in ("array", "hetjob") else 0]
            remembered = seen.get(str(index))
            if obs.end_kind == "gone" and remembered and remembered["job_id"] == key:
                obs = TaskObs(**{**remembered["obs"], "machines": tuple(remembered["obs"]["machines"])})
            elif obs.end_kind not in (None, "gone") and (not remembered or remembered["job_id"] != key):
                seen[str(index)] = {"job_id": key, "obs": {**obs.__dict__, "machines": list(obs.machines)}}
                changed = True
            unit = Unit(index, obs, attempt["restart"], attempt["why"])
            verdicts[index] = (unit, judge(_policy(run, index) if grouped else policy, unit, now))

        if grouped:
            plan = group_restarts(
                policy.on_failure, [verdicts[i] for i in sorted(verdicts)], one_job=kind == "hetjob"
            )
            if plan.whole is not None or plan.groups:
                changed = True
            if plan.whole is not None:
                # RestartJob: the groups still running are stopped, and every group starts again.
                live = sorted({str(a["job_id"]) for i, a in units.items() if not verdicts[i][1].final})
                if live:
                    self._cmd(["scancel", *live], check=False)
                w = plan.whole
                self._submit_groups(
                    record, run, None, restart=w.restart, why=w.why, not_before=w.not_before, now=now
                )
            order = group_order(list(run.spec.task_groups or ()))
            pending = {i for i, (u, _) in verdicts.items() if u.obs.state == "Pending"}
            for r in sorted(plan.groups, key=lambda r: order.index(r.index)):
                # RestartTask: this group alone; it waits for its start_after group only if that
                # one has not started yet (is pending, or is being resubmitted in this round).
                self._submit_groups(
                    record,
                    run,
                    None,
                    restart=r.restart,
                    why=r.why,
                    not_before=r.not_before,
                    now=now,
                    only={r.index},
                    pending=pending,
                )
                pending.add(r.index)
            if plan.whole is not None or plan.groups:
                # Report what was just submitted, not the attempts it replaced.
                self._save(record)
                return self._observe(record, self._squeue())
        for index, (unit, verdict) in sorted(verdicts.items()):
            if verdict.resubmit is not None:
                if not grouped:
                    self._resubmit(record, verdict.resubmit, now)
                    changed = True
            elif unit.obs.state == "Pending" and _due(units[index], now):
                # Slurm looks at --begin only every half minute or so: once astra sees the
                # restart is due it moves the start time to now, and the worker starts at once.
                self._cmd(
                    ["scontrol", "update", f"JobId={units[index]['job_id']}", "StartTime=now"], check=False
                )
                units[index]["nudged"] = True
                changed = True
        if any(v.fails_run for _, v in verdicts.values()) and not record.get("failed_cancelled"):
            live = sorted({str(units[i]["job_id"]) for i, (_, v) in verdicts.items() if not v.final})
            if live:
                self._cmd(["scancel", *live], check=False)
            record["failed_cancelled"] = True
            changed = True
        if changed:
            self._save(record)
        return self._report(record, run, policy, verdicts)

    def _report(
        self,
        record: dict[str, Any],
        run: Run,
        policy: Policy,
        verdicts: dict[int, tuple[Unit, Verdict]],
    ) -> tuple[LiveRun, list[WorkerInfo]]:
        name = record["name"]
        rows: list[tuple[str, Verdict, str | None, float | None]] = []
        workers: list[WorkerInfo] = []
        gpus_held = 0
        for wname, rank, index, machine_of, gpus in _worker_slots(record):
            unit, v = verdicts[index]
            obs = unit.obs
            machine = machine_of(obs)
            rows.append((wname, v, machine, obs.ended_at))
            if v.state == "Running":
                gpus_held += gpus
            workers.append(
                WorkerInfo(
                    name=wname,
                    rank=rank,
                    state=v.state,
                    reason=v.reason,
                    machine=machine if v.state != "Pending" else None,
                    exit_code=obs.exit_code if obs.end_kind is not None else None,
                    restarts=unit.restarts,
                    gpus=gpus,
                    started_at=obs.started_at if v.state != "Pending" else None,
                )
            )
        status = run_status(policy, rows)
        starts = [w.started_at for w in workers if w.started_at is not None]
        ends = [e for _, _, _, e in rows if e is not None]
        live = LiveRun(
            name=name,
            document=record["document"],
            resource_version=record["resource_version"],
            state=status.state,
            reason=status.reason,
            task_counts=status.task_counts,
            created_at=record["created_at"],
            started_at=min(starts) if starts else None,
            finished_at=max(ends) if ends and status.state in FINAL_RUN_STATES else None,
            workers_running=status.running,
            gpus_held=gpus_held,
        )
        return live, workers

    # ---- worker groups -------------------------------------------------------------------------

    def _group_record(self, run: Run, doc: dict[str, Any], sub: Submission, now: float) -> dict[str, Any]:
        groups = list(run.spec.task_groups or ())
        gpus, offsets = group_gpus(run), group_offsets(groups)
        return {
            "version": _RECORD_VERSION,
            "name": run.metadata.name,
            "document": doc,
            "resource_version": 1,
            "spec_hash": spec_hash(run),
            "created_at": now,
            "kind": sub.kind,
            "size": sub.size,
            "gpus_per_worker": sub.gpus_per_worker,
            "groups": [
                {"name": g.name, "replicas": g.replicas, "offset": offsets[i], "gpus": gpus[i]}
                for i, g in enumerate(groups)
            ],
            "script": "",
            "attempts": [],
            "seen": {},
            "failed_cancelled": False,
        }

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
    ) -> None:
        """Submit the group jobs, in ``start_after`` order: all of them (a new generation, with a
        new leader file) or ``only`` some groups, whose predecessors keep their jobs."""
        if sub is None:
            nonce = uuid.uuid4().hex[:12]
            generation = record["generation"] if only is not None else nonce
            sub = self._submission(run, nonce, generation=generation)
        else:
            generation = parse_comment_nonce(sub.comment)
        record["generation"] = generation
        current = _units(record)
        nonce = parse_comment_nonce(sub.comment)
        job_ids: dict[int, int] = {}
        for job in sub.jobs:
            if only is not None and not set(job.groups) & only:
                continue
            extra: list[str] = []
            dep = None
            if job.after is not None:
                dep = job_ids.get(job.after)
                if dep is None and job.after in (pending or set()) and job.after in current:
                    dep = current[job.after]["job_id"]  # its predecessor has not started yet
            if dep is not None:
                # Slurm's `after`: start once that job has started (the seeds' start_after).
                extra += [f"--dependency=after:{dep}", "--kill-on-invalid-dep=yes"]
            begin = not_before is not None and not_before > now and dep is None
            if begin:
                assert not_before is not None
                extra.append("--begin=" + time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(not_before)))
            job_id = self._sbatch(job.script, extra)
            for g in job.groups:
                job_ids[g] = job_id
            record["attempts"].append(
                {
                    "job_id": job_id,
                    "nonce": nonce,
                    "indices": list(job.groups),
                    "restart": restart,
                    "why": why,
                    "at": now,
                    "not_before": not_before if begin else None,
                }
            )

    def _read_group_logs(self, record: dict[str, Any], gi: int, i: int) -> str:
        attempt = _units(record)[gi]
        job, logs = attempt["job_id"], self._log_dir(record["name"])
        g = record["groups"][gi]
        if record["kind"] == "hetjob":
            # Components have consecutive job ids; a het step numbers tasks across components.
            files = [logs / f"{job + gi}.{g['offset'] + i}.out"]
            if gi == 0 and i == 0:
                files.insert(0, logs / f"{job}.out")
        else:
            files = [logs / f"{job}.{i}.out"]
            if i == 0:
                files.insert(0, logs / f"{job}.out")
        return "".join(f.read_text(errors="replace") for f in files if f.exists())

    def _resubmit(self, record: dict[str, Any], r: Resubmit, now: float) -> None:
        nonce = uuid.uuid4().hex[:12]
        run = parse_run(record["document"])
        extra = [f"--comment={comment_for(run, nonce)}"]
        if record["kind"] == "array":
            extra.append(f"--array={r.index}")
        if r.not_before > now:
            extra.append("--begin=" + time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(r.not_before)))
        job_id = self._sbatch(record["script"], extra)
        indices = [r.index] if record["kind"] == "array" else None
        record["attempts"].append(
            {
                "job_id": job_id,
                "nonce": nonce,
                "indices": indices,
                "restart": r.restart,
                "why": r.why,
                "at": now,
                "not_before": r.not_before,
            }
        )

    def _throttle(self, record: dict[str, Any], cap: int, run: Run) -> None:
        """``max_parallel`` in place: ``scontrol update ArrayTaskThrottle`` on the array job."""
        first = record["attempts"][0]
        job = str(first["job_id"])
        # scontrol exits 1 when some tasks have ended ("Job has already finished") even though
        # the rest took the new throttle: judge by what squeue reports afterwards.
        out = self._cmd(["scontrol", "update", f"JobId={job}", f"ArrayTaskThrottle={cap}"], check=False)
        nonce = first["nonce"]
        self._cmd(["scontrol", "update", f"JobId={job}", f"Comment={comment_for(run, nonce)}"], check=False)
        rows = [r for r in self._squeue() if r.array_job_id == first["job_id"]]
        live = [r for r in rows if r.state in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")]
        if live and any(r.array_max_tasks != cap for r in live):
            raise ClusterError(f"Slurm did not change the array's throttle: {out.strip()}")

    # ---- Slurm commands ------------------------------------------------------------------------

    def _cmd(self, argv: list[str], input: str | None = None, check: bool = True) -> str:
        try:
            proc = subprocess.run(
                argv, input=input, capture_output=True, text=True, timeout=self._timeout, check=False
            )
        except FileNotFoundError as exc:
            raise Unreachable(f"{argv[0]} is not on the PATH: is this a Slurm submit host?") from exc
        except subprocess.TimeoutExpired as exc:
            raise Unreachable(f"{argv[0]} did not answer within {self._timeout:g} s") from exc
        err = (proc.stderr or "").strip()
        if any(s in err for s in _UNREACHABLE):
            raise Unreachable(f"Slurm's controller cannot be reached: {err.splitlines()[-1]}")
        if check and proc.returncode != 0:
            raise ClusterError(f"{' '.join(argv[:2])} failed: {err or proc.stdout.strip()}")
        return proc.stdout + proc.stderr if not check else proc.stdout

    def _squeue(self) -> list[JobRow]:
        out = self._cmd(["squeue", "--json"])
        try:
            return parse_squeue(json.loads(out))
        except (ValueError, KeyError) as exc:
            raise ClusterError(f"squeue --json gave what astra cannot read: {exc}") from exc

    def _sbatch(self, script: str, extra: list[str]) -> int:
        try:
            out = self._cmd(["sbatch", "--parsable", *extra], input=script)
        except Unreachable:
            raise
        except ClusterError as exc:
            text = str(exc).removeprefix("sbatch --parsable failed: ")
            raise Rejected(f"Slurm refused the job: {text}") from exc
        m = re.match(r"\s*(\d+)", out)
        if m is None:
            raise ClusterError(f"sbatch gave no job id: {out.strip()}")
        return int(m.group(1))

    def node_gpus(self) -> int | None:
        """The most GPUs one node of the partition has (``sinfo``), or None when it has none."""
        if self._node_gpus is False:
            argv = ["sinfo", "-h", "-o", "%G"] + ([f"--partition={self.partition}"] if self.partition else [])
            best = 0
            for line in self._cmd(argv).split():
                for gres in line.split(","):
                    m = re.match(r"gpu(?::[^:(]+)?:(\d+)", gres)
                    if m:
                        best = max(best, int(m.group(1)))
            self._node_gpus = best or None
        return self._node_gpus  # type: ignore[return-value]

    def node_count(self) -> int | None:
        """How many nodes the partition has (``sinfo %D``), or None when sinfo does not say."""
        argv = ["sinfo", "-h", "-o", "%D"] + ([f"--partition={self.partition}"] if self.partition else [])
        counts = [int(x) for x in self._cmd(argv, check=False).split() if x.isdigit()]
        return sum(counts) or None

    def images(self) -> Images:
        if self._images is None:
            help_text = self._cmd(["srun", "--help"], check=False)
            self._images = "pyxis" if "--container-image" in help_text else "host"
        return self._images

    # ---- records -------------------------------------------------------------------------------

    def _parse(self, doc: dict[str, Any]) -> Run:
        try:
            return parse_run(doc)
        except InvalidSpec as exc:
            raise Rejected(str(exc), [e.to_json() for e in exc.errors]) from exc

    def _submission(self, run: Run, nonce: str, generation: str | None = None) -> Submission:
        log_dir = self._log_dir(run.metadata.name)
        gpus = run.spec.task_template.requested_resources if run.spec.task_template else None
        asks_gpus = (gpus is not None and gpus.gpu_requests is not None) or any(group_gpus(run))
        node_gpus = self.node_gpus() if asks_gpus else None
        groups = run.spec.task_groups
        sub = to_submission(
            run,
            nonce=nonce,
            log_dir=str(log_dir),
            partition=self.partition,
            node_gpus=node_gpus,
            images=self.images(),
            nodes_available=self.node_count() if groups and len(groups) > 1 else None,
            generation=generation,
        )
        if sub.errors:
            errors = [e.to_json() for e in sub.errors]
            raise Rejected("; ".join(e.format() for e in sub.errors), errors)
        log_dir.mkdir(parents=True, exist_ok=True)
        return sub

    def _runs_dir(self) -> Path:
        path = self.state_dir / "runs"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _record_path(self, name: str) -> Path:
        return self._runs_dir() / f"{name}.json"

    def _log_dir(self, name: str) -> Path:
        return self.state_dir / "logs" / name

    def _load(self, name: str) -> dict[str, Any]:
        return json.loads(self._record_path(name).read_text())

    def _load_or_404(self, name: str) -> dict[str, Any]:
        if not self._record_path(name).exists():
            raise NotFound(f"no run {name} on {self.address}")
        return self._load(name)

    def _save(self, record: dict[str, Any]) -> None:
        path = self._record_path(record["name"])
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record, indent=1, sort_keys=True))
        tmp.replace(path)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with open(self.state_dir / "lock", "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def _read_logs(self, record: dict[str, Any], rank: int) -> str:
        attempt = _units(record)[rank if record["kind"] == "array" else 0]
        job, logs = attempt["job_id"], self._log_dir(record["name"])
        if record["kind"] == "array":
            files = [logs / f"{job}_{rank}.out"]
        elif record["kind"] == "gang":
            files = (
                [logs / f"{job}.out", logs / f"{job}.{rank}.out"]
                if rank == 0
                else [logs / f"{job}.{rank}.out"]
            )
        else:
            files = [logs / f"{job}.out"]
        return "".join(f.read_text(errors="replace") for f in files if f.exists())


def _policy(run: Run, group: int | None = None) -> Policy:
    """The run's restart rules; ``group``: with that worker group's restart_policy."""
    spec = run.spec
    start = resolve_start(spec)
    template = spec.task_template
    if group is not None and spec.task_groups:
        template = spec.task_groups[group].task_template
    return Policy(
        restart_policy=template.restart_policy if template else RESTART_POLICY,
        on_failure=resolve_on_failure(spec, start),
        service=spec.lifetime == "Service",
        array=spec.array is not None,
    )


def _due(attempt: dict[str, Any], now: float) -> bool:
    """A restart waiting for its ``--begin`` time, which has come, and not nudged yet."""
    not_before = attempt.get("not_before")
    return not_before is not None and now >= not_before and not attempt.get("nudged")


def _time_limits(run: Run) -> list[int | None]:
    """Each group's time limit (spec order), or the one template's."""
    if run.spec.task_groups:
        return [g.task_template.time_limit_seconds for g in run.spec.task_groups]
    t = run.spec.task_template
    return [t.time_limit_seconds if t is not None else None]


def _worker_slots(
    record: dict[str, Any],
) -> Iterator[tuple[str, int, int, Callable[[TaskObs], str | None], int]]:
    """Each worker: its name, rank, unit index, where it runs (from its unit's obs), its GPUs."""
    name, kind = record["name"], record["kind"]
    if kind in ("groups", "hetjob"):

        def group_machine(obs: TaskObs) -> str | None:
            # A group's job may span nodes; Slurm does not say which task ran where.
            return ",".join(obs.machines) or None

        for gi, g in enumerate(record["groups"]):
            for i in range(g["replicas"]):
                yield f"{name}-{g['name']}-{i}", g["offset"] + i, gi, group_machine, g["gpus"]
        return
    for rank in range(record["size"]):

        def machine(obs: TaskObs, rank: int = rank) -> str | None:
            if kind == "gang" and rank < len(obs.machines):
                return obs.machines[rank]
            return obs.machine

        yield f"{name}-{rank}", rank, rank if kind == "array" else 0, machine, record["gpus_per_worker"]


def parse_comment_nonce(comment: str) -> str:
    mark = parse_comment(comment)
    assert mark is not None
    return mark["sub"]


def _units(record: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """Each unit's current attempt: the last submission that covers it."""
    kind = record["kind"]
    count = (
        record["size"] if kind == "array" else len(record["groups"]) if kind in ("groups", "hetjob") else 1
    )
    out: dict[int, dict[str, Any]] = {}
    for attempt in record["attempts"]:
        for i in attempt["indices"] if attempt["indices"] is not None else range(count):
            out[i] = attempt
    return out
