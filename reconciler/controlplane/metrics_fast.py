"""A fast path of ``/metrics``: gauges rendered in the text format without a call per sample.

``prometheus_client.generate_latest`` spends about 25 µs on each sample (it checks and escapes
each label's name, sorts the labels, formats the value): 300 ms for a cluster of 1,250
machines, whose five gauges each are most of a scrape. ``exposition(registry)`` gives the same
bytes (``tests/controlplane_api/test_metrics.py`` compares the two on a scrape of every kind of
family): a gauge family whose samples carry no timestamp or exemplar, and whose label names are
plain (``[a-zA-Z_][a-zA-Z0-9_]*``, as every label of ours is), is written here, its label names
sorted once per family; every other family (counters, histograms) by ``generate_latest`` itself.
``RowGauge`` is a gauge whose rows share one label set whose text is made once (a machine's:
``row_labels``): a scrape writes one ``NAME{LABELS} VALUE`` line per row, with no sample made
(the machines' five gauges, 62,500 lines at 100,000 GPUs); ``generate_latest`` reads its samples,
made only when it asks. Called from one place: ``metrics.Metrics.exposition``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.core import Metric
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

__all__ = ["Row", "RowGauge", "exposition", "row_labels"]

#: A ``RowGauge``'s row: its label text (``a="x",b="y"``) and its labels.
Row = tuple[str, Mapping[str, str]]

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


def row_labels(labels: Mapping[str, str]) -> Row:
    """A row's label text (``a="x",b="y"``: names sorted, values escaped, as the text format
    writes them) and its labels, for ``RowGauge``; the names must be plain (``[a-zA-Z_]…``)."""
    return ",".join(f'{k}="{_escape(labels[k])}"' for k in sorted(labels)), labels


class RowGauge(Metric):
    """A gauge of rows (``row_labels``: each row's label text and labels) and their values."""

    def __init__(self, name: str, documentation: str, rows: Sequence[Row], values: Sequence[float]) -> None:
        self._rows, self._values = rows, values
        super().__init__(name, documentation, "gauge")

    @property  # type: ignore[override]
    def samples(self) -> list[Sample]:
        """The samples, made now (``generate_latest``'s path only)."""
        rows = zip(self._rows, self._values, strict=True)
        return [Sample(self.name, dict(labels), v, None, None) for (_, labels), v in rows]

    @samples.setter
    def samples(self, given: list[Sample]) -> None:
        if given:  # ``Metric.__init__`` sets none; nothing else may
            raise TypeError("a RowGauge's samples are its rows")

    def text(self) -> str:
        """The family in the text format: ``generate_latest``'s bytes, one format per row."""
        name = self.name
        doc = self.documentation.replace("\\", r"\\").replace("\n", r"\n")
        lines = [f"# HELP {name} {doc}\n# TYPE {name} gauge\n"]
        lines += [f"{name}{{{t}}} {_value(v)}\n" for (t, _), v in zip(self._rows, self._values, strict=True)]
        return "".join(lines)


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
        if isinstance(family, RowGauge):
            text: str | None = family.text()
        else:
            text = _gauge(family) if family.type == "gauge" else None
        out.append(text.encode("utf-8") if text is not None else generate_latest(_One(family)))
    return b"".join(out)
