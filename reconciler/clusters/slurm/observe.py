"""The observe step, decided: from a run's record and one ``squeue --json``, what its workers are,
what to do about them, and the run as the ``Cluster`` protocol reports it.

``observe(record, rows, now)`` decodes each unit's current attempt (``decode``), judges it
(``policy``) and returns an ``Observation``: the verdicts, what to remember of jobs seen ending
(Slurm forgets ended jobs after MinJobAge; the record does not), and the ``Action``s for the
cluster to carry out, in order::

    action          when                                              the cluster
    CancelJobs      a gang of groups restarts whole: its live jobs    scancel (errors ignored)
    RestartGroups   a run with worker groups restarts some groups     sbatch the groups' jobs
                    (or all: a new generation)
    ResubmitUnit    a unit of a run of one template restarts          sbatch --begin
    StartNow        a restart's --begin time has come                 scontrol StartTime=now
    FailRun         a failure fails the run: its live jobs            scancel, and remember it

after which (``again``) a run whose groups were resubmitted is observed once more, so that it
reports what was just submitted, not the attempts it replaced. ``report`` makes the ``LiveRun``
and its ``WorkerInfo``s.

Must not touch: processes, files, the clock (``now`` is an argument). Pure but for reading the
record it is given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from reconciler.runspec.models import Run, resolve_on_failure, resolve_start
from reconciler.runspec.normalize import RESTART_POLICY
from reconciler.runspec.parse import parse_run
from reconciler.runspec.vocabulary import FINAL_RUN_STATES, RunState, WorkerState

from ..base import LiveRun, WorkerInfo
from .decode import JobRow, TaskObs, observe_submission
from .groups import group_order
from .policy import (
    Policy,
    Resubmit,
    RunStatus,
    Unit,
    Verdict,
    after_early_signal,
    group_restarts,
    judge,
    run_status,
)
from .records import units

__all__ = [
    "Action",
    "CancelJobs",
    "FailRun",
    "Observation",
    "RestartGroups",
    "ResubmitUnit",
    "StartNow",
    "observe",
    "policy_of",
    "report",
]


@dataclass(frozen=True)
class CancelJobs:
    job_ids: tuple[str, ...]


@dataclass(frozen=True)
class RestartGroups:
    """Submit group jobs again: every group (``only`` None: a new generation) or ``only`` some,
    each waiting for its predecessor's current job while that one is ``pending`` (not started)."""

    resubmit: Resubmit
    only: frozenset[int] | None = None
    pending: frozenset[int] | None = None


@dataclass(frozen=True)
class ResubmitUnit:
    resubmit: Resubmit


@dataclass(frozen=True)
class StartNow:
    """A job waits for a ``--begin`` time that has come: start it now, and mark its attempt
    (``record["attempts"][attempt]``) nudged."""

    attempt: int
    job_id: int


@dataclass(frozen=True)
class FailRun:
    """The run failed: cancel its jobs that have not ended (``job_ids``, maybe none), once."""

    job_ids: tuple[str, ...]


Action = CancelJobs | RestartGroups | ResubmitUnit | StartNow | FailRun


@dataclass
class Observation:
    run: Run
    policy: Policy
    #: Each unit and its verdict, by unit index.
    verdicts: dict[int, tuple[Unit, Verdict]]
    #: New entries of the record's ``seen``: a unit's job seen ending, by unit index (a string).
    remember: dict[str, Any] = field(default_factory=dict)
    actions: list[Action] = field(default_factory=list)
    #: Observe again once the actions are carried out (groups were resubmitted).
    again: bool = False


def policy_of(run: Run, group: int | None = None) -> Policy:
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
        exit_codes=tuple((tuple(r.codes), r.action) for r in (template.on_exit_codes or []))
        if template
        else (),
    )


def observe(record: dict[str, Any], rows: list[JobRow], now: float, waits: str | None = None) -> Observation:
    """Decode and judge every unit of the run, and decide what the cluster must do (module
    docstring). ``waits``: the words of the runs it waits for (``dependencies.blocked``), which
    its waiting workers say; a run whose dependency can no longer be met (``record["unmet"]``)
    has its workers not run, in its words, and nothing more is done for it."""
    run = parse_run(record["document"])
    found = Observation(run, policy_of(run), {})
    current = units(record)
    _judge_units(record, rows, current, found, now)
    unmet = record.get("unmet")
    if unmet or waits:
        for index, (unit, verdict) in list(found.verdicts.items()):
            if unmet and (not verdict.final or unit.obs.end_kind == "cancelled"):
                verdict = Verdict(WorkerState.STOPPED, f"Not run: {unmet}", final=True)
            elif waits and unit.obs.end_kind is None and unit.obs.state == WorkerState.PENDING:
                verdict = replace(verdict, reason=waits)
            found.verdicts[index] = (unit, verdict)
        if unmet:
            return found
    if record["kind"] in ("groups", "hetjob") and _restart_groups(record, current, found):
        found.again = True
        return found
    nudged: set[int] = set()
    for index, (unit, verdict) in sorted(found.verdicts.items()):
        attempt = current[index]
        if verdict.resubmit is not None:
            if record["kind"] not in ("groups", "hetjob"):
                found.actions.append(ResubmitUnit(verdict.resubmit))
        elif unit.obs.state == WorkerState.PENDING and _due(attempt, now) and id(attempt) not in nudged:
            # Slurm looks at --begin only every half minute or so: once astra sees the restart
            # is due it moves the start time to now, and the worker starts at once. One nudge
            # an attempt: the copies of an array share theirs.
            nudged.add(id(attempt))
            position = next(k for k, a in enumerate(record["attempts"]) if a is attempt)
            found.actions.append(StartNow(position, attempt["job_id"]))
    if any(v.fails_run for _, v in found.verdicts.values()) and not record.get("failed_cancelled"):
        live = sorted({str(current[i]["job_id"]) for i, (_, v) in found.verdicts.items() if not v.final})
        found.actions.append(FailRun(tuple(live)))
    return found


def _judge_units(
    record: dict[str, Any],
    rows: list[JobRow],
    current: dict[int, dict[str, Any]],
    found: Observation,
    now: float,
) -> None:
    """Each unit's current attempt decoded (once per job), remembered when it ends, and judged."""
    kind = record["kind"]
    grouped = kind in ("groups", "hetjob")
    limits = _time_limits(found.run)
    templates = _templates(found.run)
    seen: dict[str, Any] = record.get("seen") or {}
    cache: dict[int, dict[int, TaskObs]] = {}
    for index, attempt in current.items():
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
        obs = after_early_signal(cache[key][index if kind in ("array", "hetjob") else 0], templates[index])
        remembered = seen.get(str(index))
        if obs.end_kind == "gone" and remembered and remembered["job_id"] == key:
            obs = TaskObs(**{**remembered["obs"], "machines": tuple(remembered["obs"]["machines"])})
        elif obs.end_kind not in (None, "gone") and (not remembered or remembered["job_id"] != key):
            kept = {**obs.__dict__, "machines": list(obs.machines)}
            found.remember[str(index)] = {"job_id": key, "obs": kept}
        unit = Unit(index, obs, attempt["restart"], attempt["why"])
        policy = policy_of(found.run, index) if grouped else found.policy
        found.verdicts[index] = (unit, judge(policy, unit, now))


def _restart_groups(record: dict[str, Any], current: dict[int, dict[str, Any]], found: Observation) -> bool:
    """The restarts of a run with worker groups as actions; whether there are any."""
    verdicts = found.verdicts
    plan = group_restarts(
        found.policy.on_failure, [verdicts[i] for i in sorted(verdicts)], one_job=record["kind"] == "hetjob"
    )
    if plan.whole is None and not plan.groups:
        return False
    if plan.whole is not None:
        # RestartJob: the groups still running are stopped, and every group starts again.
        live = sorted({str(a["job_id"]) for i, a in current.items() if not verdicts[i][1].final})
        if live:
            found.actions.append(CancelJobs(tuple(live)))
        found.actions.append(RestartGroups(plan.whole))
    order = group_order(list(found.run.spec.task_groups or ()))
    pending = {i for i, (u, _) in verdicts.items() if u.obs.state == WorkerState.PENDING}
    for r in sorted(plan.groups, key=lambda r: order.index(r.index)):
        # RestartTask: this group alone; it waits for its start_after group only if that one
        # has not started yet (is pending, or is being resubmitted in this round).
        found.actions.append(RestartGroups(r, frozenset({r.index}), frozenset(pending)))
        pending.add(r.index)
    return True


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


class _Templates:
    """Each unit's template: a group's by its index, else the run's one for every unit."""

    def __init__(self, run: Run) -> None:
        self.groups = [g.task_template for g in run.spec.task_groups or ()]
        self.one = run.spec.task_template

    def __getitem__(self, index: int) -> Any:
        return self.groups[index] if self.groups else self.one


_templates = _Templates


# ---- the report ----------------------------------------------------------------------------------


def report(record: dict[str, Any], found: Observation) -> tuple[LiveRun, list[WorkerInfo]]:
    """The run and its workers as the ``Cluster`` protocol reports them."""
    rows: list[tuple[str, Verdict, str | None, float | None]] = []
    workers: list[WorkerInfo] = []
    gpus_held = 0
    for wname, rank, index, machine_of, gpus in _worker_slots(record):
        unit, v = found.verdicts[index]
        obs = unit.obs
        machine = machine_of(obs)
        rows.append((wname, v, machine, obs.ended_at))
        if v.state == WorkerState.RUNNING:
            gpus_held += gpus
        waiting = v.state == WorkerState.PENDING
        workers.append(
            WorkerInfo(
                name=wname,
                rank=rank,
                state=str(v.state),
                reason=v.reason,
                machine=machine if not waiting else None,
                exit_code=obs.exit_code if obs.end_kind is not None else None,
                restarts=unit.restarts,
                gpus=gpus,
                started_at=obs.started_at if not waiting else None,
            )
        )
    status = run_status(found.policy, rows)
    if record.get("unmet"):  # a dependency that can no longer be met (``dependencies``)
        status = RunStatus(RunState.FAILED, record["unmet"], status.task_counts, status.running)
    starts = [w.started_at for w in workers if w.started_at is not None]
    ends = [e for _, _, _, e in rows if e is not None]
    live = LiveRun(
        name=record["name"],
        document=record["document"],
        resource_version=record["resource_version"],
        state=str(status.state),  # plain strings, as every cluster reports them (YAML has no enums)
        reason=status.reason,
        task_counts={str(k): n for k, n in status.task_counts.items()},
        created_at=record["created_at"],
        started_at=min(starts) if starts else None,
        finished_at=max(ends) if ends and status.state in FINAL_RUN_STATES else None,
        workers_running=status.running,
        gpus_held=gpus_held,
    )
    return live, workers


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
