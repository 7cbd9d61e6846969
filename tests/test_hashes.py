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


def test_an_unchanged_file_is_known_without_a_read_even_by_another_process(tmp_path, later):
    f = tmp_path / "a.yaml"
    f.write_bytes(b"one")
    first = StatHashes(tmp_path / "stat.json")
    assert first.known(str(f)) is None  # never hashed
    assert first.sha256(str(f)) == sha(b"one")
    assert first.known(str(f)) == sha(b"one")  # from memory: the stat alone
    first.save()
    assert StatHashes(tmp_path / "stat.json").known(str(f)) == sha(b"one")


def test_read_gives_the_bytes_it_hashed_and_remembers_them(tmp_path, later):
    f = tmp_path / "a.yaml"
    f.write_bytes(b"one")
    memory = StatHashes(tmp_path / "stat.json")
    assert memory.read(str(f)) == (b"one", sha(b"one"))
    assert memory.known(str(f)) == sha(b"one")
    f.write_bytes(b"two")
    assert memory.known(str(f)) is None
    assert memory.read(str(f)) == (b"two", sha(b"two"))  # read whatever it remembers


def test_a_relative_name_is_remembered_under_the_folder_it_was_given_in(tmp_path, later, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "x.yaml").write_bytes(b"in a")
    (tmp_path / "b" / "x.yaml").write_bytes(b"in b")
    monkeypatch.chdir(tmp_path / "a")
    memory = StatHashes(tmp_path / "stat.json")
    assert memory.sha256("x.yaml") == sha(b"in a")
    memory.save()
    monkeypatch.chdir(tmp_path / "b")
    assert StatHashes(tmp_path / "stat.json").sha256("x.yaml") == sha(b"in b")


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
    assert memory.known(str(f)) is None
    assert memory.sha256(str(f)) == sha(b"two")


def test_a_file_written_just_now_is_hashed_every_time(tmp_path):
    f = tmp_path / "a.yaml"
    f.write_bytes(b"one")
    memory = StatHashes(tmp_path / "stat.json")
    assert memory.sha256(str(f)) == sha(b"one")
    assert memory.known(str(f)) is None  # racy: not remembered
    memory.save()
    assert not (tmp_path / "stat.json").exists()


def test_what_another_process_learned_is_taken_and_kept(tmp_path, later):
    f = tmp_path / "a.yaml"
    f.write_bytes(b"one")
    worker = StatHashes(None)
    worker.sha256(str(f))
    parent = StatHashes(tmp_path / "stat.json")
    parent.learn(worker.remembered())
    parent.save()
    assert StatHashes(tmp_path / "stat.json").known(str(f)) == sha(b"one")


def test_a_damaged_or_missing_memory_only_costs_a_read(tmp_path, later):
    f = tmp_path / "a.yaml"
    f.write_bytes(b"one")
    (tmp_path / "stat.json").write_text("{not json")
    assert StatHashes(tmp_path / "stat.json").sha256(str(f)) == sha(b"one")
    assert StatHashes(None).sha256(str(f)) == sha(b"one")
    gone = str(tmp_path / "gone.yaml")
    assert StatHashes(None).known(gone) is None  # nothing remembered: not even a stat
    with pytest.raises(OSError):
        StatHashes(None).sha256(gone)
    with pytest.raises(OSError):
        StatHashes(None).read(gone)


def test_files_a_load_no_longer_finds_under_its_folders_are_forgotten(tmp_path, later):
    (tmp_path / "runs").mkdir()
    (tmp_path / "other").mkdir()
    kept, gone, elsewhere = (
        tmp_path / "runs" / "a.yaml",
        tmp_path / "runs" / "b.yaml",
        tmp_path / "other" / "c.yaml",
    )
    for f in (kept, gone, elsewhere):
        f.write_bytes(b"x")
    memory = StatHashes(tmp_path / "stat.json")
    for f in (kept, gone, elsewhere):
        memory.sha256(str(f))
    memory.save()
    gone.unlink()
    again = StatHashes(tmp_path / "stat.json")
    again.forget_under([str(tmp_path / "runs")], [str(kept)])
    again.save()
    left = StatHashes(tmp_path / "stat.json")
    assert left.known(str(kept)) == sha(b"x") and left.known(str(elsewhere)) == sha(b"x")
    assert str(gone) not in left._held  # its entry is gone with it; another folder's stays


def test_a_file_whose_name_is_not_utf8_is_remembered_too(tmp_path, later):
    """Such a name is kept as Python holds it (a surrogate escape), which the fast JSON writer
    refuses: the memory is written all the same, and read back."""
    name = os.path.join(os.fsdecode(tmp_path), os.fsdecode(b"caf\xe9.yaml"))
    with open(name, "wb") as f:
        f.write(b"one")
    first = StatHashes(tmp_path / "stat.json")
    first.sha256(name)
    first.save()
    again = StatHashes(tmp_path / "stat.json")
    assert again.known(name) == sha(b"one")
