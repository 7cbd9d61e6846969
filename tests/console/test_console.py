"""The console, through the app (no browser): access, escaping, the pages' contents, the form.

What a browser does with the pages (its JavaScript, the Log following) is ``test_browser``'s."""

from __future__ import annotations

import html
import json
import re

from reconciler.controlplane.console.form import document_of, field_of
from reconciler.runspec.validate import validate_data
from reconciler.wire import console_url
from tests.controlplane_api.conftest import TOKEN, until
from tests.controlplane_api.test_api import tiny

from .conftest import BEARER, RUNS


def run_doc(name: str, **spec) -> dict:
    template = {"image": "busybox", "command": "sh", "args": ["-c", "sleep 60"]}
    return {"metadata": {"name": name}, "spec": {"task_template": template, **spec}}


# ---- access ---------------------------------------------------------------------------------------


def test_every_page_sends_a_stranger_to_the_login_page(console):
    for path in (RUNS, RUNS + "/x", RUNS + "/-/new", "/o/default/w/default/sources", "/"):
        answer = console.http.get(path)
        assert answer.status_code == 303, path
        assert answer.headers["location"].startswith("/login?next=")
    assert console.http.get("/login").status_code == 200


def test_the_api_bearer_header_is_let_in_and_a_wrong_one_is_refused(console):
    assert console.http.get(RUNS, headers=BEARER).status_code == 200
    wrong = console.http.get(RUNS, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    assert wrong.json() == {"detail": "an unknown (or revoked) token: send 'Authorization: Bearer TOKEN'"}


def test_login_sets_a_strict_httponly_cookie_and_logout_ends_the_session(console):
    refused = console.http.post("/login", data={"token": "nope", "next": RUNS})
    assert refused.status_code == 401
    assert "That is not a token of this server." in refused.text
    signed = console.http.post("/login", data={"token": TOKEN, "next": RUNS})
    assert signed.status_code == 303 and signed.headers["location"] == RUNS
    cookie = signed.headers["set-cookie"]
    assert "astra_session=" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert TOKEN not in cookie
    assert console.http.get(RUNS).status_code == 200
    assert console.http.post("/logout", data={}).status_code == 403  # no CSRF token
    out = console.http.post("/logout", data={"csrf": console.csrf()})
    assert out.status_code == 303 and out.headers["location"] == "/login"
    assert console.http.get(RUNS).status_code == 303


def test_login_comes_back_only_to_a_page_of_this_server(console):
    away = console.http.post("/login", data={"token": TOKEN, "next": "https://evil.example/"})
    assert away.headers["location"] == "/"
    for away in ("//evil.example/", "/\\evil.example/", "/\t/evil.example/", "/\n/evil.example/"):
        answer = console.http.post("/login", data={"token": TOKEN, "next": away})
        assert answer.headers["location"] == "/", away  # browsers read these as //evil.example
    wrong = console.http.post("/login", data={"token": "nope", "next": RUNS + "/x?page=1"})
    assert 'name="next" value="' + RUNS + '/x?page=1"' in wrong.text  # kept through a wrong token


def test_a_one_time_link_logs_in_once(console):
    assert console.http.post("/console/links").status_code == 401
    made = console.http.post("/console/links", params={"next": RUNS + "/llama-ft"}, headers=BEARER)
    path = made.json()["path"]
    assert path.startswith("/login/once/") and path.endswith("?next=" + RUNS + "/llama-ft")
    first = console.http.get(path)
    assert first.status_code == 303 and first.headers["location"] == RUNS + "/llama-ft"
    assert "HttpOnly" in first.headers["set-cookie"]
    console.http.cookies.clear()
    again = console.http.get(path)
    assert again.status_code == 401 and "used already" in again.text


def test_a_form_without_its_csrf_token_changes_nothing(console, plane):
    console.api("POST", "/runs", json=run_doc("victim"))
    console.login()
    refused = console.http.post(RUNS + "/victim/cancel", data={"csrf": "forged"})
    assert refused.status_code == 403
    assert plane.run("victim").state != "Cancelled"
    done = console.http.post(RUNS + "/victim/cancel", data={"csrf": console.csrf()})
    assert done.status_code == 303
    assert plane.run("victim").state == "Cancelled"
    deleted = console.http.post(RUNS + "/victim/delete", data={"csrf": console.csrf()})
    assert deleted.status_code == 303 and deleted.headers["location"] == RUNS
    assert console.api("GET", "/runs/victim").status_code == 404


def test_another_workspace_is_not_found(console):
    console.login()
    assert console.http.get("/o/acme/w/default/jobs/default").status_code == 404
    assert console.http.get(RUNS + "/nothing").status_code == 404


# ---- escaping ------------------------------------------------------------------------------------

HOSTILE = "<script>alert(1)</script>"


def test_labels_env_and_annotations_are_shown_as_text(console):
    doc = run_doc("evil")
    doc["metadata"]["labels"] = {"team": HOSTILE}
    doc["metadata"]["annotations"] = {"astra.source": "javascript:alert(1)", "astra.file": HOSTILE}
    doc["spec"]["task_template"]["env"] = {"X": HOSTILE, "Y": "javascript:alert(2)"}
    assert console.api("POST", "/runs", json=doc).status_code == 201
    console.login()
    for path in (RUNS, RUNS + "/evil"):
        page = console.http.get(path).text
        assert HOSTILE not in page
        assert html.escape(HOSTILE) in page.replace("&#34;", '"')
        assert 'href="javascript:' not in page


def test_the_pages_forbid_inline_script(console):
    console.login()
    policy = console.http.get(RUNS).headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy


# ---- the Runs page -------------------------------------------------------------------------------


def test_the_runs_page_filters_by_state_and_label_and_pages(console, plane):
    for i in range(120):
        doc = run_doc(f"r{i:03d}")
        doc["metadata"]["labels"] = {"team": "nlp" if i % 2 else "vision"}
        assert console.api("POST", "/runs", json=doc).status_code == 201
    console.api("DELETE", "/runs/r000")
    console.login()
    first = console.http.get(RUNS).text
    assert "119 runs, page 1 of 3" in first
    assert 'data-run="r119"' in first and 'data-run="r069"' not in first  # newest first
    third = console.http.get(RUNS, params={"page": 2}).text
    assert 'data-run="r001"' in third and 'data-run="r119"' not in third
    nlp = console.http.get(RUNS, params={"label": "team=nlp"}).text
    assert "60 runs" in nlp and 'data-run="r002"' not in nlp
    pending = console.http.get(RUNS, params={"state": "Failed"}).text
    assert "0 runs" in pending and "No runs match these filters." in pending


def test_a_run_page_shows_the_workers_tab_with_its_readout(console, plane):
    doc = run_doc("sweep", array={"size": 100, "max_parallel": 8})
    assert console.api("POST", "/runs", json=doc).status_code == 201
    until(lambda: plane.run("sweep").state == "Running", step=plane.step, what="the sweep to run")
    until(
        lambda: sum(1 for w in plane.engine.state.workers_of("sweep") if w.state == "Running") == 8,
        step=plane.step,
        what="8 copies running",
    )
    console.login()
    page = console.http.get(RUNS + "/sweep").text
    assert "Workers 8 running of 100" in page
    assert page.count('class="log-link"') == 8  # one page of the tab: only the copies that started
    assert page.count("Workers 8 running of 100") == 1  # the readout once, its counts beside the table
    assert "Array runs at most 8 workers at once" in page
    second = console.http.get(RUNS + "/sweep", params={"page": 1}).text
    assert 'data-worker="sweep-50"' in second and 'data-worker="sweep-49"' not in second
    beyond = console.http.get(RUNS + "/sweep", params={"page": 7}).text  # held to the last page
    assert 'data-worker="sweep-99"' in beyond and "page 2 of 2" in beyond
    events = console.http.get(RUNS + "/sweep/events").text
    assert "StartWorker" in events and "sweep-7" in events
    log = console.http.get(RUNS + "/sweep/log/sweep-0/text")
    assert log.json()["live"] is True and log.json()["attempt"] == 1  # its first start


def test_a_source_owned_run_says_its_spec_is_read_only(console):
    doc = run_doc("owned")
    doc["metadata"]["annotations"] = {"astra.source": "git@x:runs.git//prod", "astra.file": "prod/owned.yaml"}
    console.api("POST", "/runs", json=doc)
    console.login()
    page = console.http.get(RUNS + "/owned").text
    assert 'id="owned"' in page and "prod/owned.yaml" in page
    plain = console.api("POST", "/runs", json=run_doc("mine"))
    assert plain.status_code == 201
    assert 'id="owned"' not in console.http.get(RUNS + "/mine").text


# ---- New → Run -----------------------------------------------------------------------------------

LLAMA = {
    "name": "llama-ft",
    "image": "nvcr.io/nvidia/pytorch:24.08-py3",
    "command": "sh",
    "args": "-c\ntorchrun --nnodes=$WORLD_SIZE train.py",
    "gpus": "16",
    "machines": "Automatic",
    "cpu": "12",
    "memory": "120Gi",
    "time_limit": "12h",
    "start": "Automatic",
}


def test_the_llama_ft_form_starts_the_seeds_run(console):
    console.login()
    done = console.http.post(RUNS + "/-/new", data={**LLAMA, "csrf": console.csrf()})
    assert done.status_code == 303 and done.headers["location"] == RUNS + "/llama-ft"
    template = console.api("GET", "/runs/llama-ft").json()["spec"]["task_template"]
    assert template == {
        "image": "nvcr.io/nvidia/pytorch:24.08-py3",
        "command": "sh",
        "args": ["-c", "torchrun --nnodes=$WORLD_SIZE train.py"],
        "requested_resources": {
            "gpu_requests": {"count": 16},
            "per_gpu": {"cpu_cores": 12, "memory_bytes": 128849018880},
        },
        "time_limit_seconds": 43200,
    }


SWEEP = {
    "name": "sweep",
    "image": "nvcr.io/nvidia/pytorch:24.08-py3",
    "command": "python",
    "args": "/data/code/sweep.py",
    "gpus": "1",
    "cpu": "8",
    "memory": "32Gi",
    "drives": "datasets:/data:ro,results:/results",
    "array_size": "100",
    "max_parallel": "8",
    "time_limit": "1h",
    "start": "Gang",
}


def test_the_sweep_form_is_an_array_whose_start_is_forced_independent(console):
    console.login()
    form = console.http.get(RUNS + "/-/new").text
    assert "Start is forced to independent for an array." in form
    done = console.http.post(RUNS + "/-/new", data={**SWEEP, "csrf": console.csrf()})
    assert done.status_code == 303, done.text
    spec = console.api("GET", "/runs/sweep").json()["spec"]
    assert spec["array"] == {"size": 100, "max_parallel": 8}
    assert spec["start"] == "Independent"
    resources = spec["task_template"]["requested_resources"]
    assert resources == {"gpu_requests": {"count": 1}, "cpu_cores": 8, "memory_bytes": 34359738368}
    assert spec["task_template"]["datavolume_refs"] == [
        {"name": "datasets", "mount_path": "/data", "mode": "ReadOnly"},
        {"name": "results", "mount_path": "/results"},
    ]


def field_errors(page: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for name, text in re.findall(r'<p class="error" data-for="([a-z_]+)">([^<]*)</p>', page):
        found.setdefault(name, []).append(html.unescape(text))
    return found


def test_a_bad_form_shows_the_api_s_words_beside_each_field(console):
    console.login()
    bad = {**SWEEP, "name": "Sweep_", "array_size": "20000", "max_parallel": "9", "drives": "datasets:data"}
    answer = console.http.post(RUNS + "/-/new", data={**bad, "csrf": console.csrf()})
    assert answer.status_code == 422
    shown = field_errors(answer.text)
    assert shown["array_size"] == ["array.size must be from 1 to 10000"]
    assert shown["drives"] == ["must be an absolute path, starting with '/'"]
    # one validator: the API's 422 for the same document says the same words
    api = console.api("POST", "/runs", json=document_of(bad))
    assert api.status_code == 422
    said: dict[str, list[str]] = {}
    for p in api.json():
        said.setdefault(field_of(p["path"]), []).append(p["message"])
    assert said == shown
    assert 'value="20000"' in answer.text  # the values are kept


def test_a_bad_max_parallel_is_the_seeds_array_message(console):
    console.login()
    bad = {**SWEEP, "max_parallel": "200"}
    shown = field_errors(console.http.post(RUNS + "/-/new", data={**bad, "csrf": console.csrf()}).text)
    assert shown == {"max_parallel": ["array.max_parallel must be from 0 (no cap) to array.size (100)"]}


def test_edit_as_json_holds_the_same_document_and_starts_it(console):
    console.login()
    shown = console.http.post(RUNS + "/-/new", data={**LLAMA, "mode": "to-json", "csrf": console.csrf()})
    assert shown.status_code == 200
    text = html.unescape(re.search(r'<textarea id="json" name="json"[^>]*>([^<]*)</textarea>', shown.text)[1])
    assert json.loads(text) == document_of(LLAMA)
    doc = json.loads(text)
    doc["spec"]["task_template"]["env"] = {"WANDB_MODE": "offline"}
    started = console.http.post(
        RUNS + "/-/new", data={"mode": "json", "json": json.dumps(doc), "csrf": console.csrf()}
    )
    assert started.status_code == 303
    assert console.api("GET", "/runs/llama-ft").json()["spec"]["task_template"]["env"] == {
        "WANDB_MODE": "offline"
    }
    doc["spec"]["array"] = {"size": 4}
    doc["spec"]["start"] = "Gang"
    doc["metadata"]["name"] = "again"
    refused = console.http.post(
        RUNS + "/-/new", data={"mode": "json", "json": json.dumps(doc), "csrf": console.csrf()}
    )
    messages = [str(e.message) for e in validate_data(doc)]
    assert refused.status_code == 422
    assert messages and all(f"spec.start: {m}" in html.unescape(refused.text) for m in messages)


def test_a_taken_name_is_the_api_s_conflict_beside_the_name(console):
    console.login()
    console.http.post(RUNS + "/-/new", data={**LLAMA, "csrf": console.csrf()})
    again = console.http.post(RUNS + "/-/new", data={**LLAMA, "csrf": console.csrf()})
    assert again.status_code == 422
    assert list(field_errors(again.text)) == ["name"]


# ---- the other pages -----------------------------------------------------------------------------


def test_the_cluster_page_colours_a_gang_s_gpus_and_lists_the_queue(console, plane):
    gang = run_doc("gang", start="Gang")
    gang["spec"]["task_template"]["requested_resources"] = {"gpu_requests": {"count": 16}}
    console.api("POST", "/runs", json=gang)
    capped = run_doc("capped", array={"size": 5, "max_parallel": 2})
    console.api("POST", "/runs", json=capped)
    until(lambda: plane.run("gang").state == "Running", step=plane.step, what="the gang to run")
    console.login()
    page = console.http.get("/o/default/w/default/cluster/default").text
    assert page.count('data-run="gang"') == 16
    assert "Rack rack-1" in page and "NVLink domain nvl-1-1" in page
    assert "3 workers waiting" in page
    assert page.count("Array runs at most 2 workers at once") == 1  # the next waiting copy (seed 001)


def test_the_sources_page_shows_a_source_s_status_revision_and_history(console):
    state = {
        "inventory": {
            "train": {"spec": run_doc("train"), "applied_at": 1_000_000.0, "file": "runs/train.yaml"}
        },
        "status": {
            "state": "Stalled",
            "reason": "ApplyFailed",
            "message": HOSTILE,
            "revision": "main@sha1:abc",
        },
        "history": [
            {
                "who": "ana",
                "when": 1_000_000.0,
                "commit": "abc",
                "summary": {"create": 1},
                "result": "applied",
            },
            {
                "who": "bo@laptop:10748",
                "when": 1_000_100.0,
                "commit": "def",
                "summary": {"update": 1},
                "result": "failed: no",
            },
        ],
    }
    assert console.api("PUT", "/sources/prod", json=state).status_code == 200
    console.login()
    page = console.http.get("/o/default/w/default/sources").text
    assert 'data-source="prod"' in page and "Stalled" in page and "ApplyFailed" in page
    assert "main@sha1:abc" in page and "runs/train.yaml" in page and "failed: no" in page
    assert HOSTILE not in page
    assert "bo@laptop" in page and "10748" not in page  # who applied, without the pid
    newer = {"history": [{"who": "cy", "when": 2_000_000.0, "result": "applied"}]}
    assert console.api("PUT", "/sources/zz-newer", json=newer).status_code == 200
    page = console.http.get("/o/default/w/default/sources").text
    assert page.index('data-source="zz-newer"') < page.index('data-source="prod"')  # the latest first
    one = console.http.get("/o/default/w/default/sources/prod")
    assert one.status_code == 200 and 'data-source="zz-newer"' not in one.text and "ApplyFailed" in one.text
    assert console.http.get("/o/default/w/default/sources/nope").status_code == 404


def test_the_cli_prints_the_run_s_console_url():
    url = "http://127.0.0.1:8750/api/v1/orgs/default/workspaces/default/clusters/default/api/runs/llama-ft"
    assert console_url(url) == "http://127.0.0.1:8750/o/default/w/default/jobs/default/llama-ft"
    assert console_url("http://elsewhere/x") == "http://elsewhere/x"


def test_a_form_larger_than_one_mib_is_refused_unread(console):
    answer = console.http.post("/login", content=b"token=" + b"x" * (2 << 20))
    assert answer.status_code == 413
    assert answer.json() == {"detail": "the form is larger than 1 MiB"}


def test_a_workspace_token_sees_its_workspace_only_and_a_read_token_changes_nothing(console, plane):
    def token(name: str, role: str) -> str:
        made = console.api("POST", "/tokens", json={"name": name, "role": role, "workspace": "team-a"})
        assert made.status_code == 201, made.text
        return made.json()["token"]

    reader, writer = token("a-read", "read"), token("a-write", "write")
    team_a = "/api/v1/orgs/default/workspaces/team-a/clusters/default/api"
    assert console.http.post(team_a + "/runs", json=run_doc("train"), headers=BEARER).status_code == 201
    assert console.api("POST", "/runs", json=run_doc("elsewhere")).status_code == 201
    mine = "/o/default/w/team-a/jobs/default"
    assert console.http.post("/login", data={"token": reader, "next": "/"}).status_code == 303
    assert console.http.get("/").headers["location"] == mine
    page = console.http.get(mine).text
    assert 'data-run="train"' in page and 'data-run="elsewhere"' not in page
    refused = console.http.get(RUNS)  # the default workspace
    assert refused.status_code == 404 and "this token (a-read) holds" in html.unescape(refused.text)
    csrf = console.csrf(mine)
    assert console.http.post(mine + "/train/cancel", data={"csrf": csrf}).status_code == 404
    console.http.cookies.clear()
    assert console.http.post("/login", data={"token": writer, "next": mine}).status_code == 303
    done = console.http.post(mine + "/train/cancel", data={"csrf": console.csrf(mine)})
    assert done.status_code == 303 and done.headers["location"] == mine + "/train"
    assert console.api("GET", "/runs/elsewhere").json()["status"]["state"] != "Cancelled"


def test_a_finished_array_s_page_reruns_its_failed_copies_and_a_running_run_is_refused(console, plane):
    doc = tiny("sw", command="exit $((RANK % 2))", array={"size": 4, "max_parallel": 4})
    assert console.api("POST", "/runs", json=doc).status_code == 201
    plane.settle_run("sw")
    console.login()
    page = console.http.get(RUNS + "/sw").text
    assert 'id="rerun"' in page and 'id="rerun-failed"' in page
    done = console.http.post(RUNS + "/sw/rerun", data={"failed": "true", "csrf": console.csrf()})
    assert done.status_code == 303 and done.headers["location"] == RUNS + "/sw-rerun-1"
    rerun = console.api("GET", "/runs/sw-rerun-1").json()
    assert rerun["spec"]["array"]["size"] == 2
    assert rerun["metadata"]["annotations"]["astra.rerun-indices"] == "1,3"
    running = console.http.get(RUNS + "/sw-rerun-1").text
    assert 'id="rerun"' not in running  # only a finished run runs again
    refused = console.http.post(RUNS + "/sw-rerun-1/rerun", data={"csrf": console.csrf()})
    assert refused.status_code == 409
    assert "only a finished run runs again" in html.unescape(refused.text)
    events = console.api("GET", "/events", params={"run": "sw"}).json()
    assert any(
        e.get("action") == "rerun"
        for e in (events.get("items", events) if isinstance(events, dict) else events)
    )


def test_the_seeds_form_without_a_command_is_refused_beside_the_command_field(console):
    """The local cluster cannot run an image's entrypoint: said by the form, before 16 crash loops."""
    console.login()
    seeds = {k: v for k, v in LLAMA.items() if k not in ("command", "args")}
    answer = console.http.post(RUNS + "/-/new", data={**seeds, "csrf": console.csrf()})
    assert answer.status_code == 422
    assert field_errors(answer.text)["command"] == [
        "this worker names no command, and the local executor cannot run an image's entrypoint: "
        "give task_template.command"
    ]
    assert console.api("GET", "/runs/llama-ft").status_code == 404  # nothing was submitted


def test_a_run_that_failed_before_placement_says_so_and_the_icon_is_there(console, plane):
    huge = run_doc("huge")
    huge["spec"]["task_template"]["requested_resources"] = {"gpu_requests": {"count": 200}}
    assert console.api("POST", "/runs", json=huge).status_code == 201
    until(lambda: plane.run("huge").state == "Failed", step=plane.step, what="huge to fail")
    console.login()
    page = console.http.get(RUNS + "/huge").text
    assert '<dd id="readout">no workers: failed before placement</dd>' in page
    assert "running of 0" not in page
    icon = console.http.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")


def test_a_run_page_shows_its_schedule_and_its_chain_both_ways(console, plane):
    nightly = run_doc("nightly", schedule={"cron": "0 2 * * *", "timezone": "Europe/Paris", "keep": 5})
    assert console.api("POST", "/runs", json=nightly).status_code == 201
    assert console.api("POST", "/runs", json=run_doc("prep")).status_code == 201
    train = run_doc("train", depends_on=[{"run": "prep"}, {"run": "tokens", "when": "Finished"}])
    assert console.api("POST", "/runs", json=train).status_code == 201
    plane.step()
    console.login()
    page = console.http.get(RUNS + "/nightly").text
    assert "<code>0 2 * * *</code> (Europe/Paris), concurrency Forbid, keeps 5 finished" in page
    assert "Waiting for its schedule (&#39;0 2 * * *&#39;, Europe/Paris)" in page
    assert 'id="schedule-next">1970-01-13' in page  # the manual clock's next 02:00 in Paris
    assert "No workers yet." in page and "data-worker=" not in page
    page = console.http.get(RUNS + "/train").text
    waits = re.sub(r"<[^>]+>", "", re.search(r'<dd id="waits-for">(.*?)</dd>', page).group(1))
    state = plane.run("prep").state  # its process may be starting or running: the page says which
    assert waits == f"prep (when Completed; it is {state}), tokens (when Finished; not created yet)"
    assert 'id="schedule"' not in page
    page = console.http.get(RUNS + "/prep").text
    waited = re.sub(r"<[^>]+>", "", re.search(r'<dd id="waited-by">(.*?)</dd>', page).group(1))
    assert waited == "train (when Completed)"
