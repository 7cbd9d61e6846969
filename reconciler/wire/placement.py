"""The shapes of ``POST /runs:placement`` (= ``/jobs:placement``): where runs would start, changing nothing.

Owns the dry run's request and answer, as pydantic models (the published ``/openapi.json`` is
made from them); its path is ``reconciler.wire.PLACEMENT_PATH``, its limit ``BATCH_MAX``. Must
not touch: HTTP, the store, the scheduler.

The request (``RunPlacement``) is a list of run documents, each checked as ``POST /runs`` checks
one; the answer (``RunPlacementResult``) has one item per document, in order: for a valid one
(200) the scheduler's answer to "if this were submitted now", from the real scheduler run on a
copy of its state (a run of the same name is replaced in that copy, as an apply's replace does):

======= ==========================================================================================
outlook words
======= ==========================================================================================
start   the shape it would get: ``2 machines x 8 GPUs, one NVLink domain`` (and, when only some
        of its workers would start, how many, and why the others wait)
wait    why it would wait, as the run's reason would say it (``Array runs at most 8 workers at
        once``, a workspace's quota, ``Waiting for room: …`` with the GPUs free now)
fail    why no placement could ever hold it (the run would be Failed at once)
======= ==========================================================================================

A document refused is answered 422 with ``errors`` (``POST /runs``'s 422 body). Nothing is
created, queued or recorded.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from . import BATCH_MAX
from .models import Answer, Problem, RequestBody

__all__ = ["RunOutlook", "RunPlacement", "RunPlacementItem", "RunPlacementResult"]


class RunPlacement(RequestBody):
    """``POST /runs:placement``: run documents to place as if submitted now, in order."""

    runs: list[Any] = Field(
        description=f"Run documents (each a RunDocument, checked as POST /runs checks one); "
        f"at most {BATCH_MAX}."
    )


class RunOutlook(Answer):
    """What the scheduler would do with the run now."""

    kind: Literal["start", "wait", "fail"] = Field(description="start, wait or fail (see the operation).")
    words: str = Field(description="The shape it would get, or why it would wait or fail, in words.")


class RunPlacementItem(Answer):
    """One document's answer."""

    name: str | None = Field(description="Its metadata.name, when it has one.")
    status: int = Field(description="200 (outlook) or 422 (errors).")
    outlook: RunOutlook | None = Field(description="200: where it would start, or why not.")
    errors: list[Problem] | None = Field(description="422: every problem (POST /runs's 422 body).")


class RunPlacementResult(Answer):
    """The answer: one item per document, in order."""

    items: list[RunPlacementItem]
