"""The canary of issue 30: a run with one env secret and one secret file, on a live ``astra
server`` with its sandbox, prints both; then nothing astra or the server wrote holds either value
(the database and its WAL, the server's log, the worker's log file, every API answer about the
run, its workers and events, the audit trail, the console's pages, plan, describe and history in
every format), and the log shows ``***``.
"""

from __future__ import annotations

import json
import os
import shutil

import httpx
import pytest

from tests.controlplane_api.conftest import TOKEN, LiveServer, until

ENV_CANARY = "hf_canary_3f9a7c"
FILE_CANARY = b"-----BEGIN canary-----\nssh_canary_5d2e1b\n\x00\xff binary tail\n"
WORDS = (b"3f9a7c", b"5d2e1b")  # the values' own parts (a test's folder is named /canary/)

RUN = """\
metadata: {name: sec}
spec:
  task_template:
    image: busybox
    command: sh
    args: [-c, 'echo "token=$HF_TOKEN"; cat /run/astra/id_key; ls -l /run/astra/id_key']
    restart_policy: Never
    requested_resources: {cpu_cores: 1}
    env:
      HF_TOKEN: {secret: hf-token}
    secret_files:
      - {name: ssh-key, mount_path: /run/astra/id_key}
"""


@pytest.fixture
def boxed(tmp_path):
    if shutil.which("bwrap") is None:
        pytest.fail("bubblewrap is not installed: run scripts/sandbox-local-up.sh (task sandbox:up)")
    cwd = tmp_path / "work"
    cwd.mkdir()
    server = LiveServer(cwd / ".astra", cwd, env={"PATH": "/usr/local/bin:/usr/bin:/bin"}).start()
    yield server
    server.stop()


def clean(what: str, data: bytes | str) -> None:
    raw = data.encode() if isinstance(data, str) else data
    found = [w for w in WORDS if w in raw]
    assert not found, f"{what} holds {found}"


def test_the_canary_reaches_the_worker_and_nothing_else(boxed, tmp_path):
    key = tmp_path / "id_key"
    key.write_bytes(FILE_CANARY)
    done = boxed.astra("secret", "set", "hf-token", input=ENV_CANARY)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"secret hf-token created in workspace default ({len(ENV_CANARY)} bytes)\n"
    assert boxed.astra("secret", "set", "ssh-key", "--from-file", str(key)).returncode == 0
    (boxed.cwd / "run.yaml").write_text(RUN)
    outputs = {}
    for fmt in ("text", "json", "markdown"):
        outputs[f"plan {fmt}"] = boxed.astra(
            "plan", "-f", "run.yaml", *(["-o", fmt] if fmt != "text" else [])
        )
    applied = boxed.astra("apply", "-f", "run.yaml", "--yes")
    assert applied.returncode == 0, applied.stderr
    outputs["apply"] = applied

    def ended():
        run = boxed.api("GET", "/runs/sec").json()
        return run if run["status"]["state"] in ("Completed", "Failed") else None

    run = until(ended, what="run sec to end")
    assert run["status"]["state"] == "Completed", run
    logs = boxed.api("GET", "/workers/sec-0/logs").content
    # the env value, then the whole file (its last newline too) as one mask, then its mode: 0400,
    # or 0444 where a root server's worker runs as the worker user (worker_secrets says why)
    mode = b"-r--r--r-- " if os.geteuid() == 0 else b"-r-------- "
    assert logs.startswith(b"token=***\n***" + mode), logs
    clean("the worker's log", logs)

    for fmt in ("table", "json", "yaml"):
        outputs[f"history {fmt}"] = boxed.astra("history", "-o", fmt)
    outputs["describe"] = boxed.astra("describe", "run", "sec")
    outputs["logs"] = boxed.astra("logs", "sec")
    outputs["secret list"] = boxed.astra("secret", "list", "-o", "json")
    for name, out in outputs.items():
        assert out.returncode == 0, (name, out.stderr)
        clean(name, out.stdout + out.stderr)
    assert json.loads(outputs["secret list"].stdout)[0]["name"] == "hf-token"
    assert outputs["logs"].stderr == (
        "astra: masking is on: the value of each secret hf-token, ssh-key is shown as *** "
        "(a safety net: a worker can still print a value changed)\n"
    )

    for path in (
        "/runs/sec",
        "/runs",
        "/runs/sec/workers",
        "/runs/sec/events",
        "/workers",
        "/events",
        "/secrets",
        "/secrets/hf-token",
        "/sources",
    ):
        r = boxed.api("GET", path)
        assert r.status_code == 200, (path, r.text)
        clean(path, r.content)
    for source in boxed.api("GET", "/sources").json()["items"]:
        clean(f"source {source['name']}", boxed.api("GET", f"/sources/{source['name']}").content)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    base = f"{boxed.url}/o/default/w/default/jobs/default"
    secrets_page = f"{boxed.url}/o/default/w/default/secrets"
    for page in ("", "/sec", "/sec/events", "/sec/log/sec-0", "/sec/log/sec-0/text", secrets_page):
        r = httpx.get(page if page.startswith("http") else base + page, headers=headers, timeout=30)
        assert r.status_code == 200, (page, r.status_code)
        clean(f"console {page or 'runs'}", r.content)
        if page == "/sec/log/sec-0":
            assert b"masking is on: the value of each secret hf-token, ssh-key is shown as ***" in r.content

    boxed.stop()  # the database's WAL and the server's log, as they are at the end
    for path in boxed.home.rglob("*"):
        if path.is_file() and path.name != "secrets.key":
            clean(str(path.relative_to(boxed.home)), path.read_bytes())
