"""``reconciler.cores``: shares of a job on every core, and work aside in a forked process."""

from __future__ import annotations

import os
import select

import pytest

from reconciler import cores
from reconciler.cores import Turns, aside, on_every_core


def doubled(index: int, share: int) -> tuple[int, int, int]:
    return index, share * 2, os.getpid()


def test_the_first_share_is_done_here_and_the_others_in_forked_processes():
    answers = on_every_core(doubled, [1, 2, 3])
    assert [(i, v) for i, v, _ in answers] == [(0, 2), (1, 4), (2, 6)]
    assert answers[0][2] == os.getpid()
    assert os.getpid() not in {pid for *_, pid in answers[1:]}


def test_one_share_is_done_here_without_forking():
    assert on_every_core(doubled, [5]) == [(0, 10, os.getpid())]


def taken_here(_index: int, turns: Turns) -> list[list[int]]:
    return list(turns.taken())


def numbered_here(_index: int, turns: Turns) -> list[tuple[int, list[int]]]:
    return list(turns.numbered())


def in_turns(work, chunks: list[list[int]]) -> list:
    """``work``'s answer in each process, the chunks taken in turn."""
    turns = Turns(chunks)
    try:
        return on_every_core(work, turns.shares())
    finally:
        turns.close()


def test_chunks_taken_in_turn_are_each_taken_once_by_one_of_the_processes(monkeypatch):
    monkeypatch.setattr(cores, "cores", lambda: 3)
    chunks = [[i, i + 1] for i in range(0, 200, 2)]
    answers = in_turns(taken_here, chunks)
    assert len(answers) == 3
    assert sorted(c for taken in answers for c in taken) == chunks  # none twice, none left


def test_chunks_taken_numbered_say_their_place():
    chunks = [[i, i + 1] for i in range(0, 200, 2)]
    answers = in_turns(numbered_here, chunks)
    numbered = sorted(n for answer in answers for n in answer)
    assert numbered == list(enumerate(chunks))


@pytest.mark.parametrize("n", [0, 1, 7, 250, 1000, 10_000, 100_000])
def test_items_cut_in_turns_are_each_in_one_chunk_the_last_ones_smaller(monkeypatch, n):
    monkeypatch.setattr(cores, "cores", lambda: 2)
    items = list(range(n))
    turns = Turns.cut(items, 250)
    try:
        chunks = [chunk for _, chunk in turns.numbered()]
    finally:
        turns.close()
    assert [i for chunk in chunks for i in chunk] == items  # in order, none twice, none left
    sizes = [len(c) for c in chunks]
    assert sizes == sorted(sizes, reverse=True) and len(chunks) <= Turns.MOST
    if n >= 1000:
        assert sizes[0] == max(250, -(-n // Turns.MOST)) and sizes[-1] <= sizes[0] // 10


def test_more_chunks_than_a_pipe_surely_holds_are_refused():
    with pytest.raises(ValueError, match="at most 2048 chunks"):
        Turns([[i] for i in range(Turns.MOST + 1)])


def pid_and(value: int) -> tuple[int, int]:
    return os.getpid(), value


def refuse() -> None:
    raise ValueError("no, in the other process")


def test_aside_gives_the_answer_of_work_done_in_another_process():
    answer = aside(lambda: pid_and(7)).result()
    assert answer[1] == 7 and answer[0] != os.getpid()


def test_aside_raises_here_what_the_work_raised_there():
    with pytest.raises(ValueError, match="no, in the other process"):
        aside(refuse).result()


def test_closing_an_aside_stops_work_that_would_never_end():
    blocked, _keep_open = os.pipe()  # nobody writes: a read waits forever
    work = aside(lambda: os.read(blocked, 1))
    work.close()  # killed and reaped: no process is left behind
    with pytest.raises(ChildProcessError):
        os.waitpid(work._pid, os.WNOHANG)


def test_aside_ends_once_its_answer_is_written_without_waiting_for_the_reader():
    # an answer larger than a pipe holds: the forked process must not stay alive, holding its
    # memory, until this one reads the answer
    work = aside(lambda: b"x" * 4_000_000)
    pidfd = os.pidfd_open(work._pid)
    try:
        ended, _, _ = select.select([pidfd], [], [], 60)
    finally:
        os.close(pidfd)
    assert ended, "the forked process still runs, its answer unread"
    assert work.result() == b"x" * 4_000_000
