"""``astra validate`` over many files: split over processes, the same answer as one process."""

import os
import subprocess
import sys

from reconciler import check as checking
from reconciler import cores
from reconciler.check import check

SPEC = """\
metadata:
  name: {name}
spec:
  task_template:
    image: busybox
    command: sh
    args: [-c, "echo hi"]
{limit}"""


def _on_two_cores(monkeypatch, chunk: int) -> None:
    monkeypatch.setattr(checking, "PARALLEL_FROM", 2)
    monkeypatch.setattr(checking, "CHUNK", chunk)
    monkeypatch.setattr(cores, "cores", lambda: 2)  # two shares, whatever this machine has


def test_many_files_on_every_core_give_the_same_answer_as_one_process(root, monkeypatch):
    monkeypatch.chdir(root)
    paths = ["tests/corpus", "examples"]
    alone = check(paths, parallel=False)
    _on_two_cores(monkeypatch, chunk=3)  # many chunks, taken in turn
    split = check(paths)
    assert alone.errors  # the invalid corpus has problems to find
    assert [e.format() for e in split.errors] == [e.format() for e in alone.errors]
    assert [w.format() for w in split.warnings] == [w.format() for w in alone.warnings]
    assert (split.documents, split.files, split.runs) == (alone.documents, alone.files, alone.runs)


def test_a_run_name_used_in_two_chunks_is_found_as_in_one_process(tmp_path, monkeypatch):
    """The files are taken a few at a time by two processes: a name used twice, in the first
    file and the last, is still said once, naming both files, as one process says it."""
    for i in range(12):
        name = "same" if i in (0, 11) else f"run-{i}"
        limit = "" if i == 5 else "    time_limit_seconds: 60\n"  # file 5 warns
        (tmp_path / f"r{i:02}.yaml").write_text(SPEC.format(name=name, limit=limit))
    monkeypatch.chdir(tmp_path)
    alone = check(["."], parallel=False)
    _on_two_cores(monkeypatch, chunk=2)
    split = check(["."])
    assert [e.format() for e in split.errors] == [e.format() for e in alone.errors]
    assert len(split.errors) == 1 and "run name 'same' is also used in" in split.errors[0].message
    assert [w.format() for w in split.warnings] == [w.format() for w in alone.warnings]
    assert len(split.warnings) == 1 and split.warnings[0].file.endswith("r05.yaml")
    assert (split.documents, len(split.files)) == (12, 12)


def test_more_files_than_chunks_can_be_handed_out_take_larger_chunks(tmp_path, monkeypatch):
    """``Turns`` hands out at most ``MOST`` chunks (half a million files at 250 a chunk): beyond,
    the chunks grow, and every file is still checked once."""
    for i in range(12):
        (tmp_path / f"r{i:02}.yaml").write_text(
            SPEC.format(name=f"run-{i}", limit="    time_limit_seconds: 60\n")
        )
    _on_two_cores(monkeypatch, chunk=2)  # 6 chunks of 2 …
    monkeypatch.setattr(cores.Turns, "MOST", 4)  # … but 4 at most: 4 chunks of 3
    checked = check([str(tmp_path)])
    assert checked.errors == [] and checked.documents == 12
    assert sorted(name for name, _, _ in checked.runs) == sorted(f"run-{i}" for i in range(12))


def test_validate_ends_with_every_line_said_and_its_exit_code(tmp_path):
    """``astra validate`` ends without Python's teardown (``cli._end``): every line it wrote still
    reaches a pipe, past what one pipe holds, and its exit code is the one it says."""
    for i in range(400):
        (tmp_path / f"r{i:03}.yaml").write_text(SPEC.format(name=f"Bad_{i}", limit=""))
    (tmp_path / "ok").mkdir()
    (tmp_path / "ok" / "a.yaml").write_text(SPEC.format(name="fine", limit="    time_limit_seconds: 60\n"))

    def validate(*args: str) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-m", "reconciler.cli", "validate", *args]
        env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # buffered, as for users
        return subprocess.run(argv, capture_output=True, text=True, check=False, env=env)

    bad = validate(str(tmp_path))
    assert bad.returncode == 1
    assert sum(f"r{i:03}.yaml" in bad.stdout + bad.stderr for i in range(400)) == 400
    assert len((bad.stdout + bad.stderr).encode()) > 65536  # more than a pipe holds
    good = validate(str(tmp_path / "ok"))
    assert (good.returncode, good.stderr.strip()) == (0, "1 document in 1 file is valid")
    as_json = validate("-o", "json", str(tmp_path))
    assert as_json.returncode == 1 and as_json.stdout.rstrip().endswith("]")
