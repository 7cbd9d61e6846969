"""Where runs would start on Slurm now: ``sbatch --test-only`` of each run's script (submits nothing).

Owns ``placement_of``: for at most ``TEST_ONLY_MAX`` runs, the submission ``create_run`` would
make (``SlurmCluster.submission_for``). A run it cannot carry is ``fail`` with every field's
path and words, as the apply would refuse it (``spec.task_template.datavolume_refs[0].name:
drive 'results' is not known to this Slurm cluster: …``). A run of one job is given to ``sbatch
--test-only``, whose answer (``Job N to start at TIME using P processors on nodes NODES in
partition P``) is put in words: ``start`` (``on nodes vm-n1 in partition debug``) when Slurm
would start it now, else ``wait`` (``Slurm expects it to start at 2026-12-01T05:10:00``), or
``fail`` with Slurm's refusal (``Slurm: Requested node configuration is not available``). A run
naming a secret not set would be held (``held``): ``wait`` with the words it would wait with
(``Secret 'hf-token' does not exist on slurm://debug: astra secret set hf-token --server
slurm://debug``), Slurm not asked. A run of worker groups (several jobs), or an answer of
another form, is left out; any ``ClusterError`` (Slurm not reached) leaves them all out: the dry
run never fails a plan (said at debug level).

Must not touch: the records, the log folders (the submission is made without ``_submission``'s
folder), the jobs.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from typing import TYPE_CHECKING, Any

from reconciler.runspec.errors import InvalidSpec
from reconciler.runspec.parse import parse_run

from ..base import ClusterError
from .held import missing_secrets
from .secrets import missing_secret
from .submit import new_nonce

if TYPE_CHECKING:
    from .cluster import SlurmCluster

__all__ = ["TEST_ONLY_MAX", "placement_of", "read_test_only"]

log = logging.getLogger(__name__)

#: The most runs one plan asks ``sbatch --test-only`` about (one call each: kept cheap).
TEST_ONLY_MAX = 8
#: Within this many seconds of now, Slurm's expected start is "now".
_NOW_SLACK = 5.0
_ANSWER = re.compile(r"to start at (\S+) using \d+ processors on nodes (\S+) in partition (\S+)")
_REFUSED = re.compile(r"(?:Batch job submission failed|allocation failure): (.+)")


def read_test_only(out: str, now: float) -> dict[str, str] | None:
    """``sbatch --test-only``'s answer as an outlook (``now``: epoch seconds), or ``None``."""
    m = _ANSWER.search(out)
    if m is None:
        refused = _REFUSED.search(out)
        return None if refused is None else {"kind": "fail", "words": f"Slurm: {refused.group(1).strip()}"}
    at, nodes, partition = m.groups()
    try:
        start = dt.datetime.fromisoformat(at).timestamp()  # Slurm says the controller's local time
    except ValueError:
        return None
    if start <= now + _NOW_SLACK:
        return {"kind": "start", "words": f"on nodes {nodes} in partition {partition}"}
    return {"kind": "wait", "words": f"Slurm expects it to start at {at}, on nodes {nodes}"}


def placement_of(
    cluster: SlurmCluster, documents: list[dict[str, Any]], now: float
) -> dict[str, dict[str, str]] | None:
    """Each run's outlook by name, for those Slurm answered (see the module docstring); ``now``:
    the cluster's clock."""
    out: dict[str, dict[str, str]] = {}
    try:
        for doc in documents[:TEST_ONLY_MAX]:
            try:
                run = parse_run(doc)
            except InvalidSpec:
                continue
            sub = cluster.submission_for(run, new_nonce())
            if sub.errors:
                words = "; ".join(e.format() for e in sub.errors)
                out[run.metadata.name] = {"kind": "fail", "words": words}
                continue
            if sub.jobs or not sub.script:
                continue
            unset = missing_secrets(run, cluster.secrets.names())
            if unset:
                out[run.metadata.name] = {"kind": "wait", "words": missing_secret(unset[0], cluster.address)}
                continue
            said = cluster.commands.run(["sbatch", "--test-only"], input=sub.script, check=False)
            found = read_test_only(said, now)
            if found is not None:
                out[run.metadata.name] = found
    except ClusterError as exc:
        log.debug("no placement from %s: %s", cluster.address, exc)
        return None
    return out
