"""The console's Usage page (issue 35): GPU-hours per workspace this month, an inline SVG bar each."""

from __future__ import annotations

import re

from .conftest import RUNS


def test_the_usage_page_draws_a_bar_per_workspace_with_its_gpu_hours(console, plane):
    console.login()
    spec = {
        "metadata": {"name": "hold"},
        "spec": {
            "task_template": {
                "image": "busybox",
                "command": "sleep",
                "args": ["600"],
                "requested_resources": {"gpu_requests": {"count": 2}},
            }
        },
    }
    assert console.api("POST", "/runs", json=spec).status_code == 201
    plane.step()
    plane.clock.advance(1800)  # the hold is open: it counts up to now, 2 GPUs × 1800 s
    page = console.http.get("/o/default/w/default/usage")
    assert page.status_code == 200, page.text
    assert 'href="/o/default/w/default/usage"' in page.text
    assert re.search(r'<svg class="usage-chart"[^>]*role="img"', page.text)
    assert re.search(
        r'<g class="bar" data-workspace="default">\s*'
        r"<title>default: 1.0 GPU-hours, 0.0 wasted, 1 runs</title>",
        page.text,
    )
    assert "<script" not in page.text.split("<main")[-1] and "cdn" not in page.text.lower()
    assert console.http.get(RUNS).status_code == 200
