"""Retry rules by exit code (``task_template.on_exit_codes``): which rule decides a failed worker.

Owns: ``exit_rule(template, code)``: the first rule that names ``code`` (its index and action),
or ``None`` (``restart_policy`` and ``on_failure`` decide as the seeds say). ``restarts``'
``settle`` asks it for a worker that exited with a code (a lost worker has none): ``FailJob``
fails the run at once, ``RestartIgnoreBudget`` restarts without spending the budget (past the
seeds' 10), ``Restart`` restarts as ``OnFailure`` does (even under ``Never``). The words
(``runspec.lifecycle.exit_rule_words``) say which rule decided, in the worker's reason.

Must not touch: the records, decisions (``restarts`` emits them), clocks, I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from reconciler.runspec.lifecycle import budget_kept, exit_rule_words
from reconciler.runspec.models import TaskTemplate

__all__ = ["ExitRule", "budget_kept", "exit_rule"]


@dataclass(frozen=True, slots=True)
class ExitRule:
    """The rule that decided: its index in ``on_exit_codes``, its action, and the words."""

    at: int
    action: str
    words: str


def exit_rule(template: TaskTemplate, code: int | None) -> ExitRule | None:
    """The first of ``template.on_exit_codes`` naming ``code``; ``None`` when none does."""
    if code is None or not template.on_exit_codes:
        return None
    for at, rule in enumerate(template.on_exit_codes):
        if code in rule.codes:
            return ExitRule(at, rule.action, exit_rule_words(code, at, rule.action))
    return None
