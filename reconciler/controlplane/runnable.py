"""What this control plane's executor cannot run, said before a run is submitted.

Owns ``unrunnable(executor, run)``: the first worker template the executor could never start,
as ``(field path, words)``. The local executor runs each worker as a process of this host: a
template that names no command (only an image, whose entrypoint it cannot read) would be
created only to crash-loop on every GPU it asks for. The words are the executor's own
(``executor.NO_COMMAND``), so the plan (``POST /runs:placement``'s ``fail`` outlook), apply and
the console's New → Run say what the worker would have said.

Must not touch: the executor (it reads which one it is), the scheduler, HTTP.
"""

from __future__ import annotations

from typing import Any

from ..runspec.models import Run
from .executor import NO_COMMAND, ProcessExecutor

__all__ = ["unrunnable"]


def unrunnable(executor: Any, run: Run) -> tuple[str, str] | None:
    """``(path, words)`` of the first template of ``run`` that ``executor`` could never start."""
    if not isinstance(executor, ProcessExecutor):
        return None
    spec = run.spec
    if spec.task_groups:
        for i, g in enumerate(spec.task_groups):
            if not g.task_template.command:
                return f"spec.task_groups[{i}].task_template.command", NO_COMMAND
        return None
    if spec.task_template is not None and not spec.task_template.command:
        return "spec.task_template.command", NO_COMMAND
    return None
