"""Templates are templates everywhere: validate checks a template file as a template (its schema,
and its spec rendered with its defaults); a spec's templates come from the nearest ``templates/``
upward from the spec file, then ``ASTRA_TEMPLATE_PATH``, then the ones shipped with astra."""

from __future__ import annotations

import shutil

import pytest

from reconciler.cli.app import run

from .conftest import ROOT

RUN = "metadata: {{name: {name}}}\ntemplate: {{name: {template}, parameters: {{{params}}}}}\n"
JOB = """metadata: {name: job, description: one worker}
parameters:
  gpus: {type: integer, required: true}
  memory: {type: string, default: 8Gi}
  count_as_text: {type: string, default: "1"}
spec:
  task_template:
    image: busybox
    command: "true"
    time_limit_seconds: 60
    requested_resources:
      gpu_requests: {count: "{{ gpus }}"}
      memory_bytes: "{{ memory }}"
"""


@pytest.fixture
def cli(capsys, monkeypatch):
    for var in ("ASTRA_TEMPLATE_PATH", "ASTRA_HOME"):
        monkeypatch.delenv(var, raising=False)

    def call(*argv: str, cwd) -> tuple[int, str, str]:
        monkeypatch.chdir(cwd)
        capsys.readouterr()
        code = run(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return call


def test_the_shipped_templates_validate_as_templates(cli):
    code, out, err = cli("validate", "templates/", cwd=ROOT)
    assert (code, out, err) == (0, "", "3 documents in 3 files are valid\n")


def test_a_template_is_rendered_with_its_defaults_and_its_problems_placed_in_it(cli, tmp_path):
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "job.yaml").write_text(JOB.replace("default: 8Gi", "default: lots"))
    (tmp_path / "elsewhere.yaml").write_text(
        JOB.replace("name: job", "name: other")
    )  # parameters: a template
    code, out, _ = cli("validate", ".", cwd=tmp_path)
    assert code == 1
    # where the parameter's value was given: its default, on line 4 (the template uses it on 12)
    assert out.startswith("./templates/job.yaml:4:35: spec.task_template.requested_resources.memory_bytes: ")
    assert out.endswith(" (parameter 'memory' of template 'job')\n") and out.count("\n") == 1


def test_a_spec_finds_its_repos_templates_from_any_folder(cli, tmp_path):
    repo = tmp_path / "repo"
    (repo / "templates").mkdir(parents=True)
    (repo / "runs" / "team").mkdir(parents=True)
    (repo / "templates" / "job.yaml").write_text(JOB)
    (repo / "runs" / "team" / "a.yaml").write_text(RUN.format(name="a", template="job", params="gpus: 2"))
    (repo / "runs" / "team" / "b.yaml").write_text(RUN.format(name="b", template="gang", params="gpus: 16"))
    for cwd, path, files in (
        (tmp_path, "repo", 3),
        (repo / "runs", "team", 2),
        (tmp_path.parent, tmp_path.name, 3),
    ):
        code, out, err = cli("validate", path, cwd=cwd)
        assert (code, out) == (0, ""), (cwd, out)
        assert err == f"{files} documents in {files} files are valid\n"  # runs (and the template)
    code, out, _ = cli("template", "render", "-f", "repo/runs/team/a.yaml", "-o", "json", cwd=tmp_path)
    assert code == 0 and '"count": 2' in out
    # gang is not in the repo: it is the one shipped with astra
    code, out, _ = cli("template", "render", "-f", "repo/runs/team/b.yaml", "--explain", cwd=tmp_path)
    assert code == 0 and f"{ROOT / 'templates' / 'gang.yaml'}:" in out


def test_the_nearest_templates_folder_wins_then_the_path_then_the_shipped_ones(cli, tmp_path, monkeypatch):
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "gang.yaml").write_text(JOB.replace("name: job", "name: gang"))
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "gang.yaml").write_text(JOB.replace("name: job", "name: gang").replace("busybox", "never"))
    (extra / "other.yaml").write_text(JOB.replace("name: job", "name: other").replace("busybox", "from-path"))
    monkeypatch.setenv("ASTRA_TEMPLATE_PATH", str(extra))
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "a.yaml").write_text(RUN.format(name="a", template="gang", params="gpus: 1"))
    (tmp_path / "runs" / "b.yaml").write_text(RUN.format(name="b", template="other", params="gpus: 1"))
    (tmp_path / "runs" / "c.yaml").write_text(RUN.format(name="c", template="sweep", params="size: 10"))
    code, out, err = cli("template", "render", "-f", "runs", "-o", "json", cwd=tmp_path)
    assert code == 0, err
    images = [line.strip() for line in out.splitlines() if '"image"' in line]
    assert images == [
        '"image": "busybox",',
        '"image": "from-path",',
        '"image": "nvcr.io/nvidia/pytorch:24.08-py3",',
    ]


def test_plan_does_not_take_a_template_for_a_run(cli, tmp_path, monkeypatch):
    from reconciler.clusters.fake import FakeCluster

    cluster = FakeCluster()
    monkeypatch.setattr("reconciler.cli.connect.connect", lambda server, token, **_: cluster)
    shutil.copytree(ROOT / "templates", tmp_path / "templates")
    (tmp_path / "a.yaml").write_text(RUN.format(name="a", template="sweep", params="size: 10"))
    code, out, err = cli("plan", "-f", ".", "--source", "s", "--state", "sqlite://", cwd=tmp_path)
    assert code == 0, err
    assert "+ a  create" in out and "Plan: 1 to create, 0 to update" in out
