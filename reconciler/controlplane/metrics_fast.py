"""A fast path of ``/metrics``: gauges rendered in the text format without a call per sample.

``prometheus_client.generate_latest`` spends about 25 µs on each sample (it checks and escapes
each label's name, sorts the labels, formats the value): 300 ms for a cluster of 1,250
machines, whose five gauges each are most of a scrape. ``exposition(registry)`` gives the same
bytes (``tests/controlplane_api/test_metrics.py`` compares the two on a scrape of every kind of
family): a gauge family whose samples carry no timestamp or exemplar, and whose label names are
plain (``[a-zA-Z_][a-zA-Z0-9_]*``, as every label of ours is), is written here, its label names
sorted once per family; every other family (counters, histograms) by ``generate_latest`` itself.
Called from one place: ``metrics.Metrics.exposition``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.core import Metric
from prometheus_client.utils import floatToGoString

__all__ = ["exposition"]

_PLAIN = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")


class _One:
    """One family, as the registry ``generate_latest`` takes."""

    def __init__(self, family: Metric) -> None:
        self.family = family

    def collect(self) -> Iterable[Metric]:
        return [self.family]


def _value(v: float) -> str:
    """``floatToGoString`` of a whole number, at the cost of a format (most gauges are counts)."""
    if type(v) is int or (isinstance(v, float) and v.is_integer() and abs(v) < 1e15):
        return f"{int(v)}.0"
    return floatToGoString(v)


def _escape(v: str) -> str:
    return v.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _gauge(family: Metric) -> str | None:
    """The family's text, or None when it is not one this path writes."""
    samples = family.samples
    name = family.name
    if not _PLAIN.match(name):
        return None
    names: tuple[str, ...] | None = None
    doc = family.documentation.replace("\\", r"\\").replace("\n", r"\n")
    lines = [f"# HELP {name} {doc}\n"]
    lines.append(f"# TYPE {name} gauge\n")
    for s in samples:
        if s.timestamp is not None or s.exemplar is not None or s.name != name:
            return None
        labels: dict[str, Any] = s.labels
        if names is None or len(names) != len(labels) or not all(k in labels for k in names):
            names = tuple(sorted(labels))
            if not all(_PLAIN.match(k) and ":" not in k for k in names):
                return None
        if names:
            text = ",".join(f'{k}="{_escape(labels[k])}"' for k in names)
            lines.append(f"{name}{{{text}}} {_value(s.value)}\n")
        else:
            lines.append(f"{name} {_value(s.value)}\n")
    return "".join(lines)


def exposition(registry: Any) -> bytes:
    """``generate_latest(registry)``, its gauges written here."""
    out: list[bytes] = []
    for family in registry.collect():
        text = _gauge(family) if family.type == "gauge" else None
        out.append(text.encode("utf-8") if text is not None else generate_latest(_One(family)))
    return b"".join(out)
