"""Done when: a newcomer's first hour, scripted. A fresh ``HOME``, a clone of this checkout and a
folder of their own; the README's snippets run as printed, by bash: the first line, "Your own
runs", the seeds' ``curl`` lines, ``astra server stop``. One local cluster serves both folders,
and nothing had to be read under ``.astra/`` (there is none)."""

from __future__ import annotations

import os
import re

from reconciler.controlplane.server import read_info

from .conftest import ROOT, snapshot_of_this_checkout

README = (ROOT / "README.md").read_text()


def block_after(marker: str) -> str:
    """The first ```sh block after ``marker`` in the README, as printed."""
    rest = README[README.index(marker) :]
    return re.search(r"```sh\n(.*?)```", rest, re.S).group(1)


def test_a_newcomers_first_hour_as_the_readme_prints_it(user, tmp_path):
    clone = tmp_path / "astra"
    clone.mkdir()
    snapshot_of_this_checkout(clone)
    user.env["PATH"] = os.defpath + os.pathsep + os.path.dirname(os.path.realpath(_python3()))  # no astra
    first = block_after("# astra").splitlines()[0]  # the second line is the test suite itself
    assert first.endswith(".venv/bin/astra apply -f examples/laptop --yes --wait")

    done = user.sh(first, cwd=clone)
    assert done.returncode == 0, done.stdout + done.stderr
    info = read_info(user.state)
    assert info is not None  # in the per-user home, ~/.local/state/astra
    started = f"astra: started the local astra server at {info.url} (home {user.state}, "
    assert done.stderr.count(started) == 1 and "'astra server stop' stops it" in done.stderr
    assert "Apply complete: 2 created" in done.stdout
    results = user.state / "work" / "laptop-sweep" / "results"  # the run's own folder, in astra's home
    assert sorted(p.name for p in results.iterdir()) == [f"sweep-{i}.json" for i in range(8)]

    own = user.sh(block_after("## Your own runs"), cwd=clone)
    assert own.returncode == 0, own.stdout + own.stderr
    assert "started the local astra server" not in own.stderr  # the same one, from another folder
    assert "hello from rank 0 of 1" in own.stdout
    assert "Plan: 0 to create, 0 to update, 0 to replace, 0 to delete." in own.stdout
    assert own.stdout.count("Exited with code 0") >= 16  # laptop-sweep's copies, seen from both folders
    sources = [line.split()[0] for line in own.stdout.splitlines() if line.startswith("/")]
    assert sources == sorted([f"{user.home / 'myruns'}", f"{clone}/examples/laptop"])

    # later in the same shell, back in the clone: astra is on the PATH since "Your own runs"
    on_path = 'export PATH="$PWD/.venv/bin:$PATH"\n'
    curls = user.sh(on_path + block_after("## The local control plane"), cwd=clone)
    assert curls.returncode == 0, curls.stdout + curls.stderr
    assert '{"metadata":{"name":"llama-ft"' in curls.stdout.replace(" ", "")
    assert '"size": 100,\n  "max_parallel": 8' in curls.stdout  # jq .spec.array of the sweep

    stopped = user.sh(on_path + "astra server stop", cwd=clone)
    assert stopped.stdout.startswith(f"astra server stopped (pid {info.pid}, {info.url}, home {user.state})")
    assert not (clone / ".astra").exists() and not (user.home / "myruns" / ".astra").exists()


def _python3() -> str:
    """The python3 a newcomer's shell finds (this machine's, not this test's venv)."""
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        candidate = os.path.join(folder, "python3")
        if os.access(candidate, os.X_OK) and ".venv" not in folder and "pytest" not in folder:
            return candidate
    raise AssertionError("no python3 on the PATH")
