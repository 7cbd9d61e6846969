"""Masking a worker's log (``controlplane.masking``): each secret value of its run is ``***``,
however the output is cut into writes."""

from __future__ import annotations

import os

from hypothesis import given
from hypothesis import strategies as st

from reconciler.controlplane.masking import Masker, pump

VALUE = b"hf_canary_3f9a"


def masked(values, pieces) -> bytes:
    m = Masker(values)
    return b"".join(m.feed(p) for p in pieces) + m.end()


def test_a_value_is_masked_wherever_it_appears():
    assert masked([VALUE], [b"token=" + VALUE + b" and " + VALUE + b"\n"]) == b"token=*** and ***\n"


def test_a_value_split_across_writes_is_masked():
    assert masked([VALUE], [b"token=hf_ca", b"nary_", b"3f9a done\n"]) == b"token=*** done\n"


def test_a_beginning_of_a_value_that_goes_no_further_is_written_at_the_end():
    assert masked([VALUE], [b"hf_ca", b"t\n", b"hf_"]) == b"hf_cat\nhf_"


def test_each_line_of_a_value_of_several_lines_is_masked_and_short_lines_are_not():
    key = b"-----BEGIN KEY-----\nAAAAbbbbCCCC\nxy\n-----END KEY-----\n"
    out = masked([key], [b"cat:\n" + key.replace(b"\n", b"\r\n"), b"AAAAbbbbCCCC\n", b"xy\n"])
    assert out == b"cat:\n***\r\n***\r\nxy\r\n***\r\n***\nxy\n"


def test_binary_bytes_and_the_longest_value_first():
    inner, outer = b"\x00\xff\xfe", b"ab\x00\xff\xfecd"
    assert masked([inner, outer], [b"<", outer, b"|", inner, b">"]) == b"<***|***>"


@given(st.lists(st.integers(min_value=0, max_value=60), max_size=8), st.binary(max_size=20))
def test_however_the_output_is_cut_no_value_reaches_the_log(cuts, noise):
    text = noise + VALUE + noise + VALUE[:5] + noise + VALUE
    points = sorted({min(c, len(text)) for c in cuts})
    pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    out = masked([VALUE], pieces)
    assert VALUE not in out
    assert out == masked([VALUE], [text])


def test_the_pump_writes_the_masked_output_to_the_log(tmp_path):
    read, write = os.pipe()
    log = tmp_path / "w.log"
    thread = pump(read, log, Masker([VALUE]))
    os.write(write, b"one hf_can")
    os.write(write, b"ary_3f9a two\n")
    os.close(write)
    thread.join(timeout=10)
    assert log.read_bytes() == b"one *** two\n"
