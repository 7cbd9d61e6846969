"""``astra validate`` over many files: split over processes, the same answer as one process."""

from reconciler import check as checking
from reconciler import cores
from reconciler.check import check


def test_many_files_on_every_core_give_the_same_answer_as_one_process(root, monkeypatch):
    monkeypatch.chdir(root)
    paths = ["tests/corpus", "examples"]
    alone = check(paths, parallel=False)
    monkeypatch.setattr(checking, "PARALLEL_FROM", 2)
    monkeypatch.setattr(cores, "cores", lambda: 2)  # two shares, whatever this machine has
    split = check(paths)
    assert alone.errors  # the invalid corpus has problems to find
    assert [e.format() for e in split.errors] == [e.format() for e in alone.errors]
    assert (split.documents, split.files) == (alone.documents, alone.files)
