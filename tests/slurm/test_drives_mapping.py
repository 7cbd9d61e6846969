"""Drives on Slurm, at the level of the batch script (pure: no Slurm needed).

Two ways a job mounts its drives: pyxis' ``--container-mounts`` where images run under pyxis,
else bubblewrap on the node, in the job's wrapper. **pyxis is not installed on the test
machine**: its form is checked here, on the sbatch script astra writes, and nowhere against a
real pyxis. The bubblewrap form is also run for real: its wrapper line by bash, here (as root
and as an unprivileged user), and through the real local Slurm in ``test_drives.py``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.clusters.slurm.drives import SlurmDrives, parse_drives
from reconciler.clusters.slurm.mapping import to_submission
from reconciler.clusters.slurm.unsupported import NO_DRIVE, NO_DRIVES
from reconciler.runspec.parse import parse_run
from reconciler.sandbox import NODE_BOX, Mount, NodeSandbox

FOLDERS = {"datasets": "/shared/ds", "results": "/shared/res"}
BOX = NodeSandbox("/usr/bin/bwrap", user_namespace=False)
ON_NODE = SlurmDrives(FOLDERS, BOX)
REFS = [
    {"name": "datasets", "mount_path": "/data", "mode": "ReadOnly"},
    {"name": "results", "mount_path": "/results"},
]
#: The mounts REFS make with FOLDERS, as bubblewrap's arguments and as pyxis' option.
BWRAP_MOUNTS = "--dir /data --ro-bind /shared/ds /data --dir /results --bind /shared/res /results"
PYXIS_MOUNTS = "--container-mounts=/shared/ds:/data:ro,/shared/res:/results"


def run(spec: dict[str, Any], refs: list[dict[str, Any]] | None = REFS) -> Any:
    template: dict[str, Any] = {"image": "img:1", "command": "sh", "args": ["-c", "echo $RANK"]}
    if refs is not None:
        template["datavolume_refs"] = refs
    template.update(spec.pop("task_template", {}))
    return parse_run({"metadata": {"name": "r"}, "spec": {"task_template": template, **spec}})


def groups(refs: list[dict[str, Any]] | None, **spec: Any) -> Any:
    def template(cmd: str) -> dict[str, Any]:
        t: dict[str, Any] = {"image": f"img/{cmd}:1", "command": cmd}
        if refs is not None:
            t["datavolume_refs"] = refs
        return t

    tgs = [
        {"name": "ps", "replicas": 1, "task_template": template("ps")},
        {"name": "trainer", "replicas": 2, "task_template": template("train")},
    ]
    return parse_run({"metadata": {"name": "g"}, "spec": {"task_groups": tgs, **spec}})


def sub(r: Any, **kw: Any):
    return to_submission(r, nonce="n0", log_dir="/L", node_gpus=8, nodes_available=2, **kw)


SHAPES = {
    "single": {},
    "array": {"array": {"size": 3, "max_parallel": 1}},
    "gang": {"task_template": {"requested_resources": {"machines": 2}}},
}


# ---- bubblewrap on the node (no pyxis) ------------------------------------------------------------


def test_a_single_worker_runs_its_command_in_the_node_sandbox():
    s = sub(run({}), drives=ON_NODE)
    assert s.errors == []
    *_, box, last = s.script.rstrip().splitlines()
    assert box == BOX.shell([Mount("/shared/ds", "/data", True), Mount("/shared/res", "/results", False)])
    assert box.startswith("ASTRA_BOX=(/usr/bin/bwrap --die-with-parent --tmpfs /); ")
    assert f'--dev-bind /dev /dev --bind /proc /proc {BWRAP_MOUNTS} --chdir "$PWD" --)' in box
    assert last == f"exec {NODE_BOX} sh -c 'echo $RANK'"


def test_an_array_copy_mounts_after_its_environment_is_set():
    lines = sub(run(SHAPES["array"]), drives=ON_NODE).script.rstrip().splitlines()
    assert lines[-3] == "unset ASTRA_INDEX ${!SLURM_ARRAY_@}"
    assert lines[-2].startswith("ASTRA_BOX=(") and lines[-1].startswith(f"exec {NODE_BOX} sh -c")


def test_a_gang_mounts_in_each_task_on_its_own_node():
    last = sub(run(SHAPES["gang"]), drives=ON_NODE).script.rstrip().splitlines()[-1]
    words = shlex.split(last)
    inner = words[words.index("-c") + 1]
    assert words[:3] == ["exec", "srun", "--kill-on-bad-exit=1"]
    assert inner.startswith("export RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS; ASTRA_BOX=(")
    assert BWRAP_MOUNTS in inner
    assert inner.endswith(f'; exec {NODE_BOX} "$@"')
    assert words[-4:] == ["astra-worker", "sh", "-c", "echo $RANK"]


@pytest.mark.parametrize("start", ["Gang", "Independent"])
def test_every_group_mounts_its_drives_in_each_task(start: str):
    s = sub(groups(REFS, start=start), drives=ON_NODE)
    assert s.errors == []
    lines = [line for job in s.jobs for line in job.script.splitlines() if "srun" in line]
    inners = [w for line in lines for w in shlex.split(line) if w.startswith("export RANK=")]
    assert len(inners) == 2
    for inner in inners:
        assert "; ASTRA_BOX=(" in inner and BWRAP_MOUNTS in inner
        assert inner.endswith(f'; exec {NODE_BOX} "$@"')


def test_the_node_sandbox_hides_only_the_node_entries_a_drive_takes():
    line = BOX.shell([Mount("/shared/ds", "/data/", True), Mount("/shared/res", "/srv/out", False)])
    assert 'case "$astra_top" in /proc|/dev|/data|/srv/out) ;;' in line


def test_an_unprivileged_user_gets_a_user_namespace():
    assert (
        NodeSandbox("bwrap", user_namespace=True)
        .shell([])
        .startswith("ASTRA_BOX=(bwrap --die-with-parent --unshare-user --tmpfs /); ")
    )


# ---- pyxis: --container-mounts (NOT run: pyxis is not installed here) ----------------------------


@pytest.mark.parametrize("shape", ["single", "array", "gang"])
def test_pyxis_mounts_drives_with_container_mounts(shape: str):
    s = sub(run(dict(SHAPES[shape])), images="pyxis", drives=SlurmDrives(FOLDERS))
    assert s.errors == []
    last = s.script.rstrip().splitlines()[-1]
    assert f"--container-image=img:1 {PYXIS_MOUNTS} bash -c " in last
    assert "ASTRA_BOX" not in s.script


@pytest.mark.parametrize("start", ["Gang", "Independent"])
def test_pyxis_mounts_each_groups_drives(start: str):
    s = sub(groups(REFS, start=start), images="pyxis", drives=SlurmDrives(FOLDERS))
    assert s.errors == []
    steps = "\n".join(job.script for job in s.jobs)
    assert steps.count(PYXIS_MOUNTS) == 2
    assert f"--container-image=img/ps:1 {PYXIS_MOUNTS} bash -c" in steps
    assert "ASTRA_BOX" not in steps


def test_pyxis_needs_no_sandbox():
    assert sub(run({}), images="pyxis", drives=SlurmDrives(FOLDERS, None, "bwrap was not found")).errors == []


def test_pyxis_refuses_a_path_its_option_cannot_carry():
    s = sub(
        run({}, refs=[{"name": "results", "mount_path": "/a,b"}]),
        images="pyxis",
        drives=SlurmDrives({"results": "/shared/x:y"}),
    )
    assert [(str(e.path), e.message) for e in s.errors] == [
        (
            "spec.task_template.datavolume_refs[0].name",
            "pyxis' --container-mounts cannot carry ':' or ',' in a path: '/shared/x:y'",
        ),
        (
            "spec.task_template.datavolume_refs[0].mount_path",
            "pyxis' --container-mounts cannot carry ':' or ',' in a path: '/a,b'",
        ),
    ]


# ---- refusals, each naming its field -------------------------------------------------------------


def test_a_drive_the_cluster_does_not_know_is_refused_by_name():
    s = sub(run({}), drives=SlurmDrives({"datasets": "/shared/ds"}, BOX))
    assert [(str(e.path), e.message) for e in s.errors] == [
        ("spec.task_template.datavolume_refs[1].name", NO_DRIVE.format(name="results"))
    ]
    assert NO_DRIVE.format(name="results") == (
        "drive 'results' is not known to this Slurm cluster: add it with "
        "astra drive create results --path FOLDER --server slurm://"
    )
    assert s.script == ""


def test_a_groups_unknown_drive_names_its_group():
    s = sub(groups([{"name": "x", "mount_path": "/x"}], start="Independent"), drives=ON_NODE)
    assert [str(e.path) for e in s.errors] == [
        "spec.task_groups[0].task_template.datavolume_refs[0].name",
        "spec.task_groups[1].task_template.datavolume_refs[0].name",
    ]


def test_no_pyxis_and_no_sandbox_refuses_every_drive_saying_why():
    s = sub(run({}), drives=SlurmDrives(FOLDERS, None, "bwrap was not found"))
    assert [(str(e.path), e.message) for e in s.errors] == [
        ("spec.task_template.datavolume_refs", NO_DRIVES.format(why="bwrap was not found"))
    ]
    assert s.errors[0].message == (
        "this Slurm cluster cannot mount drives: it has no pyxis (srun --container-mounts) and no "
        "sandbox (bwrap was not found): install bubblewrap on its machines, or remove datavolume_refs "
        "and read the data from the cluster's shared filesystem"
    )


# ---- a run without drives is mapped exactly as before --------------------------------------------


@pytest.mark.parametrize("images", ["host", "pyxis"])
@pytest.mark.parametrize("shape", ["single", "array", "gang", "hetjob", "groups"])
def test_a_run_without_drives_is_the_same_whatever_the_cluster_knows_of_drives(shape: str, images: str):
    def made(drives: SlurmDrives | None) -> Any:
        if shape in ("hetjob", "groups"):
            r = groups(None, start="Gang" if shape == "hetjob" else "Independent")
        else:
            r = run(dict(SHAPES[shape]), refs=None)
        return sub(r, images=images, drives=drives)

    plain = made(None)
    assert plain.errors == []
    assert made(ON_NODE) == plain
    assert made(SlurmDrives({}, None, "bwrap was not found")) == plain


# ---- the drives table ----------------------------------------------------------------------------


def test_the_drives_table_is_read_in_one_place():
    assert parse_drives({"drives": {"results": "/r", "datasets": "/d"}}) == {
        "datasets": "/d",
        "results": "/r",
    }
    assert parse_drives({"results": "/r"}) == {"results": "/r"}
    for bad, said in (
        ({"drives": {"Results": "/r"}}, "drive name 'Results' must be lower-case"),
        ({"drives": {"results": "r"}}, "drive 'results': its folder must be an absolute path, not 'r'"),
        ({"drives": {"results": 3}}, "drive 'results': its folder must be text, not 3"),
        ({"drives": ["results"]}, "the drives must map each drive's name to its folder"),
    ):
        with pytest.raises(ValueError, match="^" + said.replace("(", r"\(")):
            parse_drives(bad)


# ---- the node sandbox's line, run for real by bash (bubblewrap; no Slurm) -----------------------


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A folder another user can reach (pytest's own are root's alone, 0700)."""
    with tempfile.TemporaryDirectory(dir="/tmp") as made:
        Path(made).chmod(0o755)
        yield Path(made)


NOBODY = 65534


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_the_node_sandbox_line_mounts_drives_and_keeps_the_node_in_view(shared_tmp: Path, user: str):
    """What a job's wrapper runs, run by bash as the job would: as root (the local cluster's
    jobs), and as an unprivileged user, with a user namespace of its own."""
    bwrap = shutil.which("bwrap")
    assert bwrap is not None, "bubblewrap is not installed: run scripts/sandbox-local-up.sh"
    work, ro, rw = (shared_tmp / n for n in ("work", "ro", "rw"))
    for folder in (work, ro, rw):
        folder.mkdir()
        if user == "nobody":
            os.chown(folder, NOBODY, NOBODY)
    (ro / "in.txt").write_text("hello\n")
    mounts = [Mount(str(ro), "/data", True), Mount(str(rw), "/results", False)]
    line = NodeSandbox(bwrap, user_namespace=user == "nobody").shell(mounts)
    inside = "; ".join(
        [
            "id -u",
            "pwd",
            'echo "$GREETING"',
            "cat /data/in.txt",
            "echo x > /data/x || echo refused",
            "echo y > /results/y && echo wrote",
            "test -d /proc/1 && echo node-processes",
            f"test -d {shared_tmp} && echo node-files",
        ]
    )
    script = f"{line}; exec {NODE_BOX} sh -c {shlex.quote(inside)}"
    before = [Path(p).exists() for p in ("/data", "/results")]
    as_user = (
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] if user == "nobody" else []
    )
    done = subprocess.run(
        [*as_user, "bash", "-c", script],
        cwd=work,
        env={"PATH": "/usr/bin:/bin", "GREETING": "hi there"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    uid = "0" if user == "root" else str(NOBODY)
    assert done.stdout.splitlines() == [
        uid,
        str(work),
        "hi there",
        "hello",
        "refused",
        "wrote",
        "node-processes",
        "node-files",
    ]
    assert "Read-only file system" in done.stderr
    assert (rw / "y").read_text() == "y\n" and not (ro / "x").exists()
    assert [Path(p).exists() for p in ("/data", "/results")] == before  # nothing made on the node
