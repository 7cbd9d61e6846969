"""The quick path of a warm ``astra plan`` (``reconciler.cli.quickplan``) against a live server:
it prints what the full plan prints, and it answers nothing once anything the plan depended on
moved (the full plan answers then, and says what changed)."""

from __future__ import annotations

import os
import subprocess

import httpx
import pytest

from reconciler import hashes
from reconciler.cli import main, planning

from .conftest import TOKEN, LiveServer, until


def spec(name: str, command: str = "true") -> str:
    return (
        f"metadata: {{name: {name}}}\n"
        f"spec: {{task_template: {{image: x, time_limit_seconds: 3600, command: '{command}'}}}}\n"
    )


@pytest.fixture
def setup(tmp_path, monkeypatch):
    """A live server holding runs a and b, applied from ``work/runs``; plans made in this process
    (a file is trusted at once: the racy window is the clock's, not the test's)."""
    work = tmp_path / "work"
    (work / "runs").mkdir(parents=True)
    for name in ("a", "b"):
        (work / "runs" / f"{name}.yaml").write_text(spec(name))
    server = LiveServer(tmp_path / "home", work).start()
    monkeypatch.chdir(work)
    monkeypatch.setattr(hashes, "RACY_NS", 0)
    for k, v in server.env.items():
        if k.startswith("ASTRA_"):
            monkeypatch.setenv(k, v)
    monkeypatch.delenv("GIT_DIR", raising=False)
    applied = server.astra("apply", "-f", "runs", "--source", "s", "--yes")
    assert applied.returncode == 0, applied.stderr
    until(lambda: _settled(server), what="the runs to end")
    yield server
    server.stop()


def _settled(server: LiveServer) -> bool:
    items = server.api("GET", "/runs", params={"view": "summary"}).json()["items"]
    return all(i["state"] in ("Completed", "Failed") for i in items)


def plan(capsys, *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as ended:
        main(["plan", "-f", "runs", "--source", "s", *args])
    return int(ended.value.code), capsys.readouterr().out


def full_plan(capsys, monkeypatch, *args: str) -> tuple[int, str]:
    with monkeypatch.context() as m:
        m.setenv("ASTRA_QUICK_PLAN", "0")
        return plan(capsys, *args)


def no_full_plan(monkeypatch):
    def refused(**_):
        raise AssertionError("the full plan ran")

    monkeypatch.setattr(planning, "plan_command", refused)


def test_a_warm_plan_is_answered_without_planning_and_prints_the_same_bytes(setup, capsys, monkeypatch):
    first = plan(capsys)  # the full plan, recorded
    assert first[0] == 0 and "No changes" in first[1]
    assert full_plan(capsys, monkeypatch) == first
    with monkeypatch.context() as m:
        no_full_plan(m)
        assert plan(capsys) == first
        assert plan(capsys, "--detailed-exitcode")[0] == 1  # another command line: not answered (the refusal)


@pytest.mark.parametrize("change", ["same size and mtime", "touched", "added", "removed"])
def test_a_file_changed_is_planned_in_full(setup, capsys, monkeypatch, change):
    plan(capsys)
    runs = setup.cwd / "runs"
    if change == "same size and mtime":
        before = os.stat(runs / "a.yaml")
        (runs / "a.yaml").write_text(spec("a", "echo"))  # as long as "true": the same size
        assert os.stat(runs / "a.yaml").st_size == before.st_size
        os.utime(runs / "a.yaml", ns=(before.st_atime_ns, before.st_mtime_ns))
    elif change == "touched":
        os.utime(runs / "a.yaml")
    elif change == "added":
        (runs / "c.yaml").write_text(spec("c"))
    else:
        (runs / "b.yaml").unlink()
    code, out = plan(capsys)
    assert (code, out) == full_plan(capsys, monkeypatch)
    expected = {
        "same size and mtime": "1 to replace",
        "touched": "No changes",
        "added": "1 to create",
        "removed": "No changes",  # not pruned: b stays, unplanned
    }[change]
    assert expected in out


def test_a_run_deleted_on_the_server_is_planned_in_full(setup, capsys, monkeypatch):
    plan(capsys)
    assert setup.api("DELETE", "/runs/a").status_code in (200, 202, 204)
    code, out = plan(capsys)
    assert "1 to create" in out
    assert (code, out) == full_plan(capsys, monkeypatch)


def test_another_apply_is_planned_in_full(setup, capsys, monkeypatch):
    plan(capsys)
    (setup.cwd / "other").mkdir()
    (setup.cwd / "other" / "a.yaml").write_text(spec("a", "echo"))
    assert setup.astra("apply", "-f", "other", "--source", "s", "--yes").returncode == 0
    until(lambda: _settled(setup), what="the runs to end")
    code, out = plan(capsys)
    assert "1 to replace" in out or "1 to update" in out
    assert (code, out) == full_plan(capsys, monkeypatch)


def test_another_source_or_argument_is_planned_in_full(setup, capsys, monkeypatch):
    plan(capsys)
    with monkeypatch.context() as m:
        no_full_plan(m)
        assert plan(capsys, "--source", "t")[0] == 1  # the refusal: the full plan was asked
        assert plan(capsys, "-v")[0] == 1


def summaries(server: LiveServer, tag: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {TOKEN}", **({"If-None-Match": tag} if tag else {})}
    return httpx.get(server.url + "/api/runs", params={"view": "summary"}, headers=headers, timeout=30)


def test_the_summary_tag_is_not_given_again_by_a_server_started_again(setup):
    listed = summaries(setup)
    tag = listed.headers["etag"]
    assert summaries(setup, tag).status_code == 304
    setup.stop()
    setup.start()
    after = summaries(setup, tag)
    assert after.status_code == 200 and after.json() == listed.json()


def test_a_git_repository_made_around_the_files_is_planned_in_full(setup, capsys, monkeypatch):
    first = plan(capsys)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    for argv in (["init", "-q", "-b", "main"], ["add", "runs"], ["commit", "-qm", "the runs"]):
        subprocess.run(["git", *argv], cwd=setup.cwd, env=env, check=True)
    code, out = plan(capsys)
    assert out != first[1] and "the runs" in out  # the revision now says the commit
    assert (code, out) == full_plan(capsys, monkeypatch)


def test_a_template_file_beside_the_files_is_planned_in_full(setup, capsys, monkeypatch):
    first = plan(capsys)
    (setup.cwd / "templates").mkdir()  # on the search path, not among the files
    (setup.cwd / "templates" / "t.yaml").write_text("parameters: {}\nspec: {}\n")
    code, out = plan(capsys)
    assert out != first[1]  # the files' revision holds the templates
    assert (code, out) == full_plan(capsys, monkeypatch)


def test_a_plan_through_a_proxy_is_not_answered(setup, capsys, monkeypatch):
    plan(capsys)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")  # the full plan still reaches the server
    no_full_plan(monkeypatch)
    assert plan(capsys)[0] == 1  # the refusal: the full plan was asked


def git(cwd, *argv: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    subprocess.run(["git", *argv], cwd=cwd, env=env, check=True)


@pytest.fixture
def repo(setup, capsys):
    """``setup`` with its work folder a git repository, the runs committed, and a plan recorded
    (the first plan's ``git status`` writes the index again: the next one is recorded)."""
    (setup.cwd / "README.md").write_text("runs\n")
    for f in (setup.cwd / "README.md", *(setup.cwd / "runs").iterdir()):
        past = os.stat(f).st_mtime_ns - 10**10  # older than the index, as git wants (not racily clean)
        os.utime(f, ns=(past, past))
    git(setup.cwd, "init", "-q", "-b", "main")
    git(setup.cwd, "add", ".")
    git(setup.cwd, "commit", "-qm", "the runs")
    first = plan(capsys)
    assert plan(capsys) == first and "main@sha1:" in first[1] and "the runs" in first[1]
    return setup


def test_a_warm_plan_in_a_git_working_tree_is_answered_with_the_same_bytes(repo, capsys, monkeypatch):
    full = full_plan(capsys, monkeypatch)
    (repo.cwd / "README.md").write_text("the runs, outside their folder\n")  # not in the status
    assert full_plan(capsys, monkeypatch) == full
    with monkeypatch.context() as m:
        no_full_plan(m)
        assert plan(capsys) == full


def test_a_commit_made_after_the_plan_is_planned_in_full(repo, capsys, monkeypatch):
    before = plan(capsys)
    git(repo.cwd, "commit", "-q", "--allow-empty", "-m", "another commit")  # the same files
    code, out = plan(capsys)
    assert out != before[1] and "another commit" in out
    assert (code, out) == full_plan(capsys, monkeypatch)


@pytest.mark.parametrize("how", ["checkout", "symbolic-ref"])
def test_a_checkout_of_another_branch_is_planned_in_full(repo, capsys, monkeypatch, how):
    before = plan(capsys)
    if how == "checkout":  # the same commit, the same files (the index written again)
        git(repo.cwd, "checkout", "-q", "-b", "other")
    else:  # only HEAD moves
        git(repo.cwd, "branch", "other")
        git(repo.cwd, "symbolic-ref", "HEAD", "refs/heads/other")
    code, out = plan(capsys)
    assert out != before[1] and "other@sha1:" in out
    assert (code, out) == full_plan(capsys, monkeypatch)


@pytest.mark.parametrize("change", ["untracked", "tracked edited", "staged"])
def test_a_tree_made_dirty_in_the_folders_is_planned_in_full(repo, capsys, monkeypatch, change):
    before = plan(capsys)
    runs = repo.cwd / "runs"
    if change == "untracked":
        (runs / "notes.txt").write_text("not a spec\n")
    elif change == "tracked edited":
        git(repo.cwd, "mv", "README.md", "runs/README.md")
        git(repo.cwd, "commit", "-qm", "the readme with the runs")
        plan(capsys)
        before = plan(capsys)  # recorded again, clean
        (runs / "README.md").write_text("edited\n")
    else:
        git(repo.cwd, "rm", "-q", "--cached", "runs/b.yaml")  # the file stays, untracked
    code, out = plan(capsys)
    assert "+dirty" in out and "+dirty" not in before[1]
    assert (code, out) == full_plan(capsys, monkeypatch)


def test_a_linked_worktree_is_planned_in_full(repo, capsys, monkeypatch):
    git(repo.cwd, "worktree", "add", "-q", "../linked")
    monkeypatch.chdir(repo.cwd.parent / "linked")
    plan(capsys)
    plan(capsys)
    with monkeypatch.context() as m:
        no_full_plan(m)
        assert plan(capsys)[0] == 1  # never recorded: a .git file


def test_a_spec_file_linked_from_outside_the_folders_is_read_again(repo, capsys, monkeypatch):
    (repo.cwd / "other").mkdir()
    (repo.cwd / "other" / "c.yaml").write_text(spec("c"))
    os.symlink(os.path.join("..", "other", "c.yaml"), repo.cwd / "runs" / "c.yaml")
    # other/ is untracked: the tree is dirty, which CI (CI=true) refuses without --allow-dirty
    applied = repo.astra("apply", "-f", "runs", "--source", "s", "--yes", "--allow-dirty")
    assert applied.returncode == 0, applied.stderr
    until(lambda: _settled(repo), what="the runs to end")
    plan(capsys)
    assert "No changes" in plan(capsys)[1]
    (repo.cwd / "other" / "c.yaml").write_text(spec("c", "echo"))  # the link itself as it was
    code, out = plan(capsys)
    assert "1 to replace" in out
    assert (code, out) == full_plan(capsys, monkeypatch)


@pytest.mark.parametrize("where", [".gitignore", ".git/info/exclude"])
def test_an_ignore_rule_added_above_the_folders_is_planned_in_full(repo, capsys, monkeypatch, where):
    (repo.cwd / "runs" / "notes.txt").write_text("not a spec\n")  # untracked: dirty
    dirty = plan(capsys)
    assert "+dirty" in dirty[1]
    with monkeypatch.context() as m:
        no_full_plan(m)
        assert plan(capsys) == dirty  # a dirty tree's plan is answered too
    (repo.cwd / where).parent.mkdir(exist_ok=True)
    with open(repo.cwd / where, "a") as f:
        f.write("notes.txt\n")
    code, out = plan(capsys)
    assert "+dirty" not in out
    assert (code, out) == full_plan(capsys, monkeypatch)
