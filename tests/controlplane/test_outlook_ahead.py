"""A dry run (``scheduler.outlook``) while the scheduler still has runs to admit ahead of the
ones asked about: it admits them in its copy as the scheduler would, but at most ``ahead`` of
their workers; past that, the runs asked about wait in the queue and say why."""

from __future__ import annotations

from reconciler.controlplane.inventory import load_inventory
from reconciler.controlplane.scheduler import ClusterState
from reconciler.controlplane.scheduler.outlook import AHEAD_WORDS, Outlook, outlook
from reconciler.runspec.models import Run

from .helpers import doc

INVENTORY = load_inventory(
    [
        {"name": f"m-{i}", "gpus": 8, "gpu_model": "A100", "cpu_cores": 64, "memory_bytes": 512 * 2**30}
        for i in range(2)
    ]
)
ASKED = [("default/default/late", Run.model_validate(doc("late", 1)))]


def _with_a_big_array_to_admit() -> ClusterState:
    """A state whose array of 30 one-GPU copies was submitted and not admitted yet (a step
    admits a slice at a time)."""
    s = ClusterState(INVENTORY, {}, {})
    s.submit(Run.model_validate(doc("big", 1, array={"size": 30})), 0.0, "default/default/big")
    return s


def test_a_dry_run_that_admits_every_run_ahead_answers_as_one_without_a_bound():
    s = _with_a_big_array_to_admit()
    bounded = outlook(s, ASKED, 1.0, ahead=100)
    assert bounded == outlook(s, ASKED, 1.0, ahead=10**9)
    assert bounded == [Outlook("wait", "Waiting behind run big, queued ahead of it")]  # it holds all 16 GPUs


def test_past_the_bound_the_run_asked_about_waits_for_the_runs_ahead_and_the_state_is_untouched():
    s = _with_a_big_array_to_admit()
    assert outlook(s, ASKED, 1.0, ahead=10) == [Outlook("wait", f"Waiting in the queue ({AHEAD_WORDS})")]
    assert not s.runs["default/default/big"].admitted and s.workers == {}
