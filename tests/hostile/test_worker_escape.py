"""A worker cannot leave its sandbox, whoever runs the server (issue 28, finding 1).

The escape of the finding: ``open_by_handle_at`` on the root inode of the file system the
sandbox's ``/etc`` lies on opens the host's ``/`` (a 6-line Python script as a run's command).
It must fail as root (CI runs as root: the live server here is root's there) and as an
unprivileged user (``nobody``, with a user namespace of its own). A root server's workers run
as the worker user (``nobody``), with no capability, no new privileges, the seccomp filter, and
``/etc/shadow`` out of reach; ``mount`` and ``unshare`` are refused.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.controlplane_api.conftest import LiveServer
from tests.hostile.test_sandbox import ended, job

#: The finding's escape: open the root inode of the file system under /etc by its handle.
ESCAPE = """\
import ctypes, os, struct
libc = ctypes.CDLL(None, use_errno=True)
handle = struct.pack("IiQ", 8, 1, 2)  # ext4's root: inode 2, generation 0 (FILEID_INO32_GEN)
fd = libc.open_by_handle_at(os.open("/etc", os.O_RDONLY), handle, os.O_RDONLY | os.O_DIRECTORY)
print("escaped", os.listdir(fd) if fd >= 0 else "refused: " + os.strerror(ctypes.get_errno()))
"""

#: What else a worker tries: its ids and capabilities, the password hashes, a mount, a namespace.
PROBE = "; ".join(
    [
        "python3 escape.py > escape.txt 2>&1",
        "id -u > uid.txt",
        "grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status > status.txt",
        "cat /etc/shadow > shadow.txt 2>&1; echo $? >> shadow.txt",
        "mount -t tmpfs none /tmp > mount.txt 2>&1; echo $? >> mount.txt",
        "unshare -r true > unshare.txt 2>&1; echo $? >> unshare.txt",
    ]
)


def _bwrap() -> str:
    found = shutil.which("bwrap")
    if found is None:
        pytest.fail("bubblewrap is not installed: run scripts/sandbox-local-up.sh (task sandbox:up)")
    return found


def test_a_worker_of_the_server_cannot_escape_its_sandbox(tmp_path):
    """The live server is the test's user: root in CI (the finding), else an unprivileged one."""
    _bwrap()
    cwd = tmp_path / "work"
    cwd.mkdir()
    live = LiveServer(tmp_path / "home", cwd, env={"PATH": "/usr/local/bin:/usr/bin:/bin"}).start()
    try:
        script = f"cat > escape.py <<'EOF'\n{ESCAPE}EOF\n{PROBE}"
        assert live.api("POST", "/runs", json=job("escape", script)).status_code == 201
        assert ended(live, "escape")["status"]["state"] == "Completed"
    finally:
        live.stop()
    folder = live.home / "work" / "escape"  # the run's own working folder
    said = {p.stem: p.read_text() for p in folder.glob("*.txt")}
    assert said["escape"] == "escaped refused: Operation not permitted\n"
    status = dict(line.split(":\t") for line in said["status"].splitlines())
    assert status == {
        "CapPrm": "0000000000000000",
        "CapEff": "0000000000000000",
        "CapBnd": "0000000000000000" if os.geteuid() == 0 else status["CapBnd"],
        "NoNewPrivs": "1",
        "Seccomp": "2",
    }
    if os.geteuid() == 0:  # the worker user, not root: its files are its own
        assert said["uid"] == "65534\n"
        assert (folder / "uid.txt").stat().st_uid == 65534
    assert said["shadow"].endswith("Permission denied\n1\n")
    assert said["mount"].endswith("\n32\n")  # mount(8)'s "mount failure"
    assert "Operation not permitted" in said["unshare"] and said["unshare"].endswith("\n1\n")
    assert not list(Path("/").glob("escaped*"))


@pytest.fixture
def shared_tmp():
    """A folder another user can reach (pytest's own are root's alone, 0700)."""
    with tempfile.TemporaryDirectory(dir="/tmp") as made:
        Path(made).chmod(0o755)
        yield Path(made)


def test_as_an_unprivileged_user_the_escape_fails_too(shared_tmp):
    """The command line of an unprivileged user's server (``nobody``: a user namespace of its
    own), run as that user: the same script is refused."""
    from reconciler.sandbox import Sandbox, opened

    nobody = 65534
    work = shared_tmp / "work"
    work.mkdir()
    (work / "escape.py").write_text(ESCAPE)
    os.chown(work, nobody, nobody)
    argv = Sandbox(_bwrap(), user_namespace=True).argv(
        ["python3", "escape.py"], cwd=str(work), env={"PATH": "/usr/bin:/bin"}, found="/usr/bin/python3"
    )
    with opened(argv) as (words, fds):
        as_nobody = ["setpriv", f"--reuid={nobody}", f"--regid={nobody}", "--clear-groups", *words]
        done = subprocess.run(as_nobody, capture_output=True, text=True, timeout=60, pass_fds=fds)
    assert (done.returncode, done.stdout) == (0, "escaped refused: Operation not permitted\n"), done.stderr
