"""A full disk is a 503 with words, for every write, and the same words at the next start; reads
go on (issue 28, finding 8).

A real full disk, as root and as anyone: ``unshare --user --map-root-user --mount`` gives the
server a mount namespace of its own, where a 4 MiB tmpfs is its ``ASTRA_HOME``. Runs are created;
then, when the test says so, a file fills the tmpfs to its last page (as a worker's log would),
and every kind of write is held to the words, reads to a 200; the server is stopped and started
again on the full disk.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys

import httpx
import pytest

from tests.controlplane_api.conftest import ROOT, TOKEN, free_port, until

BEARER = {"Authorization": f"Bearer {TOKEN}"}
#: Inside the namespace: the tmpfs as the home; a server; the disk filled once ``$FILL`` exists
#: (``$FILLED`` says it is); once the server is stopped, a second start.
SCRIPT = """\
mount -t tmpfs -o size=4m tmpfs "$ASTRA_HOME" || exit 97
"$PYTHON" -m reconciler.cli server --host 127.0.0.1 --port "$PORT" &
server=$!
while [ ! -e "$FILL" ]; do sleep 0.05; done
dd if=/dev/zero of="$ASTRA_HOME/filler" bs=4096 2>/dev/null
touch "$FILLED"
wait $server
echo "--- started again"
exec "$PYTHON" -m reconciler.cli server --host 127.0.0.1 --port "$PORT"
"""


def run_doc(name: str) -> dict:
    return {"metadata": {"name": name}, "spec": {"task_template": {"image": "x", "command": "true"}}}


@pytest.fixture
def full_server(tmp_path):
    if shutil.which("unshare") is None:
        raise AssertionError("the test needs util-linux's unshare (apt-get install util-linux)")
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("ASTRA_")},
        "ASTRA_HOME": str(home),
        "ASTRA_TOKEN": TOKEN,
        "PYTHONPATH": str(ROOT),
        "PYTHON": sys.executable,
        "PORT": str(port),
        "FILL": str(tmp_path / "fill"),
        "FILLED": str(tmp_path / "filled"),
    }
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", SCRIPT],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        if proc.poll() is not None:
            raise AssertionError(log.read_text())
        try:
            return httpx.get(url + "/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    until(up, what="the server on its tmpfs to answer")
    yield url, home, log, proc, tmp_path
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=30)


def write(url: str, method: str, path: str, body: dict | None = None) -> tuple[int, str]:
    r = httpx.request(method, url + "/api" + path, json=body, headers=BEARER, timeout=60)
    return r.status_code, r.json().get("detail", "") if r.status_code >= 400 else ""


def test_a_full_disk_is_a_503_in_words_for_every_write_and_at_the_next_start(full_server):
    url, home, log, proc, where = full_server
    words = f"the server's store at {home}/astra.db is full: free space or move ASTRA_HOME"
    created = [f"r{i}" for i in range(3)]
    for name in created:
        assert write(url, "POST", "/runs", run_doc(name)) == (201, "")
    (where / "fill").touch()
    until(lambda: (where / "filled").exists(), what="the disk to be filled")

    for method, path, body in [
        ("POST", "/runs", run_doc("one-more")),
        ("POST", "/runs", run_doc("and-another")),
        ("DELETE", f"/runs/{created[0]}", None),
        ("PUT", "/sources/s", {"status": {"state": "x"}, "inventory": {}}),
        ("POST", "/sources/s/lock", {"owner": "me"}),
        ("POST", "/tokens", {"name": "t", "role": "read"}),
        ("POST", "/drives", {"name": "data"}),
    ]:
        assert write(url, method, path, body) == (503, words), (method, path)

    listed = httpx.get(url + "/api/runs?view=summary", headers=BEARER, timeout=60)
    assert listed.status_code == 200
    assert sorted(r["name"] for r in listed.json()["items"]) == sorted(created)
    assert httpx.get(url + f"/api/runs/{created[0]}", headers=BEARER, timeout=60).status_code == 200

    said = log.read_text()
    pid = int(re.search(r"pid (\d+)\)", said).group(1))
    os.kill(pid, signal.SIGTERM)
    assert proc.wait(timeout=60) == 1
    again = log.read_text().split("--- started again", 1)[1]
    assert f"astra: error: {words}" in again.splitlines()
    assert "Traceback" not in again and "OperationalError" not in again
