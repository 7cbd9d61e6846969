"""What ``astra.yaml`` declares for a source beside its runs, planned and applied: its secrets
(committed encrypted with age) and its alerts.

Owns ``Declared`` (the source's name and prune, its ``SourceSecrets``, its alerts' rules) and
``Planned`` (the secrets' values, held in memory only, and the plan's ``resources``). The moves
the reconcile loop, ``astra plan`` and ``astra apply`` make with them:

* ``plan(cluster, folder)``: every declared secret decrypted (an ``AgeSecretError`` naming the
  file: the caller applies nothing), what setting each would do asked of the cluster (``POST
  /secrets:plan``: the server compares, so the plan says ``~ secret NAME (changed)`` with no
  hash of a value), and the alerts compared with the workspace's (``GET /alerts``): the plan's
  ``resources`` (``plan.resources``);
* ``apply(cluster, planned)``: the secrets that changed set (``PUT /secrets/{name}``), then the
  alerts created or updated (``PUT /alerts/{name}``) and, with prune, deleted: before the runs
  are applied, so a run that reads a new secret does not wait for it.

A cluster that keeps no secrets or alerts (not an Astraeus API) is an ``AgeSecretError`` in
words when the source declares any (a ``SourceError``: the pass is LoadFailed).

Must not touch: the runs' plan and apply (the loop's), values in any words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..git.agesecrets import AgeSecretError
from ..plan import Resource
from ..plan.resources import alert_changes, secret_changes
from .secrets import SourceSecrets

__all__ = ["NO_ALERTS_API", "NO_SECRETS_API", "Declared", "Planned", "alert_rule", "declared_of", "said"]

NO_SECRETS_API = (
    "this source declares secrets, and its cluster keeps none: secrets need an Astraeus API (http…)"
)
NO_ALERTS_API = "this source declares alerts, and its cluster keeps none: alerts need an Astraeus API (http…)"


def alert_rule(declared: Mapping[str, Any], source: str) -> dict[str, Any]:
    """An alert of astra.yaml (its model dumped, ``from`` by its alias) as the workspace's rule
    is written and answered: every field, defaults filled, ``declared_by`` the source."""
    sink = {k: v for k, v in dict(declared["sink"]).items() if v is not None}
    return {
        "sink": sink,
        "events": list(declared.get("events") or ()),
        "sources": list(declared.get("sources") or ()),
        "labels": dict(declared.get("labels") or {}),
        "severity": str(declared.get("severity") or "info"),
        "restarts": int(declared.get("restarts") or 3),
        "waited": int(declared.get("waited") or 1800),
        "declared_by": source,
    }


def declared_of(decl: Any, identity: str | None) -> Declared:
    """The ``Declared`` of one source of astra.yaml (its ``SourceDecl``), its secrets opened with
    the age ``identity`` file (``--age-identity``): ``astra plan|apply -c`` and the watch's."""
    secrets = SourceSecrets([(x.name, x.file) for x in decl.secrets], identity) if decl.secrets else None
    alerts = {
        a.name: alert_rule(a.model_dump(by_alias=True, exclude={"name"}), decl.name)
        for a in decl.alerts or ()
    }
    return Declared(decl.name, decl.prune, secrets, alerts, decl.alerts is not None)


@dataclass(frozen=True)
class Planned:
    """A plan of the declared resources: the secrets' values (never shown, never saved) and the
    changes, with the alerts kept for want of prune."""

    values: dict[str, bytes] = field(default_factory=dict, repr=False)
    resources: tuple[Resource, ...] = ()
    not_pruned: tuple[str, ...] = ()
    #: the values are age files still, for the server to open (``SourceSecrets.read``)
    sealed: bool = False


@dataclass(frozen=True)
class Declared:
    """What astra.yaml declares for one source beside its runs (see the module docstring)."""

    source: str
    prune: bool = False
    secrets: SourceSecrets | None = None
    #: each alert by name: its rule as ``alert_rule`` makes it
    alerts: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    #: whether the source declares an ``alerts:`` list (even empty: its old alerts are pruned)
    manages_alerts: bool = False

    @property
    def empty(self) -> bool:
        return self.secrets is None and not self.manages_alerts

    def plan(self, cluster: Any, folder: str) -> Planned:
        values: dict[str, bytes] = {}
        changes: list[Resource] = []
        sealed = False
        if self.secrets is not None:
            values, sealed = self.secrets.read(folder)
            ask = getattr(cluster, "plan_secrets", None)
            if ask is None:
                raise AgeSecretError(NO_SECRETS_API)
            changes += secret_changes(self._asked(ask, values, sealed))
        kept: list[str] = []
        if self.manages_alerts:
            listed = getattr(cluster, "alert_rules", None)
            if listed is None:
                raise AgeSecretError(NO_ALERTS_API)
            made, kept = alert_changes(self.alerts, listed(), self.source, prune=self.prune)
            changes += made
        return Planned(values, tuple(changes), tuple(kept), sealed)

    def _asked(self, ask: Any, values: dict[str, bytes], sealed: bool) -> Any:
        """The server's comparison; sealed values it cannot open are an ``AgeSecretError``
        naming the file (its words name the secret and why)."""
        if not sealed:
            return ask(values)
        from ..clusters.base import Rejected

        try:
            return ask(values, sealed=True)
        except Rejected as exc:
            assert self.secrets is not None
            files = ", ".join(self.secrets.file_of(n) for n in sorted(values))
            words = "; ".join(str(e.get("message")) for e in exc.errors if e.get("message")) or str(exc)
            raise AgeSecretError(f"{files} sealed with age, and the server said: {words}") from exc

    def apply(
        self, cluster: Any, resources: Sequence[Resource], values: Mapping[str, bytes], sealed: bool = False
    ) -> None:
        """Carry out ``resources`` (a plan's): secrets first (their values from ``values``, still
        sealed for the server to open when ``sealed``), then alerts, each in name order."""
        for r in sorted(resources, key=lambda r: (r.kind != "secret", r.name)):
            if r.kind == "secret" and sealed:
                cluster.set_secret(r.name, values[r.name], sealed=True)
            elif r.kind == "secret":
                cluster.set_secret(r.name, values[r.name])
            elif r.action == "delete":
                cluster.delete_alert(r.name)
            else:
                assert r.after is not None
                cluster.put_alert(r.name, r.after)


def said(resources: Sequence[Resource]) -> list[str]:
    """The heads of the plan's lines for ``resources`` (``+ secret hf-token``, ``~ alert x``), as
    a source's status says them after an apply."""
    from ..plan.resources import resource_lines

    return resource_lines([_head(r) for r in resources])


def _head(r: Resource) -> dict[str, Any]:
    return {"kind": r.kind, "name": r.name, "action": r.action, "fields": [], "reason": r.reason}
