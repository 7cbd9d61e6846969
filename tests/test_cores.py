"""``reconciler.cores``: shares of a job on every core, and other work for this process meanwhile."""

from __future__ import annotations

import os

from reconciler.cores import on_every_core


def doubled(index: int, share: int) -> tuple[int, int, int]:
    return index, share * 2, os.getpid()


def test_the_first_share_is_done_here_and_the_others_in_forked_processes():
    answers = on_every_core(doubled, [1, 2, 3])
    assert [(i, v) for i, v, _ in answers] == [(0, 2), (1, 4), (2, 6)]
    assert answers[0][2] == os.getpid()
    assert os.getpid() not in {pid for *_, pid in answers[1:]}


def test_with_work_meanwhile_every_share_is_forked_and_the_answers_keep_their_order():
    done_here = []
    answers = on_every_core(doubled, [1, 2, 3], meanwhile=lambda: done_here.append(os.getpid()))
    assert done_here == [os.getpid()]  # once, in this process
    assert [(i, v) for i, v, _ in answers] == [(0, 2), (1, 4), (2, 6)]
    assert os.getpid() not in {pid for *_, pid in answers}


def test_one_share_with_work_meanwhile_is_still_forked():
    done_here = []
    answers = on_every_core(doubled, [5], meanwhile=lambda: done_here.append(1))
    assert done_here == [1] and answers[0][:2] == (0, 10) and answers[0][2] != os.getpid()
