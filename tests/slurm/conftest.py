"""What the Slurm tests that drive the local cluster through astra's commands share.

``slurm_state``: the local Slurm cluster checked up (failing in words if it is not), astra's
Slurm state folder (``ASTRA_SLURM_STATE``) and home (``ASTRA_HOME``) under the test's
``tmp_path``, and the test run from ``tmp_path`` so that nothing is written into the checkout.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .test_integration import UP_HINT, _cluster_up


@pytest.fixture
def slurm_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The state folder of a test's own Slurm cluster (module docstring)."""
    problem = _cluster_up()
    if problem is not None:
        pytest.fail(f"The local Slurm cluster is not up: {problem}; {UP_HINT}", pytrace=False)
    state = tmp_path / "state"
    monkeypatch.setenv("ASTRA_SLURM_STATE", str(state))
    monkeypatch.setenv("ASTRA_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    return state
