"""A dry run's copy of the scheduler's records (``outlook.copy_run``, ``copy_worker``) is their
shallow copy, as ``copy.copy`` makes it: a new record holding the very same value in every field,
whose changes leave the original as it was."""

from __future__ import annotations

import copy
from dataclasses import fields

import pytest

from reconciler.controlplane.scheduler.outlook import copy_run, copy_worker
from reconciler.controlplane.scheduler.records import RunRecord, WorkerRecord


@pytest.mark.parametrize(("kind", "copier"), [(RunRecord, copy_run), (WorkerRecord, copy_worker)])
def test_a_records_copy_holds_every_field_as_copy_copy_does(kind, copier):
    names = [f.name for f in fields(kind)]
    values = [object() for _ in names]  # each field its own value: one left out or mixed up shows
    record = kind(*values)
    made, plain = copier(record), copy.copy(record)
    assert made is not record
    for name, value in zip(names, values, strict=True):
        assert getattr(made, name) is value is getattr(plain, name), name
    made.state = "changed"
    assert record.state is values[names.index("state")]
