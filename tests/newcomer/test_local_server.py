"""One local cluster per user: found in one home whatever the folder, started once (three
commands at once share it), on a port kept across restarts, never by a command that only reads."""

from __future__ import annotations

import json
import os
import socket
import subprocess

from reconciler.controlplane.server import DEFAULT_PORT, read_info, read_port

from .conftest import BIN


def test_the_first_choice_of_port_is_8750_then_the_one_used_last(tmp_path):
    assert read_port(tmp_path) == DEFAULT_PORT == 8750
    (tmp_path / "port").write_text("40123\n")
    assert read_port(tmp_path) == 40123
    (tmp_path / "port").write_text("not a port\n")
    assert read_port(tmp_path) == 8750


def test_a_command_that_only_reads_never_starts_a_server(user, tmp_path):
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    for args in (["status"], ["astraeus", "workers", "my-array"], ["astraeus", "logs", "my-array-0"]):
        done = user.astra(*args, cwd=folder)
        assert done.returncode == 1
        assert done.stderr == (
            f"astra: error: no astra server runs for {user.state}: 'astra server start' starts one in the "
            "background (so does any 'astra apply' or 'astra plan')\n"
        )
    state = f"sqlite:///{tmp_path / 'state.db'}"  # the sources kept elsewhere: no cluster needed
    assert user.astra("status", "--state", state, cwd=folder).stdout == f"no sources yet in {state}\n"
    assert user.astra("force-unlock", "L1", "--state", state, cwd=folder).stderr == (
        "astra: error: no source holds lock L1\n"
    )
    assert not user.state.exists() and not (folder / ".astra").exists()  # nothing left behind


def test_three_commands_at_once_share_one_server_which_each_folder_finds(user, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    procs = [
        subprocess.Popen(
            [str(BIN / "astra"), "server", "env"],
            cwd=folder,
            env=user.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for folder in (a, b, a)
    ]
    outs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0]
    assert len({out for out, _ in outs}) == 1  # one URL, one token
    started = [err for _, err in outs if "started the local astra server" in err]
    assert len(started) == 1  # said once, by the one that started it
    info = read_info(user.state)
    assert info is not None
    assert started[0] == (
        f"astra: started the local astra server at {info.url} (home {user.state}, log "
        f"{user.state / 'server.log'}); 'astra server stop' stops it\n"
    )
    log = (user.state / "server.log").read_text()
    assert log.count("astra server listening on") == 1
    assert json.loads((user.state / "serving.lock.json").read_text())["pid"] == info.pid
    second = user.astra("server", "--port", "0", cwd=b)  # a second server for the same home
    assert second.returncode == 1
    assert second.stderr == (
        f"astra: error: an astra server already runs for {user.state} (pid {info.pid}, {info.url})\n"
    )


def test_the_port_is_kept_across_restarts_and_another_is_taken_when_it_is_busy(user, tmp_path):
    started = user.astra("server", "start", cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    first = read_info(user.state)
    assert first is not None and started.stdout.startswith(f"astra server started at {first.url} ")
    assert user.astra("server", "stop", cwd=tmp_path).returncode == 0
    assert user.astra("server", "start", cwd=tmp_path).returncode == 0
    again = read_info(user.state)
    assert again is not None and again.port == first.port and again.pid != first.pid
    assert user.astra("server", "stop", cwd=tmp_path).returncode == 0
    with socket.create_server(("127.0.0.1", first.port)):  # someone else took it meanwhile
        done = user.astra("server", "start", cwd=tmp_path)
        assert done.returncode == 0
        moved = read_info(user.state)
        assert moved is not None and moved.port != first.port
        # and it says why (issue 32), naming who holds the port
        said = f"port {first.port} is in use (by pid {os.getpid()}): listening on {moved.port}\n"
        assert done.stderr == said
    assert read_port(user.state) == moved.port  # and that one is kept from now on
