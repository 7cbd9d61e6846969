"""The README's pre-commit snippet, as printed, in a repo of run specs: the real ``pre-commit``
installs the hook from a snapshot of this checkout (a local git repo, its commit as ``rev``),
checks the run specs and the templates, and leaves the other YAML of the repo alone."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from .conftest import BIN, ROOT, git, snapshot_of_this_checkout

GOOD = """metadata: {name: good}
template: {name: sweep, parameters: {size: 10}}
"""
BAD = """metadata: {name: bad}
spec:
  task_template:
    imagee: busybox
"""


def readme_snippet() -> str:
    text = (ROOT / "README.md").read_text()
    (block,) = re.findall(r"```yaml\n(# \.pre-commit-config\.yaml\n.*?)```", text, re.S)
    return block


def test_the_readme_pre_commit_snippet_works_as_printed(tmp_path):
    hook_repo = tmp_path / "astra"
    hook_repo.mkdir()
    rev = snapshot_of_this_checkout(hook_repo)
    repo = tmp_path / "runs-repo"
    repo.mkdir()
    snippet = readme_snippet()
    assert "<this repository's URL>" in snippet and "<a tag or commit>" in snippet
    config = snippet.replace("<this repository's URL>", str(hook_repo)).replace("<a tag or commit>", rev)
    (repo / ".pre-commit-config.yaml").write_text(config)
    shutil.copytree(ROOT / "templates", repo / "templates")
    (repo / "runs").mkdir()
    (repo / "runs" / "good.yaml").write_text(GOOD)
    (repo / "runs" / "bad.yaml").write_text(BAD)
    git("init", "-q", cwd=repo)
    git("add", "-A", cwd=repo)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASTRA_", "VIRTUAL_ENV", "PYTHON"))}
    env.update(PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"), HOME=str(tmp_path))
    env.setdefault("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))  # pip's wheels, kept across runs
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"

    def pre_commit() -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "pre_commit", "run", "--all-files", "--color", "never"],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )

    failed = pre_commit()
    assert failed.returncode == 1, failed.stdout + failed.stderr
    out = failed.stdout
    unknown = "unknown field 'imagee'; did you mean 'image'?"
    assert f"runs/bad.yaml:4:5: spec.task_template.imagee: {unknown}" in out
    assert "good.yaml" not in out and "templates/" not in out and ".pre-commit-config" not in out
    (repo / "runs" / "bad.yaml").unlink()
    git("add", "-A", cwd=repo)
    passed = pre_commit()
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "astra validate" in passed.stdout and "Passed" in passed.stdout
