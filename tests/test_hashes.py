"""Content hashes remembered by stat (``reconciler.hashes``): a file that did not change is not
read again; any write, even one that sets its modification time back, is seen."""

from __future__ import annotations

import hashlib
import os
import time

import pytest

from reconciler import hashes
from reconciler.hashes import RACY_NS, StatHashes


@pytest.fixture
def later(monkeypatch):
    """The clock moved on past the racy window: files written now count as settled."""
    real = time.time_ns
    monkeypatch.setattr(hashes.time, "time_ns", lambda: real() + 2 * RACY_NS)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_an_unchanged_file_is_not_read_again_even_by_another_process(tmp_path, later):
    f = tmp_path / "a.yaml"
    f.write_bytes(b"one")
    first = StatHashes(tmp_path / "stat.json")
    assert first.sha256(str(f)) == (sha(b"one"), b"one")
    assert first.sha256(str(f)) == (sha(b"one"), None)  # from memory: not read
    first.save()
    again = StatHashes(tmp_path / "stat.json")
    assert again.sha256(str(f)) == (sha(b"one"), None)


def test_a_write_that_keeps_size_and_modification_time_is_still_seen(tmp_path, later):
    f = tmp_path / "a.yaml"
    f.write_bytes(b"one")
    st = os.stat(f)
    memory = StatHashes(tmp_path / "stat.json")
    memory.sha256(str(f))
    while os.stat(f).st_ctime_ns == st.st_ctime_ns:  # the kernel's coarse clock ticks on
        f.write_bytes(b"two")
    f.write_bytes(b"two")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # the modification time set back
    assert memory.sha256(str(f)) == (sha(b"two"), b"two")


def test_a_file_written_just_now_is_hashed_every_time(tmp_path):
    f = tmp_path / "a.yaml"
    f.write_bytes(b"one")
    memory = StatHashes(tmp_path / "stat.json")
    assert memory.sha256(str(f)) == (sha(b"one"), b"one")
    assert memory.sha256(str(f)) == (sha(b"one"), b"one")  # racy: not remembered
    memory.save()
    assert not (tmp_path / "stat.json").exists()


def test_a_damaged_or_missing_memory_only_costs_a_read(tmp_path, later):
    f = tmp_path / "a.yaml"
    f.write_bytes(b"one")
    (tmp_path / "stat.json").write_text("{not json")
    assert StatHashes(tmp_path / "stat.json").sha256(str(f)) == (sha(b"one"), b"one")
    assert StatHashes(None).sha256(str(f)) == (sha(b"one"), b"one")
    with pytest.raises(OSError):
        StatHashes(None).sha256(str(tmp_path / "gone.yaml"))
