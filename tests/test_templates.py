"""Templates: rendering, merging, --template/--set, every error with its file and line, the sandbox.

CLI tests run in-process (``reconciler.cli.app.run``) from the repo root, with the bad templates
of ``tests/test_templates_cases/templates`` on ASTRA_TEMPLATE_PATH, so that every path printed is
relative and every snapshot stable. Snapshots never replace the focused assertions beside them.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.cli.app import run
from reconciler.desired import load_desired
from reconciler.runspec.loading import load_file
from reconciler.runspec.parse import parse_run
from reconciler.templates import (
    NOT_ALLOWED,
    Parameter,
    TemplateLibrary,
    budget,
    load_template,
    merge,
    parse_sets,
    render,
    resolve_parameters,
    type_error,
)

CASES = "tests/test_templates_cases"


@pytest.fixture(autouse=True)
def at_root(root, monkeypatch):
    monkeypatch.chdir(root)
    monkeypatch.setenv("ASTRA_TEMPLATE_PATH", f"{CASES}/templates")


def cli(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = run(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def seed(name: str):
    (doc,), errors = load_file(f"docs/seeds/{name}.yaml")
    assert not errors
    return parse_run(doc.data)


def final_runs(*paths: str, **flags):
    desired = load_desired(paths, **flags)
    assert [e.format() for e in desired.errors] == []
    return [parse_run(r.data) for r in desired.runs]


# ---- the done-when: both ways render to the hand-written seed ---------------------------------


def test_template_block_renders_to_the_seeds_llama_ft():
    assert final_runs("examples/templated/llama-ft.yaml") == [seed("llama-ft")]


def test_template_block_renders_to_the_seeds_sweep():
    assert final_runs("examples/templated/sweep.yaml") == [seed("sweep")]


def test_plain_spec_with_template_flags_renders_to_the_seeds_llama_ft():
    runs = final_runs(f"{CASES}/plain.yaml", template="gang", sets=["gpus=16"])
    assert runs == [seed("llama-ft")]


def test_flags_that_agree_with_the_file_are_accepted():
    runs = final_runs("examples/templated/llama-ft.yaml", template="gang", sets=["gpus=16"])
    assert runs == [seed("llama-ft")]


def test_validate_examples_passes_with_templates(capsys):
    code, out, err = cli(capsys, "validate", "examples/")
    assert (code, out) == (0, "")
    assert "are valid" in err


def test_render_matches_render_of_the_seed(capsys):
    templated = cli(capsys, "template", "render", "-f", "examples/templated/llama-ft.yaml")
    flags = cli(
        capsys, "template", "render", "-f", f"{CASES}/plain.yaml", "--template", "gang", "--set", "gpus=16"
    )
    assert templated[0] == flags[0] == 0
    assert templated[1] == flags[1]


# ---- render output (snapshots, with assertions) ------------------------------------------------


@pytest.mark.parametrize("example", ["llama-ft", "sweep", "llm-server"])
def test_render_yaml(capsys, snapshot, example):
    code, out, err = cli(capsys, "template", "render", "-f", f"examples/templated/{example}.yaml")
    assert (code, err) == (0, "")
    assert out.startswith("metadata:\n")
    assert "\ntemplate:" not in out
    assert out == snapshot


def test_render_several_is_a_stream_and_json_a_list(capsys, snapshot):
    code, out, _ = cli(capsys, "template", "render", "-f", "examples/templated/")
    assert code == 0
    assert out.count("---\n") == 2
    code, out, _ = cli(capsys, "template", "render", "-f", "examples/templated/", "-o", "json")
    docs = json.loads(out)
    assert [d["metadata"]["name"] for d in docs] == ["llama-ft", "llm-server", "sweep"]
    assert docs[0]["spec"]["task_template"]["requested_resources"]["gpu_requests"]["count"] == 16
    assert list(docs[0]) == ["metadata", "spec"]
    assert out == snapshot


def test_render_is_deterministic(capsys):
    first = cli(capsys, "template", "render", "-f", "examples/")
    second = cli(capsys, "template", "render", "-f", "examples/")
    assert first == second


def test_render_explain(capsys, snapshot):
    code, out, _ = cli(capsys, "template", "render", "-f", "examples/templated/sweep.yaml", "--explain")
    assert code == 0
    lines = out.splitlines()
    assert any(
        line.startswith("templates/sweep.yaml:") and "spec.task_template.image" in line for line in lines
    )
    assert any(
        line.startswith("examples/templated/sweep.yaml:9:11") and "spec.array.size = 100" in line
        for line in lines
    )
    assert any(
        line.startswith("examples/templated/sweep.yaml:") and "cpu_cores = 8" in line for line in lines
    )
    assert out == snapshot


def test_render_explain_json_names_the_command_line(capsys):
    code, out, _ = cli(
        capsys, "template", "render", "-f", f"{CASES}/plain.yaml", "--template", "gang", "--set", "gpus=32",
        "--explain", "-o", "json",
    )  # fmt: skip
    assert code == 0
    (explained,) = json.loads(out)
    count = next(f for f in explained["fields"] if f["path"].endswith("gpu_requests.count"))
    assert count["value"] == 32
    assert count["file"] == "<command line>"
    assert count["from"] == "--set gpus=32"
    assert count["parameter"] == "gpus"
    assert count["via"].startswith("templates/gang.yaml:")


def test_list_and_show(capsys, snapshot, monkeypatch):
    monkeypatch.delenv("ASTRA_TEMPLATE_PATH")
    code, out, _ = cli(capsys, "template", "list")
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()] == ["NAME", "gang", "service", "sweep"]
    assert out == snapshot(name="list")
    code, out, _ = cli(capsys, "template", "list", "-o", "json")
    assert [t["name"] for t in json.loads(out)] == ["gang", "service", "sweep"]
    code, out, _ = cli(capsys, "template", "show", "gang")
    assert code == 0 and "gpus" in out and "(required)" in out
    assert out == snapshot(name="show")
    code, out, _ = cli(capsys, "template", "show", "sweep", "-o", "yaml")
    assert code == 0 and out.startswith("name: sweep\n")
    code, out, _ = cli(capsys, "template", "show", "service", "-o", "json")
    assert json.loads(out)["parameters"]["image"]["required"] is True


def test_shipped_templates_start_with_the_schema_modeline(root):
    for path in sorted((root / "templates").glob("*.yaml")):
        assert path.read_text().startswith("# yaml-language-server: $schema=../schema/template.schema.json\n")
        template, errors = load_template(path)
        assert errors == [] and template is not None
    for path in sorted((root / "examples" / "templated").glob("*.yaml")):
        assert path.read_text().startswith("# yaml-language-server: $schema=../../schema/run.schema.json\n")


# ---- every error, with its file and line ------------------------------------------------------

ERROR_CASES = {
    "unknown-parameter": ["validate", f"{CASES}/unknown-parameter.yaml"],
    "wrong-types": ["validate", f"{CASES}/wrong-types.yaml"],
    "missing-template": ["validate", f"{CASES}/missing-template.yaml"],
    "merged-errors": ["validate", f"{CASES}/merged-errors.yaml"],
    "removed-required": ["validate", f"{CASES}/removed-required.yaml"],
    "broken-template": ["validate", f"{CASES}/uses-broken.yaml"],
    "sandbox-at-render": ["validate", f"{CASES}/uses-escape.yaml"],
    "misnamed-template": ["validate", f"{CASES}/uses-misnamed.yaml"],
    "flag-template-disagrees": ["validate", "examples/templated/llama-ft.yaml", "--template", "sweep"],
    "flag-set-disagrees": ["validate", "examples/templated/llama-ft.yaml", "--set", "gpus=8"],
    "flag-missing-required": ["validate", f"{CASES}/plain.yaml", "--template", "gang"],
    "flag-unknown-template": ["validate", f"{CASES}/plain.yaml", "--template", "gangg"],
    "flag-set-errors": [
        "validate",
        f"{CASES}/plain.yaml",
        "--template",
        "gang",
        "--set",
        "gpus",
        "--set",
        "x=[1,",
    ],
    "flag-set-wrong-type": ["validate", f"{CASES}/plain.yaml", "--template", "gang", "--set", "gpus=yes"],
    "flag-set-bad-value": ["validate", f"{CASES}/plain.yaml", "--template", "gang", "--set", "gpus=0"],
    "flag-set-without-template": ["validate", "examples/laptop/", "--set", "gpus=16"],
    "render-errors": ["template", "render", "-f", f"{CASES}/merged-errors.yaml"],
}


@pytest.mark.parametrize("case", list(ERROR_CASES))
def test_error_output(capsys, snapshot, case):
    code, out, err = cli(capsys, *ERROR_CASES[case])
    assert code == 1
    text = out + err
    assert "Traceback" not in text
    problems = [
        line for line in text.splitlines() if not line.startswith("astra: error:") and "problem" not in line
    ]
    for line in problems:  # every error names its file (or the command line), and its line
        assert line.startswith((CASES, "templates/", "examples/", "<command line>: ")), line
    assert text == snapshot


def errors_of(*paths: str, **flags) -> list[str]:
    return [e.format() for e in load_desired(paths, **flags).errors]


def test_unknown_parameter_suggests_and_missing_is_named():
    errors = errors_of(f"{CASES}/unknown-parameter.yaml")
    unknown = "template.parameters.gpu: template 'gang' has no parameter 'gpu'; did you mean 'gpus'?"
    assert f"{CASES}/unknown-parameter.yaml:7:5: {unknown}" in errors
    assert any(":6:3: template.parameters.gpus: template 'gang' needs parameter 'gpus'" in e for e in errors)


def test_bool_is_not_an_integer():
    errors = errors_of(f"{CASES}/wrong-types.yaml")
    wrong = "template.parameters.gpus: parameter 'gpus' must be an integer, not the boolean true"
    assert f"{CASES}/wrong-types.yaml:7:11: {wrong}" in errors


def test_errors_point_at_the_template_or_the_run_spec():
    errors = errors_of(f"{CASES}/merged-errors.yaml")
    # from the template: gang's start: Gang, refused with an array that the run spec added
    assert (
        "templates/gang.yaml:33:3: spec.start: An array's workers are independent: use policy Independent"
        in errors
    )
    # from the run spec's parameter values, through "{{ gpus }}"
    count = "spec.task_template.requested_resources.gpu_requests.count: must be at least 1, not 0"
    assert f"{CASES}/merged-errors.yaml:8:11: {count} (parameter 'gpus' of template 'gang')" in errors
    # the run spec itself is checked before the merge
    assert any(
        e.startswith(f"{CASES}/merged-errors.yaml:24:5: spec.task_template.imagee: unknown field")
        for e in errors
    )


def test_missing_required_field_points_at_the_run_specs_nearest_parent():
    errors = errors_of(f"{CASES}/removed-required.yaml")
    missing = "spec.task_template.image: missing required field 'image': add it"
    assert errors == [f"{CASES}/removed-required.yaml:10:5: {missing}"]


def test_template_not_found_names_folders_and_templates():
    (error,) = errors_of(f"{CASES}/missing-template.yaml")
    assert error.startswith(f"{CASES}/missing-template.yaml:4:9: template.name: no template named 'gangg'")
    assert f"(searched {CASES}/templates/, ./templates/ (shipped with astra))" in error
    assert "did you mean 'gang'?" in error
    assert "templates found: broken, escape, gang, misnamed, service, sweep" in error


def test_syntax_error_has_the_templates_line_and_column():
    errors = errors_of(f"{CASES}/uses-broken.yaml")
    broken = f"{CASES}/templates/broken.yaml"
    assert any(
        e.startswith(f"{broken}:11:12: spec.task_template.image: template syntax error:") for e in errors
    )
    # a block scalar: its second line is the file's line 21
    assert any(
        e.startswith(f"{broken}:21:9: spec.task_template.args[5]: template syntax error:") for e in errors
    )
    # the template's problems are reported once; the second run says where they are
    assert sum(e.startswith(broken) for e in errors) == 9
    assert (
        f"{CASES}/uses-broken.yaml:9:9: template.name: template 'broken' has problems: see {broken}" in errors
    )


def test_disagreements_are_refused():
    (error,) = errors_of("examples/templated/llama-ft.yaml", template="sweep")
    assert "this run uses template 'gang' but --template says 'sweep'" in error
    (error,) = errors_of("examples/templated/llama-ft.yaml", sets=["gpus=8"])
    assert error.startswith(
        "examples/templated/llama-ft.yaml:9:11: template.parameters.gpus: --set gpus=8 disagrees"
    )


# ---- parameters -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind, good, bad",
    [
        ("integer", [0, 16, -1], [True, False, 1.5, "16", None]),
        ("number", [1, 2.5], [True, "2.5"]),
        ("boolean", [True, False], [0, 1, "true"]),
        ("string", ["x", ""], [1, True, ["x"]]),
        ("list", [[], [1, "a"]], [{}, "a"]),
        ("map", [{}, {"a": 1}], [[], "a"]),
    ],
)
def test_type_check(kind, good, bad):
    p = Parameter("p", kind)
    assert [type_error(p, v) for v in good] == [None] * len(good)
    assert all(type_error(p, v) for v in bad)


def test_set_values_are_yaml_1_2():
    values, errors = parse_sets(
        ["a=16", "b=[x, y]", "c={k: 1}", "d=yes", "e=-c", "f='16'", "g=2.5", "h=true"]
    )
    assert errors == []
    got = {k: v for k, (v, _) in values.items()}
    assert got == {
        "a": 16,
        "b": ["x", "y"],
        "c": {"k": 1},
        "d": "yes",
        "e": "-c",
        "f": "16",
        "g": 2.5,
        "h": True,
    }


def test_set_given_twice_differently_is_refused():
    _, errors = parse_sets(["a=1", "a=2"])
    assert [e.message for e in errors] == ["--set a is given twice, with different values: give it once"]


# ---- rendering keeps types; the sandbox -------------------------------------------------------


def make_template(tmp_path, spec: str, parameters: str = "gpus: {type: integer, default: 8}"):
    path = tmp_path / "t.yaml"
    path.write_text(f"metadata:\n  name: t\nparameters:\n  {parameters}\nspec:\n{spec}")
    return load_template(path)


def rendered(template, **given):
    from reconciler.templates import Origin

    here = Origin.command_line("test")
    values, origins, errors = resolve_parameters(template, {k: (v, here) for k, v in given.items()}, here)
    assert errors == []
    spec, _, errors = render(template, values, origins)
    return spec, [e.message for e in errors]


def test_one_expression_keeps_its_type(tmp_path):
    spec = (
        "  priority: '{{ gpus }}'\n"
        "  min_available: '{{- gpus * 2 -}}'\n"
        "  task_template:\n"
        "    image: 'x{{ gpus }}'\n"
        "    args: ['{{ gpus }} and {{ gpus }}', '{{ gpus > 4 }}']\n"
    )
    template, errors = make_template(tmp_path, spec)
    assert errors == []
    out, errors = rendered(template, gpus=3)
    assert errors == []
    assert out == {
        "priority": 3,
        "min_available": 6,
        "task_template": {"image": "x3", "args": ["3 and 3", False]},
    }


def test_a_parameter_not_given_leaves_its_field_out(tmp_path):
    template, errors = make_template(
        tmp_path, "  task_template:\n    command: '{{ cmd }}'\n    image: x\n", "cmd: {type: string}"
    )
    assert errors == []
    assert rendered(template) == ({"task_template": {"image": "x"}}, [])


ESCAPES = [
    "{{ ''.__class__.__mro__ }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ gpus.__globals__ }}",
    "{{ x.__globals__ }}",
    "{{ cycler.__init__.__globals__ }}",
    "{{ joiner.__init__.__globals__.os }}",
    "{{ lipsum.__globals__['os'] }}",
    "{{ gpus['__class__'] }}",
    "{{ self._TemplateReference__context }}",
    "{{ self }}",
    "{{ ''.format }}{{ '{0.__class__}'.format(gpus) }}",
    "{{ gpus.bit_length() }}",
    "{% include 'x' %}",
    "{% import 'x' as y %}",
    "{% macro m() %}{% endmacro %}",
]


@pytest.mark.parametrize("expression", ESCAPES)
def test_known_escapes_are_refused_with_one_message(tmp_path, expression):
    template, errors = make_template(tmp_path, f"  task_template:\n    image: {json.dumps(expression)}\n")
    assert template is None
    messages = [e.message for e in errors]
    assert messages == [NOT_ALLOWED] or all("is not a parameter" in m for m in messages), messages
    for m in messages:  # never says what the expression touched
        assert "__" not in m and "mro" not in m and "globals" not in m and "subclasses" not in m


RUNTIME_ESCAPES = [
    ("{{ s[name] }}", {"name": "__class__"}),
    ("{{ s[name][name] }}", {"name": "__init__"}),
]


@pytest.mark.parametrize("expression, values", RUNTIME_ESCAPES)
def test_escapes_found_while_rendering_are_refused(tmp_path, expression, values):
    template, errors = make_template(
        tmp_path,
        f"  task_template:\n    image: {json.dumps(expression)}\n",
        "name: {type: string, default: x}\n  s: {type: string, default: text}",
    )
    assert errors == []
    out, messages = rendered(template, **values)
    assert out is None
    assert messages == [NOT_ALLOWED]


OVER_BUDGET = [
    ("{{ 'x' * 10000000 }}", budget.VALUE),
    ("{{ [1] * 10000000 }}", budget.VALUE),
    ("{{ 2 ** 100000 }}", budget.INTEGER),
    ("{{ (10 ** 10) ** (10 ** 10) }}", budget.INTEGER),
]


@pytest.mark.parametrize("expression, words", OVER_BUDGET)
def test_too_large_results_are_refused_naming_the_limit(tmp_path, expression, words):
    """Once refused as not allowed; a template's budget names the limit (tests/hostile has the rest)."""
    template, errors = make_template(tmp_path, f"  task_template:\n    image: {json.dumps(expression)}\n")
    assert errors == []
    assert rendered(template) == (None, [words])


def test_filters_outside_the_list_are_syntax_errors(tmp_path):
    template, errors = make_template(
        tmp_path, "  task_template:\n    image: \"{{ gpus | attr('__class__') }}\"\n"
    )
    assert template is None
    (error,) = errors
    assert error.message.startswith("template syntax error: No filter named 'attr'")
    assert (error.line, error.column) == (7, 12)


def test_filters_render(tmp_path):
    template, errors = make_template(
        tmp_path,
        "  task_template:\n"
        "    image: \"{{ name | default('x') | upper }}\"\n"
        "    args: '{{ [name, name] | unique | list }}'\n",
        "name: {type: string, default: ab}",
    )
    assert errors == []
    assert rendered(template) == ({"task_template": {"image": "AB", "args": ["ab"]}}, [])


# ---- merge ------------------------------------------------------------------------------------


def test_merge_rules():
    base = {"a": {"x": 1, "y": [1, 2], "z": "keep"}, "b": 1, "c": {"d": 1}}
    over = {"a": {"x": 2, "y": [3]}, "b": None, "c": None, "e": {"f": None, "g": 1}}
    assert merge(base, over) == {"a": {"x": 2, "y": [3], "z": "keep"}, "e": {"g": 1}}
    assert base == {"a": {"x": 1, "y": [1, 2], "z": "keep"}, "b": 1, "c": {"d": 1}}  # unchanged


def test_null_in_the_run_spec_removes_the_templates_field(tmp_path):
    runs = load_desired([f"{CASES}/removed-required.yaml"]).runs
    assert runs == []
    spec = load_desired(["examples/templated/llm-server.yaml"]).runs[0].data["spec"]
    assert "command" not in spec["task_template"]  # a parameter not given renders to nothing


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abcd"), inner, max_size=4),
    max_leaves=12,
)
rendered_specs = st.dictionaries(st.sampled_from("abcd"), json_values, max_size=4)


@given(rendered_specs)
def test_merging_with_an_empty_run_spec_gives_the_rendered_spec(a):
    assert merge(a, {}) == a


@given(json_values, json_values)
def test_merging_twice_changes_nothing(a, b):
    once = merge(a, b)
    assert merge(once, b) == once


def test_library_loads_each_template_once():
    library = TemplateLibrary()
    first = library.get("gang")
    assert library.get("gang") is first
    assert first[0] is not None and first[0].name == "gang"
