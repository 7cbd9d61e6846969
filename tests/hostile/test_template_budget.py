"""Hostile templates: a template's budget (time, loops, sizes, integers, nesting), each limit named.

A template is committed by anyone who may push to a repository, and ``watch`` and CI render it.
Each case of issue 12 (nine nested loops, powers of powers, round with a huge precision, a
string doubled 27 times, ``'%0999999999d' % 1``, 5,000 parentheses) ends as one
``FILE:LINE:COLUMN: PATH: template limit: …`` line naming the limit it went over, never a
``MemoryError``, a ``RecursionError`` or a minute of work. The deadline is tested with a clock
the test drives.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.cli.app import run
from reconciler.templates import Origin, budget, load_template, render, resolve_parameters

PARAMETERS = """\
  l: {type: list, default: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}
  s: {type: string, default: ab}
"""
#: The template's line of the value under test, and its column: ``    args: [`` is 11 characters.
LINE, COLUMN = 9, 12

CASES = {
    "nine-nested-loops": ("{% for a in l %}" * 9 + "{{ a }}" + "{% endfor %}" * 9, budget.ITERATIONS),
    "powers-of-powers": ("{{ (((9**64)**64)**64)**64 }}", budget.INTEGER),
    "round-to-a-huge-precision": ("{{ 10**64|round(-100000000) }}", budget.ROUND),
    "a-string-doubled-27-times": ("{% set x = s %}" + "{% set x = x ~ x %}" * 27 + "{{ x }}", budget.VALUE),
    "a-string-added-to-itself": ("{% set x = s %}" + "{% set x = x + x %}" * 27 + "{{ x }}", budget.VALUE),
    "a-billion-digits-of-padding": ("{{ '%0999999999d' % 1 }}", budget.VALUE),
    "5000-parentheses": ("{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}", budget.NESTING),
    "5000-additions": ("{{ " + "+".join(["1"] * 5000) + " }}", budget.NESTING),
    "1000-nested-ifs": ("{% if 1 %}" * 1000 + "x" + "{% endif %}" * 1000, budget.NESTING),
    "a-5000-digit-literal": ("{{ 1" + "0" * 5000 + " }}", budget.INTEGER),
    "padding-from-the-arguments": ("{{ '%*d' % (999999999, 1) }}", budget.VALUE),
    "replace-between-every-character": ("{{ s|replace('', s * 60000) }}", budget.VALUE),
    "join-with-a-long-glue": ("{{ (s * 60000)|list|join(s * 60000) }}", budget.VALUE),
    "a-block-set-that-doubles": (
        "{% set x %}{{ s * 60000 }}{{ s * 60000 }}{% endset %}{{ x|length }}",
        budget.VALUE,
    ),
}


def template_file(folder: Path, expression: str, name: str = "t") -> Path:
    path = folder / "templates" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"metadata:\n  name: {name}\nparameters:\n{PARAMETERS}spec:\n  task_template:\n"
        f"    image: busybox\n    args: [{json.dumps(expression)}]\n"
    )
    return path


def run_spec(folder: Path, template: str = "t", name: str = "r") -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(
        f"metadata:\n  name: {name}\ntemplate:\n  name: {template}\nspec:\n  array: {{size: 1}}\n"
        "  task_template:\n    command: sh\n"
    )
    return path


@pytest.mark.parametrize(("expression", "words"), list(CASES.values()), ids=list(CASES))
def test_each_case_is_one_positioned_error_naming_its_limit(tmp_path, monkeypatch, capsys, expression, words):
    template_file(tmp_path, expression)
    run_spec(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ASTRA_TEMPLATE_PATH", raising=False)
    code = run(["validate", "r.yaml"])
    out, err = capsys.readouterr()
    assert code == 1
    problems = [line for line in (out + err).splitlines() if line.startswith("templates/")]
    assert problems == [f"templates/t.yaml:{LINE}:{COLUMN}: spec.task_template.args[0]: {words}"]
    assert "Error" not in out + err  # no MemoryError, RecursionError, Traceback


def test_an_honest_template_renders_within_its_budget(tmp_path):
    expression = (
        "{% for a in l %}{% for b in l %}{{ a * b }},{% endfor %}{% endfor %}"
        "{{ s ~ '-' ~ (l|sum) ~ '-' ~ (2**62) ~ '-' ~ ('%05d' % 7) ~ '-' ~ (s|replace('a', 'x')) }}"
    )
    assert rendered(tmp_path, expression) == (
        "".join(f"{a * b}," for a in range(10) for b in range(10)) + "ab-45-4611686018427387904-00007-xb",
        [],
    )


def rendered(folder: Path, expression: str, clock=None) -> tuple[str | None, list[str]]:
    template, errors = load_template(template_file(folder, expression))
    assert errors == []
    here = Origin.command_line("test")
    values, origins, errors = resolve_parameters(template, {}, here)
    spent = budget.Budget(clock) if clock is not None else None
    spec, _, errors = render(template, values, origins, budget=spent)
    return (spec["task_template"]["args"][0] if spec else None), [e.message for e in errors]


class Clock:
    """A clock that moves ``step`` seconds each time it is read."""

    def __init__(self, step: float):
        self.now, self.step, self.reads = 0.0, step, 0

    def __call__(self) -> float:
        self.reads += 1
        self.now += self.step
        return self.now


def test_the_deadline_stops_a_rendering_inside_its_loops(tmp_path):
    clock = Clock(0.001)  # each step of work takes a millisecond: a second is 1000 steps
    loops = "{% for a in l %}{% for b in l %}{% for c in l %}{{ a }}{% endfor %}{% endfor %}{% endfor %}"
    assert rendered(tmp_path, loops, clock) == (None, [budget.TIME])
    # stopped at the deadline (a thousand reads or so), long before its thousand iterations' work
    assert 1000 <= clock.reads <= 1005


def test_the_deadline_is_one_for_the_whole_rendering(tmp_path):
    """Time spent by one value is not given back for the next; the rendering ends at the first
    value that passes the deadline, though each alone is well within it."""
    loop = "{% for a in l %}{% for b in l %}{{ a }}{% endfor %}{% endfor %}"
    assert rendered(tmp_path, loop, Clock(0.001))[1] == []  # alone: about 0.2 s
    path = tmp_path / "templates" / "t.yaml"
    path.write_text(
        f"metadata:\n  name: t\nparameters:\n{PARAMETERS}spec:\n  task_template:\n"
        f"    image: busybox\n    args: {json.dumps([loop] * 8)}\n"
    )
    template, errors = load_template(path)
    assert errors == []
    values, origins, _ = resolve_parameters(template, {}, Origin.command_line("test"))
    spec, _, errors = render(template, values, origins, budget=budget.Budget(Clock(0.001)))
    assert spec is None
    ((path, message),) = [(str(e.path), e.message) for e in errors]  # one error: the rest not rendered
    assert message == budget.TIME
    assert path in {f"spec.task_template.args[{i}]" for i in range(1, 8)}


def test_loops_count_over_the_whole_rendering(tmp_path):
    """Four values of 30,000 iterations each: the fourth goes over 100,000."""
    path = tmp_path / "templates" / "t.yaml"
    path.parent.mkdir()
    loop = "{% for a in s * 15000 %}{% endfor %}"  # 'ab' * 15000: 30,000 iterations
    path.write_text(
        f"metadata:\n  name: t\nparameters:\n{PARAMETERS}spec:\n  task_template:\n"
        f"    image: busybox\n    args: {json.dumps([loop] * 4)}\n"
    )
    template, errors = load_template(path)
    assert errors == []
    values, origins, _ = resolve_parameters(template, {}, Origin.command_line("test"))
    _, _, errors = render(template, values, origins, budget=budget.Budget(lambda: 0.0))
    assert [(str(e.path), e.message) for e in errors] == [("spec.task_template.args[3]", budget.ITERATIONS)]


def test_the_whole_document_is_bounded(tmp_path):
    path = tmp_path / "templates" / "t.yaml"
    path.parent.mkdir()
    path.write_text(
        f"metadata:\n  name: t\nparameters:\n{PARAMETERS}spec:\n  task_template:\n"
        f"    image: busybox\n    args: {json.dumps(['{{ s * 60000 }}'] * 10)}\n"
    )
    template, errors = load_template(path)
    values, origins, _ = resolve_parameters(template, {}, Origin.command_line("test"))
    _, _, errors = render(template, values, origins, budget=budget.Budget(lambda: 0.0))
    # 120,000 characters each: the ninth passes 1 MiB
    assert [(str(e.path), e.message) for e in errors] == [("spec.task_template.args[8]", budget.DOCUMENT)]


def test_a_loop_keeps_its_length_and_its_last(tmp_path):
    expression = "{% for a in l %}{{ loop.index }}/{{ loop.length }}{% if loop.last %}.{% endif %} "
    expression += "{% endfor %}"
    out, errors = rendered(tmp_path, expression)
    assert errors == []
    assert out == " ".join(f"{i}/10" for i in range(1, 11)) + ". "


def test_a_rendering_stays_in_bounded_memory(tmp_path):
    """Every case at once, in a process that may not grow past 768 MiB (a string doubled 27
    times was 2 GiB): each ends as its own error, and nothing else goes wrong."""
    runs = []
    for i, (expression, _) in enumerate(CASES.values()):
        template_file(tmp_path, expression, name=f"t{i}")
        runs.append(run_spec(tmp_path, template=f"t{i}", name=f"r{i}").name)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (768 * 2**20, 768 * 2**20))

    env = {k: v for k, v in os.environ.items() if k != "ASTRA_TEMPLATE_PATH"}
    done = subprocess.run(
        [sys.executable, "-m", "reconciler.cli", "validate", *runs],
        cwd=tmp_path,
        env=env,
        preexec_fn=limit,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr
    lines = sorted(line for line in (done.stdout + done.stderr).splitlines() if line.startswith("templates/"))
    expected = sorted(
        f"templates/t{i}.yaml:{LINE}:{COLUMN}: spec.task_template.args[0]: {words}"
        for i, (_, words) in enumerate(CASES.values())
    )
    assert lines == expected
    assert "Error" not in done.stdout + done.stderr


def test_every_limit_is_in_the_docs_in_its_words(root):
    text = (root / "docs" / "limits.md").read_text()
    words = [budget.TIME, budget.ITERATIONS, budget.VALUE, budget.DOCUMENT, budget.INTEGER]
    for limit in [*words, budget.NESTING, budget.ROUND, budget.DEPTH]:
        assert f"`{limit}`" in text, limit
