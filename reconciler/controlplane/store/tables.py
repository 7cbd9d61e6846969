"""The control plane's tables, as sqlmodel classes on a registry of their own.

Owns the columns of the database at its head revision (what the revisions under ``migrations/``
build; a test compares the two). A column that holds a field of the scheduler's records
(``RunRecord``, ``WorkerRecord``) has no default here: every row is written from a record
(``mapping``), so the record's defaults are the only ones.

Must not touch: connections, transactions, the scheduler's records (``mapping`` turns them into
rows), the migrations' frozen copies of older schemas.
"""

from __future__ import annotations

from typing import cast

from sqlalchemy import Index, Table
from sqlalchemy.orm import registry
from sqlmodel import Column, Field, LargeBinary, SQLModel, Text

__all__ = [
    "AUDIT",
    "CLUSTER_MACHINES",
    "DRIVES",
    "EVENTS",
    "GPU_BUDGETS",
    "GPU_HOLDS",
    "MACHINES",
    "ORGS",
    "QUOTAS",
    "RUNS",
    "SECRETS",
    "SEQUENCES",
    "SOURCES",
    "SOURCE_RUNS",
    "TOKENS",
    "WORKERS",
    "WORKSPACES",
    "AuditRow",
    "ClusterMachineRow",
    "DriveRow",
    "EventRow",
    "GpuBudgetRow",
    "GpuHoldRow",
    "MachineRow",
    "OrgRow",
    "QuotaRow",
    "RunRow",
    "SchemaVersion",
    "SecretRow",
    "SequenceRow",
    "SourceRow",
    "SourceRunRow",
    "StoreTable",
    "TokenRow",
    "WorkerRow",
    "WorkspaceRow",
    "metadata",
    "table_of",
]


class StoreTable(SQLModel, registry=registry()):
    """The base of the store's tables: their own metadata, apart from the source state's."""


metadata = StoreTable.metadata


class SchemaVersion(StoreTable, table=True):
    """The schema version of the astras before alembic (``migrations.FENCE``): they read it, and
    refuse a database whose version is above theirs."""

    __tablename__ = "astra_schema"
    id: int = Field(default=1, primary_key=True)
    version: int


class SequenceRow(StoreTable, table=True):
    """A named counter of the store: ``resource_version`` holds the last resource_version given."""

    __tablename__ = "astra_sequences"
    name: str = Field(primary_key=True)
    value: int


class RunRow(StoreTable, table=True):
    """A run: the document as submitted, its resource_version, and the scheduler's record of it
    (``mapping.RUN_FIELDS``)."""

    __tablename__ = "runs"
    name: str = Field(primary_key=True)
    document: str = Field(sa_column=Column(Text, nullable=False))  # JSON: {"metadata", "spec"}
    resource_version: int
    seq: int = Field(index=True)
    state: str
    reason: str
    admitted: bool
    start: str
    on_failure: str
    restarts: int
    not_before: float | None = None
    placed_at: float | None = None
    running_since: float | None = None
    cancel_requested: bool
    first_failure: str | None = None
    created_at: float
    updated_at: float
    started_at: float | None = None
    finished_at: float | None = None


class WorkerRow(StoreTable, table=True):
    """A worker: its place in the run, the scheduler's record of it (``mapping.WORKER_FIELDS``),
    and its current attempt's process (pid, log)."""

    __tablename__ = "workers"
    name: str = Field(primary_key=True)
    run: str = Field(index=True)
    rank: int
    world_size: int
    group: str | None = None
    group_rank: int | None = None
    ask: str = Field(sa_column=Column(Text, nullable=False))  # JSON of the scheduler's Ask
    state: str
    reason: str
    machine: str | None = None
    gpus: int
    unhealthy_gpus: int
    cpu_cores: int
    memory_bytes: int
    restarts: int
    attempts: int
    restart_reason: str | None = None
    not_before: float | None = None
    placed_at: float | None = None
    started_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    final: bool
    settled: bool
    pid: int | None = None
    pid_started: str | None = None  # the process's start time (Linux /proc), against pid reuse
    log: str | None = None
    image: str | None = None  # recorded by the local executor, not pulled


class EventRow(StoreTable, table=True):
    """What happened: every decision and observation, in order."""

    __tablename__ = "events"
    id: int | None = Field(default=None, primary_key=True)
    at: float
    run: str = Field(index=True)
    worker: str | None = None
    kind: str
    state: str | None = None
    reason: str | None = None
    machine: str | None = None
    exit_code: int | None = None


class MachineRow(StoreTable, table=True):
    """A machine of the inventory: its ``Machine`` fields but the name, as JSON."""

    __tablename__ = "machines"
    name: str = Field(primary_key=True)
    spec: str = Field(sa_column=Column(Text, nullable=False))  # JSON of the inventory's Machine
    state: str


class SourceRow(StoreTable, table=True):
    """A reconcile source's own row: its status and history (JSON text), any other keys of its
    state (``data``, a JSON object), its resource_version and its apply lock. Its inventory is
    in ``source_runs``."""

    __tablename__ = "sources"
    name: str = Field(primary_key=True)
    data: str = Field(sa_column=Column(Text, nullable=False))
    resource_version: int
    lock: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    updated_at: float
    status: str | None = Field(default=None, sa_column=Column(Text, nullable=True))  # JSON object
    history: str | None = Field(default=None, sa_column=Column(Text, nullable=True))  # JSON list


class SourceRunRow(StoreTable, table=True):
    """One run of a source's inventory: its last-applied spec (JSON text, served as is), when, which
    file, and the spec's digest (``sources.entry_digest``), computed once when the entry is written.

    The index holds every column but the spec: an inventory read without specs reads only it."""

    __tablename__ = "source_runs"
    __table_args__ = (Index("ix_source_runs_digests", "source", "run", "digest", "applied_at", "file"),)
    source: str = Field(primary_key=True)
    run: str = Field(primary_key=True)
    spec: str = Field(sa_column=Column(Text, nullable=False))
    applied_at: float
    file: str | None = None
    digest: str | None = None


class ClusterMachineRow(StoreTable, table=True):
    """A machine of a cluster other than the default (``astra server --inventory NAME=FILE``);
    the default cluster's are in ``machines``, as before clusters had names."""

    __tablename__ = "cluster_machines"
    cluster: str = Field(primary_key=True)
    name: str = Field(primary_key=True)
    spec: str = Field(sa_column=Column(Text, nullable=False))  # JSON of the inventory's Machine
    state: str


# ---- teams: orgs, workspaces, tokens, quotas, the audit trail ----------------------------------


class OrgRow(StoreTable, table=True):
    """An org: ``default`` always (the server's own token is its admin)."""

    __tablename__ = "orgs"
    name: str = Field(primary_key=True)
    created_at: float


class WorkspaceRow(StoreTable, table=True):
    """A workspace of an org: ``default`` always; others are made by an admin (a token or a quota
    given for them)."""

    __tablename__ = "workspaces"
    org: str = Field(primary_key=True)
    name: str = Field(primary_key=True)
    created_at: float


class TokenRow(StoreTable, table=True):
    """A token made by an admin: its name, scope (a workspace, or the whole org when
    ``workspace`` is null), role, and the SHA-256 of its text (the text itself is never kept)."""

    __tablename__ = "tokens"
    org: str = Field(primary_key=True)
    name: str = Field(primary_key=True)
    workspace: str | None = None
    role: str
    hash: str = Field(unique=True)
    created_at: float
    created_by: str


class QuotaRow(StoreTable, table=True):
    """A workspace's quota on a cluster: GPUs and runs holding machines (null: no limit)."""

    __tablename__ = "quotas"
    org: str = Field(primary_key=True)
    workspace: str = Field(primary_key=True)
    cluster: str = Field(primary_key=True)
    gpus: int | None = None
    runs: int | None = None
    updated_at: float


class AuditRow(StoreTable, table=True):
    """One write, as the audit trail keeps it: who (the token's name), where, when, and what
    changed (``detail``, a JSON object). The newest N of each workspace are kept."""

    __tablename__ = "audit_events"
    __table_args__ = (Index("ix_audit_events_workspace", "org", "workspace", "id"),)
    id: int | None = Field(default=None, primary_key=True)
    at: float
    org: str
    workspace: str
    cluster: str | None = None
    token: str
    action: str
    kind: str
    name: str
    source: str | None = None
    detail: str = Field(sa_column=Column(Text, nullable=False))


class DriveRow(StoreTable, table=True):
    """A drive: a named folder of an org's workspace on this host, mounted into the workers of
    that workspace's runs that name it (whatever their cluster: the clusters share the host)."""

    __tablename__ = "drives"
    org: str = Field(default="default", primary_key=True)
    workspace: str = Field(default="default", primary_key=True)
    name: str = Field(primary_key=True)
    path: str = Field(sa_column=Column(Text, nullable=False))
    created_at: float


class SecretRow(StoreTable, table=True):
    """A secret of an org's workspace: its value sealed (``secretbox``: AES-GCM, the key's id
    beside it), its size, who set it and when. Never its value in the clear."""

    __tablename__ = "secrets"
    org: str = Field(default="default", primary_key=True)
    workspace: str = Field(default="default", primary_key=True)
    name: str = Field(primary_key=True)
    key_id: str
    sealed: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    size: int
    set_by: str
    set_at: float
    created_at: float


class GpuHoldRow(StoreTable, table=True):
    """One worker's hold of GPUs on a machine: from its placement to its release, on the control
    plane's clock (``ended_at`` null while it holds), and how its run ended (``outcome``, once
    it has). What ``astra usage`` adds up; kept when the run is deleted and past the audit
    trail's length (``usage``)."""

    __tablename__ = "gpu_holds"
    __table_args__ = (
        Index("ix_gpu_holds_scope", "org", "workspace", "cluster", "started_at"),
        Index("ix_gpu_holds_open", "worker", "ended_at"),
        Index("ix_gpu_holds_run", "run"),
    )
    id: int | None = Field(default=None, primary_key=True)
    run: str
    worker: str
    org: str
    workspace: str
    cluster: str
    gpus: int
    started_at: float
    ended_at: float | None = None
    outcome: str | None = None
    labels: str = Field(sa_column=Column(Text, nullable=False))  # JSON: the run's labels at the start


class GpuBudgetRow(StoreTable, table=True):
    """A workspace's GPU-hour budget on a cluster: ``gpu_hours`` per calendar ``month`` or week."""

    __tablename__ = "gpu_budgets"
    org: str = Field(primary_key=True)
    workspace: str = Field(primary_key=True)
    cluster: str = Field(primary_key=True)
    gpu_hours: int
    per: str
    updated_at: float


def table_of(model: type[SQLModel]) -> Table:
    """The SQLAlchemy table a sqlmodel class maps (its ``__table__``, which sqlmodel leaves untyped)."""
    return cast(Table, vars(model)["__table__"])


RUNS = table_of(RunRow)
WORKERS = table_of(WorkerRow)
EVENTS = table_of(EventRow)
MACHINES = table_of(MachineRow)
SEQUENCES = table_of(SequenceRow)
SOURCES = table_of(SourceRow)
SOURCE_RUNS = table_of(SourceRunRow)
CLUSTER_MACHINES = table_of(ClusterMachineRow)
ORGS = table_of(OrgRow)
WORKSPACES = table_of(WorkspaceRow)
TOKENS = table_of(TokenRow)
QUOTAS = table_of(QuotaRow)
AUDIT = table_of(AuditRow)
DRIVES = table_of(DriveRow)
SECRETS = table_of(SecretRow)
GPU_HOLDS = table_of(GpuHoldRow)
GPU_BUDGETS = table_of(GpuBudgetRow)
