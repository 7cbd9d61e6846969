"""The reconcile sources' state kept with the cluster: each source's row and its inventory's rows.

Owns the ``/sources`` writes and reads of the store (``KeptSources``, the part of ``Store`` that
serves them): a source is its own row (resource_version, lock, status, history, any other keys)
and one ``source_runs`` row per run of its inventory. Every write is one transaction and bumps
the source's resource_version (except the lock's, which the entity tag covers). Reads assemble
the JSON text from the stored texts, without parsing the specs again; each entry's digest is
computed once, when it is written, and kept beside its spec.

Each source is kept under its key (``scopes.source_key``: its name, in the default scope); what
is answered and said names it by its name.

A source's resource_version is its own counter (1 at the first write, +1 per write). Deleting a
source (``delete_source``) empties it (no inventory, status, history or other keys) but keeps
its row and moves its counter on, so a name is never reused with an old version (a tag read
before cannot match again); a source that holds nothing is not listed and reads as not found.

Must not touch: runs, workers, events (``facade``), the schema (``migrations``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import delete, insert, or_, select, update
from sqlalchemy.engine import Engine

from ...runspec.normalize import spec_digest
from ...runspec.vocabulary import HISTORY_KEEP
from ...state.suspension import SUSPENDED, keep_suspension
from ...wire import text
from ..scopes import SOURCE_MARK, source_name
from .errors import LockMismatch, NotFound, Stale
from .tables import SOURCE_RUNS, SOURCES

__all__ = ["KeptSources", "compact", "entry_digest", "source_run_row"]


class KeptSources:
    """The sources' part of ``Store``: every method is one transaction on ``self.engine``."""

    engine: Engine
    #: each source's inventory without specs, as JSON text, at the resource_version it was
    #: read at (every inventory write moves it): what a warm plan asks for every time
    _digest_texts: dict[str, tuple[int, str]]

    def _source_row(self, conn: Any, name: str) -> Mapping[str, Any] | None:
        return conn.execute(select(SOURCES).where(SOURCES.c.name == name)).mappings().first()

    def source_tag(self, name: str) -> str | None:
        """The source's entity tag (``"RV-LOCKID"``): it changes with every write and with the lock."""
        s = SOURCES
        with self.engine.connect() as conn:
            row = conn.execute(select(s.c.resource_version, s.c.lock).where(s.c.name == name)).first()
        return None if row is None else _tag(row[0], row[1])

    def get_source_json(self, name: str, *, empty: bool = False) -> tuple[str, str] | None:
        """The whole source as JSON text and its tag; ``None`` when it was never written (or
        holds nothing: deleted), unless ``empty`` (what a PUT of nothing answers)."""
        with self.engine.connect() as conn:
            row = self._source_row(conn, name)
            if row is None:
                return None
            inventory = self._inventory_text(conn, name)
            if _empty(row, inventory) and not empty:
                return None
            text = _source_text(row, inventory)
        return text, _tag(row["resource_version"], row["lock"])

    def get_source(self, name: str) -> dict[str, Any] | None:
        found = self.get_source_json(name)
        return None if found is None else json.loads(found[0])

    def list_sources_json(self, prefix: str = "") -> str:
        """``{"items": [SOURCE, ...]}`` (by name) as JSON text: the sources of one scope, those
        whose keys start with ``prefix`` (``scopes.source_prefix``; '': the default scope's)."""
        s = SOURCES
        if prefix:
            mine = s.c.name.startswith(prefix, autoescape=True)
        else:
            mine = or_(~s.c.name.startswith(SOURCE_MARK), s.c.name.startswith(SOURCE_MARK * 2))
        with self.engine.connect() as conn:
            rows = conn.execute(select(s).where(mine).order_by(s.c.name)).mappings().all()
            texts = [(r, self._inventory_text(conn, r["name"])) for r in rows]
            items = [_source_text(r, inventory) for r, inventory in texts if not _empty(r, inventory)]
        return '{"items":[' + ",".join(items) + "]}"

    def list_sources(self, prefix: str = "") -> list[dict[str, Any]]:
        return json.loads(self.list_sources_json(prefix))["items"]

    def source_runs_json(
        self, name: str, *, specs: bool = True, runs: Iterable[str] | None = None
    ) -> tuple[str, str] | None:
        """``{"name", "resource_version", "items": {RUN: ENTRY}}`` as JSON text, and the tag;
        ``None`` when the source was never written. ``specs=False``: each ENTRY without its spec
        (the spec column is not read); ``runs``: only those runs' entries."""
        s = SOURCES
        with self.engine.connect() as conn:
            row = conn.execute(select(s.c.resource_version, s.c.lock).where(s.c.name == name)).first()
            if row is None:
                return None
            held = self._digest_texts.get(name) if not specs and runs is None else None
            if held is not None and held[0] == row[0]:
                inventory = held[1]
            else:
                inventory = self._inventory_text(conn, name, specs=specs, runs=runs)
                if not specs and runs is None:
                    self._digest_texts[name] = (row[0], inventory)
        head = f'{{"name":{_str(source_name(name))},"resource_version":{row[0]},"items":'
        return head + inventory + "}", _tag(row[0], row[1])

    def _inventory_text(
        self, conn: Any, name: str, *, specs: bool = True, runs: Iterable[str] | None = None
    ) -> str:
        """``{RUN: ENTRY}`` (by run) as JSON text; ``specs=False``: no ``spec``; ``runs``: only those."""
        r = SOURCE_RUNS
        spec = (r.c.spec,) if specs else ()
        q = select(r.c.run, r.c.digest, r.c.applied_at, r.c.file, *spec).where(r.c.source == name)
        if runs is not None:
            q = q.where(r.c.run.in_(list(runs)))
        parts = []
        for run, d, at, f, *given in conn.execute(q.order_by(r.c.run)).all():
            rest = f'"digest":{_str_or_null(d)},"applied_at":{_num(at)},"file":{_str_or_null(f)}}}'
            parts.append(f'{_str(run)}:{{"spec":{given[0]},{rest}' if given else f"{_str(run)}:{{{rest}")
        return "{" + ",".join(parts) + "}"

    def _write_source(
        self, conn: Any, name: str, now: float, lock_id: str | None, *, need_lock: bool, **values: Any
    ) -> int:
        """Check the lock, create the source's row if needed, set ``values`` and bump its version."""
        row = self._source_row(conn, name)
        held = json.loads(row["lock"]) if row is not None and row["lock"] else None
        if (need_lock or lock_id is not None) and (held is None or held.get("id") != lock_id):
            shown = source_name(name)
            if held is None:
                why = f"source {shown} is not locked" + (f": lock {lock_id} is not held" if lock_id else "")
            else:
                why = f"source {shown} is locked under {held.get('id')}, not {lock_id or '(no lock given)'}"
            raise LockMismatch(why, held)
        if row is None:
            conn.execute(
                insert(SOURCES).values(
                    **{"data": "{}", **values, "name": name, "resource_version": 1, "updated_at": now}
                )
            )
            return 1
        rv = row["resource_version"] + 1
        conn.execute(
            update(SOURCES)
            .where(SOURCES.c.name == name)
            .values(resource_version=rv, updated_at=now, **values)
        )
        return rv

    def put_source(
        self, name: str, data: dict[str, Any], expected: int | None, now: float, lock_id: str | None = None
    ) -> int:
        """Replace a source's whole state; ``expected`` is the resource_version read (0: create).

        ``data`` may hold ``inventory`` ({RUN: {"spec", "applied_at", "file"?}}, checked by the
        caller), ``status`` (an object), ``history`` (a list; the newest ``HISTORY_KEEP`` kept)
        and any other keys (kept as given). Returns the new resource_version."""
        rest = dict(data)
        inventory = rest.pop("inventory", None) or {}
        status = rest.pop("status", None)
        history = rest.pop("history", None)
        r = SOURCE_RUNS
        with self.engine.begin() as conn:
            row = self._source_row(conn, name)
            current = row["resource_version"] if row else 0
            if expected is not None and expected != current:
                raise Stale(
                    f"source {source_name(name)} changed since it was read: resource_version {expected} "
                    f"is stale (now {current}); read it again",
                    current,
                )
            rv = self._write_source(
                conn,
                name,
                now,
                lock_id,
                need_lock=False,
                data=compact(rest),
                status=None if status is None else compact(status),
                history=None if history is None else compact(list(history)[-HISTORY_KEEP:]),
            )
            conn.execute(delete(r).where(r.c.source == name))
            if inventory:
                conn.execute(insert(r), [source_run_row(name, run, e) for run, e in inventory.items()])
        return rv

    def put_source_run(
        self, name: str, run: str, entry: dict[str, Any], lock_id: str | None, now: float
    ) -> int:
        """Set one run's inventory entry (``{"spec", "applied_at", "file"?}``) under the lock ``lock_id``."""
        r = SOURCE_RUNS
        values = source_run_row(name, run, entry)
        with self.engine.begin() as conn:
            rv = self._write_source(conn, name, now, lock_id, need_lock=True)
            done = conn.execute(
                update(r)
                .where(r.c.source == name, r.c.run == run)
                .values({k: values[k] for k in ("spec", "applied_at", "file", "digest")})
            ).rowcount
            if not done:
                conn.execute(insert(r).values(**values))
        return rv

    def delete_source_run(self, name: str, run: str, lock_id: str | None, now: float) -> int:
        """Remove one run from the inventory under the lock ``lock_id``; ``NotFound`` when it is not there."""
        r = SOURCE_RUNS
        with self.engine.begin() as conn:
            rv = self._write_source(conn, name, now, lock_id, need_lock=True)
            if not conn.execute(delete(r).where(r.c.source == name, r.c.run == run)).rowcount:
                raise NotFound(f"source {source_name(name)} has no run {run} in its inventory")
        return rv

    def put_source_status(self, name: str, status: dict[str, Any], lock_id: str | None, now: float) -> int:
        """Replace the source's status, keeping its suspension (``keep_suspension``); when
        ``lock_id`` is given, only under that lock."""
        with self.engine.begin() as conn:
            row = self._source_row(conn, name)
            held = json.loads(row["status"]) if row is not None and row["status"] else {}
            kept = keep_suspension(held, status)
            return self._write_source(conn, name, now, lock_id, need_lock=False, status=compact(kept))

    def set_source_suspended(self, name: str, suspension: dict[str, Any] | None, now: float) -> int:
        """Suspend the source (``suspension``: ``Suspension.to_json()``) or, with ``None``, resume
        it: the one write of its status's ``SUSPENDED`` key. No lock is needed (a pass holding it
        reads the suspension before its next pass)."""
        with self.engine.begin() as conn:
            row = self._source_row(conn, name)
            held = json.loads(row["status"]) if row is not None and row["status"] else {}
            status = {k: v for k, v in held.items() if k != SUSPENDED}
            if suspension is not None:
                status[SUSPENDED] = suspension
            return self._write_source(conn, name, now, None, need_lock=False, status=compact(status))

    def source_status(self, name: str) -> dict[str, Any]:
        """The source's status as kept (``{}``: none, or no such source)."""
        with self.engine.connect() as conn:
            held = conn.execute(select(SOURCES.c.status).where(SOURCES.c.name == name)).scalar()
        return json.loads(held) if held else {}

    def source_suspension(self, name: str) -> dict[str, Any] | None:
        """The source's suspension as kept (``None``: not suspended, or no such source)."""
        with self.engine.connect() as conn:
            held = conn.execute(select(SOURCES.c.status).where(SOURCES.c.name == name)).scalar()
        value = json.loads(held).get(SUSPENDED) if held else None
        return value if isinstance(value, dict) else None

    def add_source_history(self, name: str, entry: dict[str, Any], lock_id: str | None, now: float) -> int:
        """Append one apply record under the lock ``lock_id``; the newest ``HISTORY_KEEP`` are kept."""
        with self.engine.begin() as conn:
            row = self._source_row(conn, name)
            history = json.loads(row["history"]) if row is not None and row["history"] else []
            history = [*history, entry][-HISTORY_KEEP:]
            return self._write_source(conn, name, now, lock_id, need_lock=True, history=compact(history))

    def lock_source(self, name: str, lock: dict[str, Any], now: float) -> tuple[bool, dict[str, Any], str]:
        """Take a source's lock: ``(True, lock, tag)``, or ``(False, the holder's lock, tag)`` when held."""
        with self.engine.begin() as conn:
            row = self._source_row(conn, name)
            if row is not None and row["lock"]:
                return False, json.loads(row["lock"]), _tag(row["resource_version"], row["lock"])
            text = json.dumps(lock, sort_keys=True)
            if row is None:
                conn.execute(
                    insert(SOURCES).values(
                        name=name, data="{}", resource_version=0, lock=text, updated_at=now
                    )
                )
            else:
                conn.execute(update(SOURCES).where(SOURCES.c.name == name).values(lock=text))
        return True, lock, _tag(row["resource_version"] if row else 0, text)

    def unlock_source(self, name: str, lock_id: str | None) -> tuple[str, dict[str, Any] | None, str | None]:
        """Release a lock: ``("released"|"none"|"other", the lock released or held, the tag after)``."""
        with self.engine.begin() as conn:
            row = self._source_row(conn, name)
            if row is None or not row["lock"]:
                return "none", None, None if row is None else _tag(row["resource_version"], None)
            held = json.loads(row["lock"])
            if lock_id is not None and held.get("id") != lock_id:
                return "other", held, _tag(row["resource_version"], row["lock"])
            conn.execute(update(SOURCES).where(SOURCES.c.name == name).values(lock=None))
        return "released", held, _tag(row["resource_version"], None)

    def delete_source(self, name: str, keep_runs: bool, now: float) -> tuple[str, Any]:
        """Empty a source (see the module docstring): ``("deleted", None)``, or why not:
        ``("none", None)`` (it holds nothing), ``("locked", the lock)``, ``("runs", [RUN, …])``
        (it owns runs and ``keep_runs`` is false)."""
        r = SOURCE_RUNS
        with self.engine.begin() as conn:
            row = self._source_row(conn, name)
            if row is None or _empty(row, self._inventory_text(conn, name, specs=False)):
                return "none", None
            if row["lock"]:
                return "locked", json.loads(row["lock"])
            runs = [x[0] for x in conn.execute(select(r.c.run).where(r.c.source == name).order_by(r.c.run))]
            if runs and not keep_runs:
                return "runs", runs
            conn.execute(delete(r).where(r.c.source == name))
            conn.execute(
                update(SOURCES)
                .where(SOURCES.c.name == name)
                .values(
                    data="{}",
                    status=None,
                    history=None,
                    resource_version=row["resource_version"] + 1,
                    updated_at=now,
                )
            )
        return "deleted", None


def _empty(row: Mapping[Any, Any], inventory: str) -> bool:
    """Whether a source's row (with its inventory's text) holds nothing: never written, or deleted."""
    return (
        inventory == "{}"
        and not row["lock"]
        and (row["status"] or "{}") == "{}"
        and (row["history"] or "[]") == "[]"
        and (row["data"] or "{}").strip() in ("{}", "")
    )


_str = json.encoder.encode_basestring_ascii  # type: ignore[attr-defined]


def _num(x: float) -> str:
    """A number as JSON text (what ``json.dumps`` writes: a finite float's ``repr``)."""
    return repr(x) if math.isfinite(x) else json.dumps(x)


def _str_or_null(x: str | None) -> str:
    return "null" if x is None else _str(x)


def compact(data: Any) -> str:
    """``data`` as compact JSON text, as ``json.loads`` reads it back (``wire.text``: orjson's)."""
    return text.compact(data).decode()


def _tag(resource_version: int, lock: str | None) -> str:
    """A source's entity tag: its resource_version and its lock's id (the lock is no write of the state)."""
    lock_id = json.loads(lock).get("id", "") if lock else ""
    return f'"{resource_version}-{lock_id}"'


def source_run_row(
    source: str, run: str, entry: Mapping[str, Any], digest: str | None = None
) -> dict[str, Any]:
    """An inventory entry's row, with ``entry_digest`` of its spec: ``digest`` when the server
    made it already (a batch, of the document it created), else made here."""
    return {
        "source": source,
        "run": run,
        "spec": compact(entry["spec"]),
        "applied_at": float(entry.get("applied_at") or 0.0),
        "file": entry.get("file"),
        "digest": digest or entry_digest(entry["spec"]),
    }


def entry_digest(spec: Any) -> str | None:
    """``spec_digest(spec)`` (``digest(normalize(spec))``) of an inventory entry's spec (the
    last-applied run document): what the client computes of a desired document and the server of
    a live one. ``None`` when normalize fails on the spec (not of a run document's shape), or it
    has no digest."""
    try:
        return spec_digest(spec)
    except (AttributeError, TypeError, ValueError):
        return None


def _source_text(row: Mapping[Any, Any], inventory: str) -> str:
    """A SOURCE as JSON text from its row's stored texts and its inventory's (no spec parsed again)."""
    head = (
        f'{{"name":{_str(source_name(row["name"]))},"resource_version":{row["resource_version"]},'
        f'"lock":{row["lock"] or "null"},"status":{row["status"] or "{}"},"history":{row["history"] or "[]"},'
        f'"inventory":{inventory}'
    )
    data = (row["data"] or "{}").strip()
    return head + ("," + data[1:-1] if data not in ("{}", "") else "") + "}"
