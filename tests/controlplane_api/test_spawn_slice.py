"""A step starts its released workers a slice at a time, and a slice ends when its time is up.

The step that starts processes holds the engines' gate, so every request waits for it: a slice
also ends after ``executor.SPAWN_SECONDS`` (the first start always happens), and the next steps
start the rest. With no time at all, each step starts exactly one.
"""

from __future__ import annotations

from typing import Any

from reconciler.controlplane import executor as executor_module


def _array(size: int) -> dict[str, Any]:
    return {
        "metadata": {"name": "sweep"},
        "spec": {
            "array": {"size": size},
            "task_template": {
                "image": "busybox",
                "command": "sleep",
                "args": ["60"],
                "time_limit_seconds": 600,
                "requested_resources": {"cpu_cores": 1},
            },
        },
    }


def test_a_slice_of_starts_ends_when_its_time_is_up(plane, monkeypatch):
    monkeypatch.setattr(executor_module, "SPAWN_SECONDS", 0.0)
    plane.engine.submit(_array(3), plane.clock.now())
    started = []
    for _ in range(3):
        plane.step()
        started.append(len(plane.executor.running))
    assert started == [1, 2, 3]
    assert not plane.executor.queued
