"""The review between ``astra apply``'s plan and its apply: the plan shown as ``astra plan``
shows it, the runs no machine of the cluster could hold refused (and, ``--strict``, the
warnings), and the user asked (``--yes`` answers; a plan that changes nothing is not asked).

Must not touch: the plan itself (``reconcile``), the apply (``apply``), the source's lock.
"""

from __future__ import annotations

import sys
from typing import Any

from .output import echo, error
from .planning import impossible_asks, plan_warnings, shown_plan, with_outlook

__all__ = ["reviewed"]


def reviewed(made: Any, cluster: Any, options: Any) -> bool:
    """Show the plan and say whether it may go on: nothing the cluster could never run, no
    warning with ``--strict``, and (not a dry run) the user's yes."""
    from ..plan import plan_to_json

    seen = with_outlook(made, cluster)
    sys.stdout.write(shown_plan(plan_to_json(seen), verbose=options.verbose))
    impossible = impossible_asks(seen, cluster)
    if impossible:
        for line in impossible:
            error(line)
        error("not applied: this cluster could never run these runs")
        return False
    warned = plan_warnings(made)
    for line in warned:
        echo(line, err=True)
    if options.strict and warned:
        error("not applied: there are warnings, and --strict makes them errors")
        return False
    return options.dry_run or not made.has_changes or options.yes or _confirm(made.source, made.cluster)


def _confirm(source: str, cluster: str) -> bool:
    """Whether the user types 'yes' (said why not, when not)."""
    from .confirming import confirmed

    return confirmed(
        f"Apply these changes to source {source} on {cluster}?",
        no_terminal="no terminal to ask on: give --yes to apply without asking",
        declined="not applied: the answer was not 'yes'",
    )
