"""The client's decoders of the Astraeus API's answers: pydantic-free twins of
``reconciler.wire.models`` (``astra plan`` imports no pydantic, and a decoder reads a 10,000-run
summary listing faster than a model would). ``tests/controlplane_api/test_wire_twins.py`` holds
each one to its model. Lenient where the models are the server's word: another control plane may
leave a field out, or send a time as ISO 8601.

Must not touch: the network (``clusters.http`` makes the calls), pydantic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import ClusterError, LiveRun, RunSummary, WorkerInfo

if TYPE_CHECKING:
    import httpx

    from ..state import Lock

__all__ = [
    "briefs_of",
    "detail_of",
    "errors_of",
    "holder_of",
    "items_of",
    "live_of",
    "one_error",
    "related",
    "summary_of",
    "time_of",
    "without_version",
    "worker_fields",
    "worker_of",
]


def detail_of(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text.strip()[:300] or response.reason_phrase
    detail = data.get("detail", data.get("message", data)) if isinstance(data, dict) else data
    if isinstance(detail, list):  # a 422's problems (wire.Problems), or FastAPI's own form
        return "; ".join(one_error(e) for e in detail)
    return detail if isinstance(detail, str) else str(detail)


def one_error(e: Any) -> str:
    if isinstance(e, dict) and "message" in e:
        where = ":".join(str(e[k]) for k in ("file", "line", "column") if e.get(k) is not None)
        parts = [p for p in (where, e.get("path", ""), e["message"]) if p]
        return ": ".join(parts)
    if isinstance(e, dict) and "msg" in e:
        return f"{'.'.join(str(x) for x in e.get('loc', []))}: {e['msg']}"
    return str(e)


def errors_of(response: httpx.Response) -> list[dict[str, Any]]:
    try:
        data = response.json()
    except ValueError:
        return []
    if isinstance(data, dict):
        data = data.get("errors", data.get("detail", []))
    return [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []


def holder_of(exc: BaseException) -> Lock | None:
    response = getattr(exc.__cause__, "response", None)
    if response is None:
        return None
    try:
        data = response.json()
    except ValueError:
        return None
    lock = data.get("lock") if isinstance(data, dict) else None
    if not isinstance(lock, dict) and isinstance(data, dict) and isinstance(data.get("detail"), dict):
        lock = data["detail"].get("lock")
    from ..state import Lock  # a lock's holder is read by writes only: the reads leave state out

    return Lock.from_json(lock) if isinstance(lock, dict) and lock.get("id") else None


def items_of(data: Any, key: str) -> list[Any]:
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        for k in (key, "items"):
            if isinstance(data.get(k), list):
                return data[k]
    return []


def time_of(value: Any) -> float | None:
    """Seconds since the epoch, from a number or an ISO 8601 string."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        import datetime as dt  # astra's own servers send numbers

        try:
            parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=dt.UTC)
        return parsed.timestamp()
    return None


def without_version(document: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in (document.get("metadata") or {}).items() if k != "resource_version"}
    return {**document, "metadata": meta}


def live_of(data: Any) -> LiveRun:
    if not isinstance(data, dict) or not isinstance(data.get("metadata"), dict):
        raise ClusterError("the cluster answered with something that is not a run")
    meta = data["metadata"]
    status: dict[str, Any] = data["status"] if isinstance(data.get("status"), dict) else {}
    counts = data.get("task_counts") or status.get("task_counts") or {}
    document = {"metadata": dict(meta), "spec": data.get("spec") or {}}
    return LiveRun(
        name=meta.get("name", ""),
        document=document,
        resource_version=int(meta.get("resource_version") or 0),
        state=str(status.get("state", "Pending")),
        reason=str(status.get("reason") or ""),
        task_counts={str(k): int(v) for k, v in counts.items()},
        created_at=time_of(status.get("created_at", meta.get("created_at"))),
        started_at=time_of(status.get("started_at")),
        finished_at=time_of(status.get("finished_at")),
        workers_running=int(status.get("workers_running", counts.get("Running", 0)) or 0),
        gpus_held=int(status.get("gpus_held", 0) or 0),
        schedule=status["schedule"] if isinstance(status.get("schedule"), dict) else None,
    )


def summary_of(data: Any) -> RunSummary:
    try:
        name, version, state, digest = (
            data["name"],
            data["resource_version"],
            data["state"],
            data["spec_digest"],
        )
    except (KeyError, TypeError):
        raise ClusterError("the cluster answered with something that is not a run summary") from None
    if type(name) is not str or type(state) is not str or type(version) is not int:
        raise ClusterError("the cluster answered with something that is not a run summary")
    return RunSummary(name, version, state, digest if type(digest) is str and digest else None)


def worker_fields(data: dict[str, Any]) -> dict[str, Any]:
    """One worker of ``GET /runs/{name}/workers`` as the fields of its ``WorkerInfo``, in their
    order (``dataclasses.asdict`` of ``worker_of``'s): what ``astra get workers`` prints, without
    a frozen dataclass made per worker (10,000 of them cost a fifth of the command)."""
    return {
        "name": str(data.get("name", "")),
        "rank": int(data.get("rank", 0) or 0),
        "state": str(data.get("state", "")),
        "reason": str(data.get("reason") or ""),
        "machine": data.get("machine"),
        "exit_code": data.get("exit_code"),
        "restarts": int(data.get("restarts", 0) or 0),
        "gpus": int(data.get("gpus", 0) or 0),
        "started_at": time_of(data.get("started_at")),
        "group": data.get("group"),
    }


def worker_of(data: dict[str, Any]) -> WorkerInfo:
    return WorkerInfo(**worker_fields(data))


def briefs_of(data: Any) -> list[dict[str, Any]]:
    """``GET /runs?view=brief``'s items (``wire.briefs.RunBrief``) as they come: dicts, each with
    a name (the listing's readers take the rest leniently: ``cli.runviews``)."""
    return [b for b in items_of(data, "runs") if isinstance(b, dict) and type(b.get("name")) is str]


def related(run: LiveRun, depends_on: str | None = None, rerun_of: str | None = None) -> bool:
    """Whether ``run`` is one ``GET /runs?depends_on=&rerun_of=`` lists: its ``spec.depends_on``
    names run ``depends_on``, and it reruns ``rerun_of`` (its annotation ``astra.rerun-of``)."""
    spec = run.document.get("spec") or {}
    if depends_on is not None and not any(
        isinstance(d, dict) and d.get("run") == depends_on for d in spec.get("depends_on") or ()
    ):
        return False
    notes = (run.document.get("metadata") or {}).get("annotations") or {}
    return rerun_of is None or (isinstance(notes, dict) and notes.get("astra.rerun-of") == rerun_of)
