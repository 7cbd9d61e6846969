"""``astra delete`` against the control plane's own source store (issue 32): the run leaves its
source's inventory (the server's store demands the source's lock for that write), so ``astra
status`` stops counting it and the next plan creates it as new, not "planned back"."""

from __future__ import annotations

from .test_impossible_asks import cli  # noqa: F401 (a fixture: the CLI against a Plane over HTTP)

RUN = "metadata: {{name: {0}}}\nspec: {{task_template: {{image: x, command: run, time_limit_seconds: 60}}}}\n"


def test_a_run_deleted_by_astra_leaves_the_count_and_comes_back_as_new(cli, tmp_path):  # noqa: F811
    (tmp_path / "runs").mkdir()
    for name in ("keep", "gone"):
        (tmp_path / "runs" / f"{name}.yaml").write_text(RUN.format(name))
    assert cli("apply", ".", "--source", "s", "--yes")[0] == 0
    runs_column = lambda: cli("status")[1].splitlines()[1].split()[4]  # noqa: E731
    assert runs_column() == "2"
    code, out, err = cli("delete", "gone", "--yes")
    assert (code, err) == (0, "") and out.endswith("gone: deleted\n")
    assert runs_column() == "1"  # the source no longer counts it
    code, out, _ = cli("plan", ".", "--source", "s")
    assert code == 0 and "+ gone  create" in out
    assert "planned back" not in out and "outside astra" not in out
    assert cli("apply", ".", "--source", "s", "--yes")[0] == 0  # no lock was left behind
    assert runs_column() == "2"
