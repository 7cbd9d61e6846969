"""Bad input gets a clear error and nothing else; good input passes quietly.

* ``tests/corpus/invalid/``: one small file per problem, each named for what it shows. The exact
  output of ``astra validate FILE`` is snapshotted (``__snapshots__/test_corpus.ambr``); focused
  tests below match on ``(type, path)`` and on the exact words of ``reconciler.runspec.messages``.
* ``tests/corpus/valid/``: the edges that must pass (limits at their edge, YAML 1.2 strings, …).
* Hostile inputs (an alias bomb, a file over 10 MB) are made at test time, never committed.
* One source: pydantic (``Run.model_validate``) and the published schema + rules agree.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import threading
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from reconciler.cli.app import run
from reconciler.runspec import messages as msg
from reconciler.runspec.errors import ErrorType, FieldError
from reconciler.runspec.files import find_files
from reconciler.runspec.loading import load_file
from reconciler.runspec.models import Run
from reconciler.runspec.parse import parse_run
from reconciler.runspec.rules import COMBINATIONS, SPEC
from reconciler.runspec.validate import _schema_passes, validate_data

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"
INVALID = sorted(p for p in (CORPUS / "invalid").iterdir() if p.is_file())
VALID = sorted(p for p in (CORPUS / "valid").iterdir() if p.is_file())
EXAMPLES = sorted(  # the files astra finds: not under hidden names (examples/ci/.gitlab-ci.yml)
    p
    for p in (ROOT / "examples").rglob("*")
    if p.suffix in (".yaml", ".yml", ".json")
    and not any(s.startswith(".") for s in p.relative_to(ROOT).parts)
)


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@pytest.fixture
def at_root(monkeypatch):
    """Run from the repo root, so that file names in output are relative and machine-independent."""
    monkeypatch.chdir(ROOT)


def _astra(capsys, *argv: str) -> tuple[int, str, str]:
    code = run(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---- the corpus through the CLI ----------------------------------------------------------------


def test_the_corpus_is_big_enough():
    assert len(INVALID) >= 45
    assert len(VALID) >= 6


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_invalid_file_gets_clear_errors(path, capsys, at_root, snapshot):
    name = _rel(path)
    code, out, err = _astra(capsys, "validate", name)
    assert code == 1
    assert "Traceback" not in out + err
    lines = out.splitlines()
    assert lines, "an invalid file must report at least one problem on stdout"
    for line in lines:
        # FILE:LINE:COLUMN: … on every line: the file, and a 1-based position
        head, line_no, column, rest = line.split(":", 3)
        assert head == name
        assert int(line_no) >= 1 and int(column) >= 1
        assert rest.startswith(" ") and rest.strip()
    assert err.endswith(" files\n") and "problem" in err
    assert f"exit {code}\n--- stdout\n{out}--- stderr\n{err}" == snapshot


@pytest.mark.parametrize("path", VALID + EXAMPLES, ids=lambda p: _rel(p))
def test_valid_file_passes_quietly(path, capsys, at_root):
    code, out, err = _astra(capsys, "validate", _rel(path))
    assert (code, out) == (0, "")
    assert "Traceback" not in err
    assert err.endswith(("are valid\n", "1 document in 1 file is valid\n"))


def test_a_folder_reports_every_file(capsys, at_root):
    code, out, _ = _astra(capsys, "validate", "tests/corpus/invalid")
    assert code == 1
    named = {line.split(":", 1)[0] for line in out.splitlines()}
    assert named == {_rel(p) for p in INVALID}


def test_json_output_shape(capsys, at_root):
    code, out, _ = _astra(
        capsys, "validate", "-o", "json", "tests/corpus/invalid/max-parallel-size-plus-1.yaml"
    )
    assert code == 1
    assert json.loads(out) == [
        {
            "file": "tests/corpus/invalid/max-parallel-size-plus-1.yaml",
            "line": 6,
            "column": 19,
            "path": "spec.array.max_parallel",
            "message": "array.max_parallel must be from 0 (no cap) to array.size (10)",
        }
    ]


def test_json_output_shape_of_many(capsys, at_root):
    code, out, err = _astra(
        capsys, "validate", "--output", "json", "tests/corpus/invalid", "tests/corpus/valid"
    )
    assert code == 1
    assert err == ""
    items = json.loads(out)
    assert len(items) >= len(INVALID)
    for item in items:
        assert list(item) == ["file", "line", "column", "path", "message"]
        assert isinstance(item["file"], str) and isinstance(item["path"], str) and item["message"]
        assert isinstance(item["line"], int) and isinstance(item["column"], int)


def test_json_output_when_valid_is_an_empty_list(capsys, at_root):
    code, out, _ = _astra(capsys, "validate", "-o", "json", "tests/corpus/valid")
    assert (code, json.loads(out)) == (0, [])


# ---- focused: (type, path) and the exact words ---------------------------------------------------


def _doc(spec: dict[str, Any], name: str = "run") -> dict[str, Any]:
    spec = dict(spec)
    if "task_template" not in spec and "task_groups" not in spec:
        spec["task_template"] = {"image": "busybox"}
    return {"metadata": {"name": name}, "spec": spec}


def _found(doc: Any) -> list[tuple[ErrorType, str, str]]:
    return [(e.type, str(e.path), e.message) for e in validate_data(doc)]


def _group(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, **extra, "task_template": {"image": "busybox"}}


ARRAY = {"array": {"size": 10}}

CONTRACT_CASES = [
    pytest.param(
        {**ARRAY, "start": "Gang"}, ErrorType.forbidden, "spec.start", msg.ARRAY_START, id="array+start"
    ),
    pytest.param(
        {**ARRAY, "policy": "Gang"}, ErrorType.forbidden, "spec.policy", msg.ARRAY_START, id="array+policy"
    ),
    pytest.param(
        {**ARRAY, "start": "MinAvailable", "min_available": 2},
        ErrorType.forbidden,
        "spec.start",
        msg.ARRAY_START,
        id="array+minavailable",
    ),
    pytest.param(
        {**ARRAY, "task_groups": [_group("a")]},
        ErrorType.forbidden,
        "spec.task_groups",
        msg.ARRAY_TASK_GROUPS,
        id="array+task_groups",
    ),
    pytest.param(
        {**ARRAY, "lifetime": "Service"},
        ErrorType.forbidden,
        "spec.lifetime",
        msg.ARRAY_SERVICE,
        id="array+service",
    ),
    pytest.param(
        {**ARRAY, "model": {"engine": "vllm"}},
        ErrorType.forbidden,
        "spec.model.engine",
        msg.ARRAY_ENGINE,
        id="array+engine",
    ),
    pytest.param({"array": {"size": 0}}, ErrorType.invalid, "spec.array.size", msg.ARRAY_SIZE, id="size-0"),
    pytest.param(
        {"array": {"size": 10001}}, ErrorType.invalid, "spec.array.size", msg.ARRAY_SIZE, id="size-10001"
    ),
    pytest.param(
        {"array": {"size": -1}}, ErrorType.invalid, "spec.array.size", msg.ARRAY_SIZE, id="size-minus-1"
    ),
    pytest.param(
        {"array": {"size": 10, "max_paralel": 2}},
        ErrorType.unknown,
        "spec.array.max_paralel",
        "unknown field 'max_paralel'; did you mean 'max_parallel'?",
        id="did-you-mean",
    ),
    pytest.param(
        {"colour": "blue"},
        ErrorType.unknown,
        "spec.colour",
        "unknown field 'colour'",
        id="unknown-no-suggestion",
    ),
]


@pytest.mark.parametrize("spec, type_, path, message", CONTRACT_CASES)
def test_contract_messages(spec, type_, path, message):
    assert _found(_doc(spec)) == [(type_, path, message)]


#: For each field of a forbidden combination: a value the schema takes for it on its own.
_SOME = {
    "array": {"size": 10},
    "start": "Gang",
    "policy": "Gang",
    "lifetime": "Service",
    "task_groups": [_group("a")],
    "task_template": {"image": "busybox"},
    "engine": "vllm",
}


@pytest.mark.parametrize("rule", COMBINATIONS, ids=lambda r: f"{r.when}+{'.'.join(r.field)}")
def test_the_schema_alone_refuses_every_forbidden_combination(rule):
    """``validate_data`` leaves the combinations to the schema when it passes a document (the
    rules are asked for them only when it refuses one): so the schema must refuse each, as the
    same document without the forbidden field passes."""
    spec: dict[str, Any] = {rule.when: _SOME[rule.when]}
    allowed = _doc(spec)
    broken = copy.deepcopy(allowed)
    target = broken["spec"]
    for step in rule.field[:-1]:
        target = target.setdefault(step, {})
    target[rule.field[-1]] = _SOME[rule.field[-1]]
    assert _schema_passes(allowed, "run"), allowed
    assert not _schema_passes(broken, "run"), broken
    assert (ErrorType.forbidden, str(SPEC.child(*rule.field)), rule.message) in _found(broken)


def test_contract_messages_are_the_contract_words():
    """CONTRACT.md §2, copied: the words users and editors see."""
    assert msg.ARRAY_START == "An array's workers are independent: use policy Independent"
    assert msg.ARRAY_TASK_GROUPS == "An array runs one worker template: task_groups is not allowed with array"
    assert (
        msg.ARRAY_SERVICE == "An array ends when its workers end: lifetime Service is not allowed with array"
    )
    assert msg.ARRAY_ENGINE == "An array cannot run a model engine: model.engine is not allowed with array"
    assert msg.ARRAY_SIZE == "array.size must be from 1 to 10000"


@pytest.mark.parametrize("size", [1, 2, 9999, 10000])
def test_array_size_valid_at_its_edges(size):
    assert validate_data(_doc({"array": {"size": size}})) == []


@pytest.mark.parametrize("size", [0, 10001, -1, 2**40])
def test_array_size_invalid_beyond_its_edges(size):
    assert _found(_doc({"array": {"size": size}})) == [(ErrorType.invalid, "spec.array.size", msg.ARRAY_SIZE)]


@pytest.mark.parametrize("size", [1, 10, 10000])
@pytest.mark.parametrize("offset", ["zero", "size"])
def test_max_parallel_valid_at_its_edges(size, offset):
    max_parallel = 0 if offset == "zero" else size
    assert validate_data(_doc({"array": {"size": size, "max_parallel": max_parallel}})) == []


@pytest.mark.parametrize("size", [1, 10, 10000])
@pytest.mark.parametrize("beyond", ["minus-1", "size-plus-1"])
def test_max_parallel_invalid_beyond_its_edges(size, beyond):
    max_parallel = -1 if beyond == "minus-1" else size + 1
    assert _found(_doc({"array": {"size": size, "max_parallel": max_parallel}})) == [
        (
            ErrorType.invalid,
            "spec.array.max_parallel",
            f"array.max_parallel must be from 0 (no cap) to array.size ({size})",
        )
    ]


def _tt(**fields: Any) -> dict[str, Any]:
    return {"task_template": {"image": "busybox", **fields}}


def _res(**resources: Any) -> dict[str, Any]:
    return _tt(requested_resources=resources)


GPUS = {"gpu_requests": {"count": 8}}

RULE_CASES = [
    pytest.param(
        {"start": "Gang", "policy": "Gang"},
        ErrorType.forbidden,
        "spec.policy",
        msg.START_AND_POLICY,
        id="start+policy",
    ),
    pytest.param(
        {**_tt(), "task_groups": [_group("a")]},
        ErrorType.forbidden,
        "spec.task_template",
        msg.TEMPLATE_AND_GROUPS,
        id="template+groups",
    ),
    pytest.param(
        {"start": "Gang", "task_template": None},
        ErrorType.invalid,
        "spec.task_template",
        "must be a mapping, not null",
        id="template-null",
    ),
    pytest.param(
        {"start": "MinAvailable"},
        ErrorType.required,
        "spec.min_available",
        msg.MIN_AVAILABLE,
        id="minavailable-missing",
    ),
    pytest.param(
        {"policy": "MinAvailable", "min_available": 0},
        ErrorType.invalid,
        "spec.min_available",
        msg.MIN_AVAILABLE,
        id="minavailable-0",
    ),
    pytest.param(
        {"task_groups": [_group("server"), _group("client", start_after="sever")]},
        ErrorType.invalid,
        "spec.task_groups[1].start_after",
        msg.GROUP_START_AFTER_UNKNOWN.format(name="sever", groups="client, server"),
        id="start_after-unknown",
    ),
    pytest.param(
        {"task_groups": [_group("a", start_after="a")]},
        ErrorType.invalid,
        "spec.task_groups[0].start_after",
        msg.GROUP_START_AFTER_SELF,
        id="start_after-self",
    ),
    pytest.param(
        {"task_groups": [_group("a", start_after="b"), _group("b", start_after="a")]},
        ErrorType.invalid,
        "spec.task_groups[0].start_after",
        msg.GROUP_CYCLE.format(cycle="a → b → a"),
        id="start_after-cycle",
    ),
    pytest.param(
        {"start": "Gang", "task_groups": [_group("ps"), _group("trainer", start_after="ps")]},
        ErrorType.forbidden,
        "spec.task_groups[1].start_after",
        msg.GANG_START_AFTER,
        id="gang-with-start_after",
    ),
    pytest.param(
        {"task_groups": [_group("w"), _group("w")]},
        ErrorType.duplicate,
        "spec.task_groups[1].name",
        msg.GROUP_DUPLICATE.format(name="w"),
        id="group-duplicate",
    ),
    pytest.param(
        {
            "task_groups": [
                {"name": "a", "task_template": {"image": "x", "requested_resources": {"machines": 2}}}
            ]
        },
        ErrorType.forbidden,
        "spec.task_groups[0].task_template.requested_resources.machines",
        msg.GROUP_MACHINES,
        id="group-machines",
    ),
    pytest.param(
        _res(machines=3, gpu_requests={"count": 16}),
        ErrorType.invalid,
        "spec.task_template.requested_resources.machines",
        msg.MACHINES_DIVIDE.format(machines=3, count=16),
        id="machines-divide",
    ),
    pytest.param(
        _res(gpu_requests={"count": 4, "min_per_machine": 8}),
        ErrorType.invalid,
        "spec.task_template.requested_resources.gpu_requests.min_per_machine",
        msg.MIN_PER_MACHINE_ABOVE_COUNT.format(k=8, count=4),
        id="min_per_machine",
    ),
    pytest.param(
        _res(per_gpu={"cpu_cores": 12}),
        ErrorType.forbidden,
        "spec.task_template.requested_resources.per_gpu",
        msg.PER_GPU_WITHOUT_GPUS,
        id="per_gpu-without-gpus",
    ),
    pytest.param(
        _res(cpu_cores=8, per_gpu={"cpu_cores": 12}, **GPUS),
        ErrorType.forbidden,
        "spec.task_template.requested_resources.per_gpu.cpu_cores",
        msg.CPU_TWICE,
        id="cpu-twice",
    ),
    pytest.param(
        _res(memory_bytes="1Gi", per_gpu={"memory_bytes": "2Gi"}, **GPUS),
        ErrorType.forbidden,
        "spec.task_template.requested_resources.per_gpu.memory_bytes",
        msg.MEMORY_TWICE,
        id="memory-twice",
    ),
    pytest.param(
        _tt(env={"WORLD_SIZE": "2"}),
        ErrorType.forbidden,
        "spec.task_template.env.WORLD_SIZE",
        msg.ENV_RESERVED.format(name="WORLD_SIZE"),
        id="env-reserved",
    ),
    pytest.param(
        _tt(datavolume_refs=[{"name": "a", "mount_path": "/d"}, {"name": "b", "mount_path": "/d"}]),
        ErrorType.duplicate,
        "spec.task_template.datavolume_refs[1].mount_path",
        msg.MOUNT_PATH_DUPLICATE.format(path="/d"),
        id="mount_path-duplicate",
    ),
    pytest.param(
        {"task_groups": [_group("g" * 57, replicas=100)]},
        ErrorType.invalid,
        "spec.task_groups[0].name",
        msg.WORKER_NAME_TOO_LONG.format(example=f"run-{'g' * 57}-99", length=64),
        id="worker-name-64",
    ),
    pytest.param({}, ErrorType.required, "spec.task_template", msg.NO_TEMPLATE, id="no-template"),
    pytest.param(
        _tt(env={"PORT": 8080}),
        ErrorType.invalid,
        "spec.task_template.env.PORT",
        msg.ENV_VALUE,
        id="env-not-a-string",
    ),
    pytest.param(
        _tt(time_limit_seconds="12 hours"),
        ErrorType.invalid,
        "spec.task_template.time_limit_seconds",
        msg.DURATION,
        id="time-12-hours",
    ),
    pytest.param(
        _res(memory_bytes="-1Gi"),
        ErrorType.invalid,
        "spec.task_template.requested_resources.memory_bytes",
        msg.BYTES,
        id="memory-minus-1Gi",
    ),
    pytest.param(
        _res(memory_bytes="1.5.3"),
        ErrorType.invalid,
        "spec.task_template.requested_resources.memory_bytes",
        msg.BYTES,
        id="memory-1.5.3",
    ),
]


@pytest.mark.parametrize("spec, type_, path, message", RULE_CASES)
def test_rule_messages(spec, type_, path, message):
    # a spec without task_template (or with task_template: null) is the case itself: keep it so
    raw = not spec or spec.get("task_template", ...) is None
    doc = {"metadata": {"name": "run"}, "spec": spec} if raw else _doc(spec)
    assert _found(doc) == [(type_, path, message)]


def test_worker_name_at_the_limit_is_valid():
    # run-<56 g>-99 is 63 characters: it fits
    assert validate_data(_doc({"task_groups": [_group("g" * 56, replicas=100)]})) == []


def test_every_problem_is_reported_not_only_the_first():
    doc = {
        "metadata": {"name": "run", "colour": "red"},
        "spec": {
            "start": "Gang",
            "lifetime": "Service",
            "array": {"size": 0},
            "task_template": {"image": "busybox", "env": {"RANK": "0"}},
        },
    }
    assert [(e.type, str(e.path)) for e in validate_data(doc)] == [
        (ErrorType.unknown, "metadata.colour"),
        (ErrorType.invalid, "spec.array.size"),
        (ErrorType.forbidden, "spec.lifetime"),
        (ErrorType.forbidden, "spec.start"),
        (ErrorType.forbidden, "spec.task_template.env.RANK"),
    ]


def test_a_wrong_type_says_so():
    """A string where an integer belongs is a type error, not a range error."""
    assert _found(_doc({"array": {"size": "10"}})) == [
        (ErrorType.invalid, "spec.array.size", 'must be an integer, not the string "10"')
    ]
    assert _found(_doc({"array": {"size": 10, "max_parallel": True}})) == [
        (ErrorType.invalid, "spec.array.max_parallel", "must be an integer, not the boolean true")
    ]


# ---- loading: file-level problems --------------------------------------------------------------


def _load_errors(path: Path) -> list[FieldError]:
    docs, errors = load_file(path)
    assert docs == []
    return errors


@pytest.mark.parametrize(
    "name, type_, where, words",
    [
        ("empty.yaml", ErrorType.file, (1, 1), "the file is empty"),
        ("only-comments.yaml", ErrorType.invalid, (1, 1), "this document is empty"),
        ("top-level-list.yaml", ErrorType.invalid, (1, 1), "this document is a list"),
        ("top-level-list.json", ErrorType.invalid, (1, 1), "this document is a list"),
        ("not-utf8.yaml", ErrorType.file, (5, 15), "not UTF-8 (byte 0xe9"),
        ("duplicate-key.yaml", ErrorType.duplicate, (6, 5), "duplicate key 'image' (first at line 5)"),
        (
            "duplicate-key.json",
            ErrorType.duplicate,
            (5, 5),
            "duplicate key 'task_template' (first at line 4)",
        ),
        ("tabs.yaml", ErrorType.syntax, (2, 2), "indent with spaces, not tabs"),
        ("syntax-unclosed-bracket.yaml", ErrorType.syntax, (6, 11), "YAML syntax error"),
        ("syntax-bad-indentation.yaml", ErrorType.syntax, (3, 2), "YAML syntax error"),
        ("trailing-comma.json", ErrorType.syntax, (4, 41), "trailing comma: remove it"),
        ("syntax-missing-colon.json", ErrorType.syntax, (2, 23), "JSON syntax error"),
    ],
)
def test_file_level_problems(name, type_, where, words):
    (error,) = _load_errors(CORPUS / "invalid" / name)
    assert error.type is type_
    assert (error.line, error.column) == where
    assert words in error.message


def test_multi_document_second_bad():
    docs, errors = load_file(CORPUS / "invalid" / "multi-document-second-bad.yaml")
    assert errors == []
    assert [validate_data(d.data) == [] for d in docs] == [True, False]
    assert [(e.type, str(e.path)) for e in validate_data(docs[1].data)] == [
        (ErrorType.invalid, "spec.array.size")
    ]


def test_yaml_1_2_strings_stay_strings():
    (doc,) = load_file(CORPUS / "valid" / "env-yaml-1.2-strings.yaml")[0]
    env = doc.data["spec"]["task_template"]["env"]
    assert env == {
        "VERBOSE": "yes",
        "CACHE": "on",
        "COLOR": "off",
        "DRY_RUN": "no",
        "ANSWER": "y",
        "NORWAY": "NO",
        "PORT": "8080",
    }
    assert doc.data["metadata"]["labels"] == {"enabled": "yes"}


# ---- hostile inputs, made at test time ---------------------------------------------------------


def _alias_bomb(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels + 1):
        refs = ", ".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    body = "\n".join("  " + line for line in lines)
    return f"metadata:\n  name: bomb\n  annotations:\n{body}\nspec:\n  task_template:\n    image: busybox\n"


ALIAS_MESSAGE = (
    f"YAML aliases expand to more than {msg.MAX_ALIAS_EVENTS} values (an alias bomb?): "
    "write the values out instead"
)
MB = 1024 * 1024


def test_alias_bomb_fails_with_one_clear_error_in_bounded_memory(tmp_path, capsys, monkeypatch):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(_alias_bomb())
    monkeypatch.chdir(tmp_path)
    tracemalloc.start()
    try:
        code, out, err = _astra(capsys, "validate", "bomb.yaml")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert code == 1
    assert out == f"bomb.yaml:1:1: {ALIAS_MESSAGE}\n"
    assert err == "1 problem in 1 of 1 files\n"
    assert peak < 200 * MB


def test_alias_bomb_peak_memory_of_a_whole_process(tmp_path):
    """tracemalloc sees Python's allocations only; the loaders are native: measure a process too."""
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(_alias_bomb())
    # VmHWM is this process's own peak (ru_maxrss would keep the forking pytest's across exec)
    script = (
        "import sys\n"
        "from reconciler.cli.app import run\n"
        "code = run(['validate', sys.argv[1]])\n"
        "hwm = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]\n"
        "print('maxrss', hwm, file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    # the timeout only keeps a hang from hanging the suite; it asserts nothing about speed
    done = subprocess.run(
        [sys.executable, "-c", script, str(bomb)], capture_output=True, text=True, timeout=600, cwd=ROOT
    )
    assert done.returncode == 1
    assert done.stdout == f"{bomb}:1:1: {ALIAS_MESSAGE}\n"
    assert "Traceback" not in done.stderr
    (maxrss,) = [int(line.split()[1]) for line in done.stderr.splitlines() if line.startswith("maxrss ")]
    assert maxrss * 1024 < 200 * MB  # VmHWM is in KiB


def test_a_small_alias_is_fine(tmp_path, capsys, monkeypatch):
    f = tmp_path / "alias.yaml"
    f.write_text(
        "metadata:\n  name: alias\n  labels: &labels\n    team: ml\n  annotations: *labels\n"
        "spec:\n  task_template:\n    image: busybox\n"
    )
    monkeypatch.chdir(tmp_path)
    assert _astra(capsys, "validate", "alias.yaml")[:2] == (0, "")


def test_file_over_10_mb_is_refused(tmp_path, capsys, monkeypatch):
    big = tmp_path / "big.yaml"
    head = b"metadata:\n  name: big\nspec:\n  task_template:\n    image: busybox\n"
    with open(big, "wb") as f:
        f.write(head)
        f.write(b"#" * (msg.MAX_FILE_BYTES + 1 - len(head)))
    assert big.stat().st_size == msg.MAX_FILE_BYTES + 1
    monkeypatch.chdir(tmp_path)
    code, out, err = _astra(capsys, "validate", "big.yaml")
    assert code == 1
    assert out == (
        "big.yaml:1:1: the file is 10485761 bytes; a spec file may be at most 10485760 bytes (10 MiB): "
        "split it into several files\n"
    )
    assert "Traceback" not in err


def test_file_of_exactly_10_mib_is_read(tmp_path):
    f = tmp_path / "edge.yaml"
    head = b"metadata:\n  name: edge\nspec:\n  task_template:\n    image: busybox\n"
    f.write_bytes(head + b"#" * (msg.MAX_FILE_BYTES - len(head)))
    docs, errors = load_file(f)
    assert errors == [] and len(docs) == 1


def test_a_spec_given_through_a_pipe_is_read_whole(tmp_path):
    """A file that is no regular file (a FIFO, `<(…)` in a shell) has no size: it is read to its
    end, past the first chunk, and refused once it passes the limit, as a regular file is."""
    head = b"metadata:\n  name: piped\nspec:\n  task_template:\n    image: busybox\n"
    for size, refused in ((200_000, False), (msg.MAX_FILE_BYTES + 1, True)):
        fifo = tmp_path / f"piped-{size}.yaml"
        os.mkfifo(fifo)
        writer = threading.Thread(target=fifo.write_bytes, args=(head + b"#" * (size - len(head)),))
        writer.start()
        try:
            docs, errors = load_file(fifo)
        finally:
            writer.join()
        if refused:
            assert docs == [] and len(errors) == 1
            assert errors[0].message.startswith(f"the file is {msg.MAX_FILE_BYTES + 1} bytes")
        else:
            assert errors == [] and [d.name for d in docs] == ["piped"]


def test_a_folder_is_found_in_the_order_of_sorted_paths(tmp_path):
    """The files of a folder come in the order of sorted ``Path`` objects (component by component:
    ``a/x.yaml`` before ``a-b.yaml``, though ``-`` sorts before ``/``), hidden names and other
    suffixes left out: the order in which validate and plan read them, and name a duplicate's
    first file."""
    names = [
        "a-b.yaml",
        "a/x.yaml",
        "a.yml",
        "a/B/c.json",
        "a/b.yaml",
        "B.yaml",
        "b/a.yaml",
        "Z/z.yaml",
        "z.YAML",
        "ab/.hidden.yaml",
        ".git/x.yaml",
        "a/notes.txt",
        "_/x.yaml",
    ]
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("metadata: {name: x}\n")
    files, errors = find_files([tmp_path])
    expected = sorted(
        p
        for p in tmp_path.rglob("*")
        if p.suffix in (".yaml", ".yml", ".json")
        and not any(s.startswith(".") for s in p.relative_to(tmp_path).parts)
    )
    assert errors == [] and files == [str(p) for p in expected]
    assert files.index(str(tmp_path / "a" / "x.yaml")) < files.index(str(tmp_path / "a-b.yaml"))


# ---- one source: pydantic agrees with the schema and rules ----------------------------------------


@pytest.mark.parametrize("path", VALID + EXAMPLES, ids=lambda p: _rel(p))
def test_valid_files_parse(path):
    """parse_run takes a whole run spec: a document that names a template is parsed once rendered
    (the templates' tests cover that), so only whole run specs are parsed here."""
    docs, errors = load_file(path)
    assert errors == [] and docs
    whole = [d for d in docs if "template" not in d.data]
    for doc in whole:
        assert isinstance(parse_run(doc.data), Run)


def _refused_by_pydantic(data: Any) -> bool:
    try:
        Run.model_validate(data)
    except ValidationError:
        return True
    return False


@pytest.mark.parametrize("path", INVALID + VALID, ids=lambda p: _rel(p))
def test_pydantic_and_the_schema_agree_on_the_corpus(path):
    docs, _ = load_file(path)
    for doc in docs:
        schema_refuses = bool(validate_data(doc.data))
        assert _refused_by_pydantic(doc.data) == schema_refuses, f"document {doc.index} of {path.name}"


def test_every_invalid_document_that_loads_is_refused_by_pydantic():
    refused = 0
    for path in INVALID:
        docs, errors = load_file(path)
        bad = [d for d in docs if validate_data(d.data)]
        assert errors or bad, f"{path.name} is not invalid"
        for doc in bad:
            assert _refused_by_pydantic(doc.data), f"pydantic accepts {path.name}"
            refused += 1
    assert refused >= 45


def _maybe(strategy: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(st.just(...), strategy)


INTS = st.one_of(
    st.integers(-3, 10_003),
    st.sampled_from([0, 1, 2, 9_999, 10_000, 10_001, 2**31, -(2**31)]),
    st.booleans(),
    st.sampled_from(["10", "1", " 3", "1e3", "", "ten"]),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-5, max_value=20),
    st.sampled_from([2.0, 0.0, 10000.0, 1.5]),
    st.none(),
)
BYTES = st.one_of(
    st.from_regex(r"\A-?[0-9]{1,4}(\.[0-9]{0,3})?[KMGTPkmgtp]?i?[Bb]?\Z"),
    st.text(alphabet="0123456789.-+KMGTPib ", max_size=8),
    st.integers(-(2**10), 2**50),
    st.sampled_from(["120Gi", "32G", "512Mi", "1.5Gi", "0", "0Gi", "00", "0.5", "1.", ".5Gi", "1e9"]),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
)
DURATIONS = st.one_of(
    st.from_regex(r"\A([0-9]{1,3}[dhms]){0,4}\Z"),
    st.from_regex(r"\A([0-9]{1,2}-)?[0-9]{1,3}(:[0-9]{1,2}){0,2}\Z"),
    st.text(alphabet="0123456789dhms:- ", max_size=10),
    st.integers(-5, 10**9),
    st.sampled_from(["12h", "90m", "1h30m", "1:00:00", "0s", "0", "0:00", "0-0", "0d0h", "1-0", "12 hours"]),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-2, max_value=1e6),
)
STARTS = st.sampled_from(["Gang", "MinAvailable", "Independent", "gang", "", 1, None])


@st.composite
def documents(draw) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if draw(st.booleans()):
        array = {"size": draw(INTS)}
        max_parallel = draw(_maybe(INTS))
        if max_parallel is not ...:
            array["max_parallel"] = max_parallel
        spec["array"] = array
    for key in ("start", "policy"):
        value = draw(_maybe(STARTS))
        if value is not ...:
            spec[key] = value
    min_available = draw(_maybe(INTS))
    if min_available is not ...:
        spec["min_available"] = min_available
    template: dict[str, Any] = {"image": "busybox"}
    time_limit = draw(_maybe(DURATIONS))
    if time_limit is not ...:
        template["time_limit_seconds"] = time_limit
    resources: dict[str, Any] = {}
    for key in ("memory_bytes", "cpu_cores"):
        value = draw(_maybe(BYTES if key == "memory_bytes" else INTS))
        if value is not ...:
            resources[key] = value
    if draw(st.booleans()):
        gpus = {"count": draw(INTS)}
        healthy_only = draw(_maybe(st.sampled_from([True, False, "yes", "true", 1, 0, None])))
        if healthy_only is not ...:
            gpus["healthy_only"] = healthy_only
        resources["gpu_requests"] = gpus
        per_gpu = draw(_maybe(BYTES))
        if per_gpu is not ...:
            resources["per_gpu"] = {"memory_bytes": per_gpu}
    if resources:
        template["requested_resources"] = resources
    spec["task_template"] = template
    return {"metadata": {"name": "prop"}, "spec": spec}


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents())
def test_validate_data_agrees_with_pydantic(doc):
    errors = validate_data(doc)
    assert _refused_by_pydantic(doc) == bool(errors), [e.format() for e in errors]


# ---- the pre-commit hook -----------------------------------------------------------------------


def test_pre_commit_hook_names_astra_validate():
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    (hook,) = [h for h in hooks if h["id"] == "astra-validate"]
    assert hook["entry"] == "astra validate"
    assert hook["language"] == "python"
    assert hook["pass_filenames"] is True
    files = re.compile(hook["files"])
    for name in ("run.yaml", "a/b/run.yml", "sweep.json"):
        assert files.search(name), name
    for name in ("run.py", "README.md", "yaml"):
        assert not files.search(name), name


def test_environment_is_clean_of_templates_in_corpus():
    """The corpus holds run specs only: no document names a template (those have their own tests)."""
    for path in INVALID + VALID:
        docs, _ = load_file(path)
        assert not any(isinstance(d.data, dict) and "template" in d.data for d in docs), path.name


def test_groups_that_start_one_after_another_default_to_independent():
    """start left out: Gang for a run of groups that may span machines, unless one waits for another."""
    from reconciler.runspec.models import resolve_start
    from reconciler.runspec.parse import parse_run

    def run(groups):
        return parse_run({"metadata": {"name": "r"}, "spec": {"task_groups": groups}}).spec

    assert resolve_start(run([_group("ps"), _group("trainer")])) == "Gang"
    assert resolve_start(run([_group("ps"), _group("trainer", start_after="ps")])) == "Independent"
