"""The shapes of ``POST /runs:batch`` (= ``/jobs:batch``): many runs created in one request.

Owns the batch's request and answer, as pydantic models (the published ``/openapi.json`` is made
from them); the limits are in ``reconciler.wire`` (``BATCH_PATH``, ``BATCH_MAX``), which the
client reads without pydantic. Must not touch: HTTP, the store, the scheduler.

A batch (``RunBatch``) is a list of run documents, each checked as ``POST /runs`` checks one
(``validate_data``: the same 422 words), and, optionally, the source whose inventory records the
runs created (``record``: under the source's apply lock, named by ``X-Astra-Lock``). The runs
created, and their inventory entries, are written in ONE transaction, and the scheduler takes
them in one pass. The answer (``RunBatchResult``) has one item per document, in order, with the
status a ``POST /runs`` of that document alone would have had, and its words:

====== ===================================================================================
status what
====== ===================================================================================
201    created (``resource_version``)
409    a run of that name exists, or an earlier document of the batch has the name (``detail``)
422    the document is refused (``errors``: the body ``POST /runs`` answers, every problem)
424    not attempted: ``stop_on_error`` was given and an earlier document was not created
====== ===================================================================================
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from . import BATCH_MAX
from .models import EPOCH, Answer, Problem, RequestBody

__all__ = ["RunBatch", "RunBatchItem", "RunBatchRecord", "RunBatchResult"]


class RunBatchRecord(RequestBody):
    """Where the runs created are recorded: a source's inventory, under its apply lock."""

    source: str = Field(description="The source's name.")
    applied_at: float = Field(description=f"When they were applied ({EPOCH}).")
    files: dict[str, str] = Field(
        default_factory=dict, description="Each run's file (``examples/sweep.yaml``), by the run's name."
    )


class RunBatch(RequestBody):
    """``POST /runs:batch``: run documents to create, in order."""

    runs: list[Any] = Field(
        description=f"Run documents (each a RunDocument, checked as POST /runs checks one); "
        f"at most {BATCH_MAX}."
    )
    record: RunBatchRecord | None = Field(
        None,
        description="With it, each run created is recorded in the source's inventory (its spec "
        "less astra's own annotations, its file, applied_at), in the same transaction; the write "
        "must name the source's apply lock (X-Astra-Lock).",
    )
    stop_on_error: bool = Field(
        False,
        description="Stop at the first document that is not created: the ones after it are "
        "answered 424, not attempted (what an apply does, run by run).",
    )


class RunBatchItem(Answer):
    """One document's result, as ``POST /runs`` of it alone would have answered."""

    name: str | None = Field(description="Its metadata.name, when it has one.")
    status: int = Field(description="201, 409, 422 or 424 (see the operation).")
    resource_version: int | None = Field(description="201: the run's resource_version.")
    detail: str | None = Field(description="409, 424: why, in words.")
    errors: list[Problem] | None = Field(description="422: every problem (POST /runs's 422 body).")


class RunBatchResult(Answer):
    """The answer to a batch: one item per document, in order."""

    created: int = Field(description="How many runs were created.")
    items: list[RunBatchItem]
