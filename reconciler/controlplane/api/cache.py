"""``ResponseCache``: the run listings' texts, kept while what they show holds.

Owns the texts of ``GET /runs`` (with ``?view=summary``, ``?view=brief`` or without), of the
last run's ``GET /runs/{run}/workers`` asked, and each run's spec digest.
A plan of 10,000 unchanged runs lists every summary at each run of ``astra plan``: made again
each time, that is 10,000 digests of normalised documents and 10,000 encodings; kept, it is one
text sent again. A whole listing encodes each run's document (its metadata and spec, about 1 kB)
once per resource_version, and only its status at each listing.

One cache is kept for each scope (a workspace's view of a cluster: ``scopes.Scope``): it lists
that scope's runs (``Engine.runs_of``), by their plain names.

Reads run at once (they hold the engines' gate shared: ``api.gate``), each in a thread of its
own: a cache's parts are made and kept under its own lock (``_lock``), so that two reads never
make its dicts change under each other.

Must not touch: the engine's state (it only reads it), HTTP, the store.
"""

from __future__ import annotations

import functools
import json
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

import orjson

from ...runspec.normalize import spec_digest
from ...wire import models as wire
from ..scopes import DEFAULT_SCOPE, Scope, shown
from .views import brief_moving, run_brief, run_metadata, run_status, workers_text

if TYPE_CHECKING:
    from ..engine import Engine

__all__ = ["ResponseCache"]

F = TypeVar("F", bound=Callable[..., Any])


def _locked(method: F) -> F:
    """``method`` run holding its cache's lock (re-entrant: a locked method calls another)."""

    @functools.wraps(method)
    def held(self: ResponseCache, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)

    return cast(F, held)


#: A ``wire.Run``'s fields, in order: a run's text is put together from theirs.
RUN_FIELDS = tuple(wire.Run.model_fields)


@dataclass(slots=True)
class _Held:
    """One run's parts, for the ``resource_version`` they were made at."""

    resource_version: int
    digested: bool = False
    digest: str | None = None
    #: the run's state the summary text shows, and the text
    state: str | None = None
    summary: str = ""
    #: the JSON texts of its metadata (a ``wire.RunMetadata``) and of its spec
    metadata: str = ""
    spec: str = ""
    #: the values its brief's text shows that move without a resource_version, and the text
    moving: tuple[Any, ...] | None = None
    brief: bytes = b""


class ResponseCache:
    """The parts of the run listings, each kept for as long as what it shows holds.

    The engine's ``generation`` moves with every change to any run (created, updated, deleted,
    its state moved): the whole summary listing is kept for one generation, and sent again as
    the same text while no run changed. Below it, each run's parts are kept for what they show,
    so that the listing made after one run changed encodes that run, not every run:

    ================  ==========================  ============================================
    part              kept for                    made from
    ================  ==========================  ============================================
    the listing       ``engine.generation``       every run's summary, in submission order
    the brief         ``engine.generation``       every run's brief, in submission order (not
    listing                                       kept when a run on a schedule is listed: its
                                                  next time moves with the clock)
    a run's workers   ``engine.generation``, for  ``views.workers_text`` (the last run asked)
                      the last run asked
    a run's summary   its (resource_version,      ``wire.RunSummary``
                      state)
    a run's digest    its resource_version        ``spec_digest`` of its stored document
    a run's document  its resource_version        ``wire.RunMetadata``, and its spec as JSON
    a run's brief     its resource_version and    ``views.run_brief``
                      what it shows that moves
    ================  ==========================  ============================================

    A whole run's text (``run_text``, the listing's items) is its document's texts and its
    status (``views.run_status``), made at each listing: a status moves without a generation
    of its own. It is ``views.run_view`` put together faster, and equal to it (a test holds
    the two equal).

    A server whose runs move at every tick makes the listings again at each ask, as before: a
    listing kept is what an idle or a waiting cluster, asked again and again, answers at once.

    A run's document changes only with its resource_version (which only grows, also across a
    delete and a new run of the same name), so a part kept for a resource_version is never
    stale. Runs deleted since are forgotten when a listing is made.
    """

    def __init__(self, engine: Engine, scope: Scope = DEFAULT_SCOPE) -> None:
        self.engine, self.scope = engine, scope
        self._runs: dict[str, _Held] = {}
        self._listing: tuple[int, str] | None = None
        #: (generation, text) of the brief listing of every run; (generation, run, text) of a
        #: run's workers
        self._brief_listing: tuple[int, bytes] | None = None
        self._workers: tuple[int, str, bytes] | None = None
        #: this cache's own part of the summary listing's tags: a server started again (its
        #: generations from 0 again) or another scope never answers a tag it did not give
        self._nonce = secrets.token_hex(8)
        self._lock = threading.RLock()

    def __len__(self) -> int:
        """How many runs' parts are kept."""
        return len(self._runs)

    def _held(self, name: str) -> _Held:
        rv = self.engine.meta[name].resource_version
        held = self._runs.get(name)
        if held is None or held.resource_version != rv:
            held = self._runs[name] = _Held(rv)
        return held

    @_locked
    def digest(self, name: str) -> str | None:
        """The digest of the run's stored document (``spec_digest`` of its metadata and spec)."""
        held = self._held(name)
        if not held.digested:
            doc = self.engine.meta[name].document
            held.digest = spec_digest({"metadata": doc["metadata"], "spec": doc["spec"]})
            held.digested = True
        return held.digest

    @_locked
    def digested(self, name: str, digest: str | None) -> None:
        """Keep ``digest`` as the run's, made by its writer from the document it stored
        (``spec_digest`` of it: ``normalize`` keeps only what the stored document has)."""
        held = self._held(name)
        held.digest, held.digested = digest, True

    @_locked
    def summary_text(self, name: str) -> str:
        """The run's ``wire.RunSummary`` as JSON text."""
        held = self._held(name)
        state = self.engine.state.runs[name].state
        if held.state != state:
            summary = wire.RunSummary(
                name=shown(name),
                resource_version=held.resource_version,
                state=state,
                spec_digest=self.digest(name),
            )
            held.state, held.summary = str(state), summary.model_dump_json()
        return held.summary

    def summaries(self) -> str:
        """``GET /runs?view=summary``'s answer (a ``wire.RunSummaryList``) as JSON text."""
        return self.tagged_summaries()[0]

    @_locked
    def tagged_summaries(self) -> tuple[str, str]:
        """``summaries()`` and its ETag, ``summary_tag()`` of the generation it shows."""
        generation = self.engine.generation  # read first: a change while the text is made makes it stale
        if self._listing is not None and self._listing[0] == generation:
            return self._listing[1], self._tag(generation)
        order = self.engine.runs_of(self.scope)
        text = '{"items":[' + ",".join(self.summary_text(name) for name in order) + "]}"
        self._forget_gone()
        self._listing = (generation, text)
        return text, self._tag(generation)

    def summary_tag(self) -> str:
        """The summary listing's ETag now: the engine's generation (which moves with every change
        to any run) and this cache's nonce, so that a tag is never given again for another
        listing, not even by a server started again."""
        return self._tag(self.engine.generation)

    def _tag(self, generation: int) -> str:
        return f'"{self._nonce}-{generation}"'

    def _forget_gone(self) -> None:
        """Forget runs deleted since (after a listing, which holds every run that is)."""
        runs = self.engine.by_scope.get(self.scope, {})
        if len(self._runs) > len(runs):
            for name in [n for n in self._runs if n not in runs]:
                del self._runs[name]

    @_locked
    def briefs(self, keys: list[str] | None = None) -> bytes:
        """``GET /runs?view=brief``'s answer (a ``wire.briefs.RunBriefList``) as JSON: of every
        run (kept for the generation, see the class docstring), or of ``keys``."""
        generation = self.engine.generation  # read first: a change while the text is made makes it stale
        kept = self._brief_listing
        if keys is None and kept is not None and kept[0] == generation:
            return kept[1]
        order = self.engine.runs_of(self.scope) if keys is None else keys
        texts = [self._brief_text(name) for name in order]
        text = b'{"items":[' + b",".join(texts) + b"]}"
        if keys is None:
            self._forget_gone()
            steady = all(self._runs[name].moving is not None for name in order)
            self._brief_listing = (generation, text) if steady else None
        return text

    @_locked
    def workers(self, name: str) -> bytes:
        """``GET /runs/{run}/workers``'s answer (``views.workers_text``), kept for the generation
        for the last run asked: ``astra get workers RUN`` asked again of an array of 10,000
        copies is one text sent again."""
        generation = self.engine.generation
        kept = self._workers
        if kept is not None and kept[0] == generation and kept[1] == name:
            return kept[2]
        text = workers_text(self.engine, name)
        self._workers = (generation, name, text)
        return text

    def _brief_text(self, name: str) -> bytes:
        """The run's brief (``views.run_brief``) as JSON text, made again only when what it shows
        may have moved (``views.brief_moving``: its state, reason, workers by state, GPUs held; a
        schedule's next time: each listing). Its other values move with its resource_version."""
        held = self._held(name)
        moving = brief_moving(self.engine, name)
        if moving is None or held.moving != moving:
            held.moving, held.brief = moving, orjson.dumps(run_brief(self.engine, name))
        return held.brief

    @_locked
    def run_text(self, name: str, runs_url: str, workspace: str) -> str:
        """The run's ``wire.Run`` as JSON text (``views.run_view``'s twin)."""
        held = self._held(name)
        if not held.metadata:
            held.metadata = run_metadata(self.engine, name).model_dump_json(exclude_unset=True)
            held.spec = _compact(self.engine.meta[name].document["spec"])
        status, counts = run_status(self.engine, name, runs_url, workspace)
        parts = {
            "metadata": held.metadata,
            "spec": held.spec,
            "status": status.model_dump_json(),
            "task_counts": _compact(counts),
        }
        return "{" + ",".join(f'"{k}":{parts[k]}' for k in RUN_FIELDS) + "}"

    @_locked
    def runs(self, runs_url: str, workspace: str, keys: list[str] | None = None) -> str:
        """``GET /runs``'s answer (a ``wire.RunList``) as JSON text: of every run, or of ``keys``."""
        order = self.engine.runs_of(self.scope) if keys is None else keys
        text = '{"items":[' + ",".join(self.run_text(name, runs_url, workspace) for name in order) + "]}"
        if keys is None:
            self._forget_gone()
        return text


def _compact(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"))
