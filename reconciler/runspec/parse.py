"""From a validated document to a ``Run`` model: the one way the other layers get a spec.

``parse_run`` validates with ``validate_data`` (the published schema and the rules) and only
then builds the model, so a document is judged by one validator wherever it comes from.
"""

from __future__ import annotations

from typing import Any

from .errors import InvalidSpec
from .models import Run
from .validate import validate_data

__all__ = ["parse_run"]


def parse_run(doc: Any) -> Run:
    """The ``Run`` for a document; raises ``InvalidSpec`` with every problem otherwise."""
    errors = validate_data(doc)
    if errors:
        raise InvalidSpec(errors)
    return Run.model_validate(doc)
