"""The console in a real browser: Debian's chromium (``scripts/browser-install.sh``), driven by
playwright through ``executable_path`` (no browser is downloaded), against ``astra server`` in a
process of its own, whose workers are real processes.

The seeds' flows: log in and out; the llama-ft form with the seed's values, checked against the
spec the API then holds; the sweep form (array size 100, at most 8) and its Workers tab with the
readout; a bad form with the exact array messages; a row's Log following a worker's output; the
Sources page after an apply and after a failed one; the GPU map with a gang on it; escaping.

Every wait is playwright's own (a condition polled until its deadline), never a sleep. With
``ASTRA_CONSOLE_SCREENSHOTS=docs/console``, each page's screenshot is written there (the README's).
"""

from __future__ import annotations

import getpass
import os
import socket
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.controlplane_api.conftest import TOKEN, LiveServer, until

playwright_sync = pytest.importorskip(
    "playwright.sync_api", reason="a test dependency: pip install -e '.[test]'"
)
expect = playwright_sync.expect
expect.set_options(timeout=60_000)

CHROMIUM = os.environ.get("ASTRA_TEST_CHROMIUM", "/usr/bin/chromium")
RUNS = "/o/default/w/default/jobs/default"
WAIT_MS = 60_000


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    root = tmp_path_factory.mktemp("console")
    (root / "work").mkdir()
    server = LiveServer(root / "home", root / "work").start()
    yield server
    for run in server.api("GET", "/runs?view=summary").json()["items"]:
        server.api("DELETE", f"/runs/{run['name']}")
    server.stop()


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no chromium at {CHROMIUM}: run scripts/browser-install.sh (task browser:install)")
    with playwright_sync.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser, live):
    context = browser.new_context(base_url=live.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(WAIT_MS)
    opened = context.new_page()
    opened.on("dialog", lambda dialog: dialog.accept())
    yield opened
    context.close()


@pytest.fixture
def signed_in(page):
    page.goto(RUNS)
    page.fill("#token", TOKEN)
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_have_text("Runs")
    return page


def shot(page, name: str, tmp_path: Path) -> None:
    """The page's screenshot, kept in docs/console/ when asked (ASTRA_CONSOLE_SCREENSHOTS)."""
    target = Path(os.environ.get("ASTRA_CONSOLE_SCREENSHOTS") or tmp_path)
    target.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(target / f"{name}.png"), full_page=False)


def test_login_and_logout(page, tmp_path):
    page.goto(RUNS)
    expect(page).to_have_url(f"{page.url.split('/login')[0]}/login?next={RUNS}")
    shot(page, "login", tmp_path)
    page.fill("#token", "not-the-token")
    page.click("button[type=submit]")
    expect(page.locator("#login-error")).to_have_text("That is not a token of this server.")
    page.fill("#token", TOKEN)
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_have_text("Runs")
    cookie = next(c for c in page.context.cookies() if c["name"] == "astra_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert page.evaluate("document.cookie") == ""  # HttpOnly: no script reads it
    page.click("#logout")
    expect(page.locator("#token")).to_be_visible()
    page.goto(RUNS)
    expect(page.locator("#token")).to_be_visible()


def test_the_llama_ft_form_with_the_seed_s_values(signed_in, live, tmp_path):
    page = signed_in
    page.click("text=New → Run")
    page.fill("#name", "llama-ft")
    page.fill("#image", "nvcr.io/nvidia/pytorch:24.08-py3")
    page.fill("#command", "sh")
    page.fill("#args", "-c\necho rank $RANK of $WORLD_SIZE; sleep 120")
    page.fill("#gpus", "16")
    expect(page.locator("#machines")).to_have_value("Automatic")
    page.fill("#cpu", "12")
    page.fill("#memory", "120Gi")
    expect(page.locator("label[for=cpu]")).to_have_text("CPU cores per GPU")
    page.fill("#time_limit", "12h")
    expect(page.locator("#start")).to_have_value("Automatic")
    shot(page, "new-run", tmp_path)
    page.click("#start-run")
    expect(page).to_have_url(live.url + RUNS + "/llama-ft")
    spec = live.api("GET", "/runs/llama-ft").json()["spec"]
    assert spec["task_template"] == {
        "image": "nvcr.io/nvidia/pytorch:24.08-py3",
        "command": "sh",
        "args": ["-c", "echo rank $RANK of $WORLD_SIZE; sleep 120"],
        "requested_resources": {
            "gpu_requests": {"count": 16},
            "per_gpu": {"cpu_cores": 12, "memory_bytes": 128849018880},
        },
        "time_limit_seconds": 43200,
    }
    assert "start" not in spec  # Start stays Automatic: the server's (a gang, when it spans machines)
    expect(page.locator("#run-state")).to_have_text("Running")
    expect(page.locator("#readout")).to_have_text("Workers 2 running of 2")
    shot(page, "run", tmp_path)
    page.goto("/o/default/w/default/cluster/default")
    expect(page.locator('.gpu[data-run="llama-ft"]')).to_have_count(16)
    shot(page, "cluster", tmp_path)
    page.goto(RUNS + "/llama-ft")
    page.click("#delete")
    expect(page).to_have_url(live.url + RUNS)
    assert live.api("GET", "/runs/llama-ft").status_code == 404


def test_the_sweep_form_and_its_workers_tab(signed_in, live, tmp_path):
    page = signed_in
    page.goto(RUNS + "/-/new")
    page.fill("#name", "sweep")
    page.fill("#image", "nvcr.io/nvidia/pytorch:24.08-py3")
    page.fill("#command", "sh")
    page.fill("#args", "-c\necho copy $ASTRAEUS_ARRAY_TASK_ID of $ASTRAEUS_ARRAY_SIZE; sleep 120")
    page.fill("#gpus", "1")
    page.fill("#cpu", "8")
    page.fill("#memory", "32Gi")
    page.fill("#array_size", "100")
    page.fill("#max_parallel", "8")
    page.fill("#time_limit", "1h")
    expect(page.locator("#array-start")).to_have_text("Start is forced to independent for an array.")
    expect(page.locator("#start")).to_be_disabled()
    expect(page.locator("label[for=memory]")).to_have_text("Memory per worker")
    page.click("#start-run")
    expect(page).to_have_url(live.url + RUNS + "/sweep")
    spec = live.api("GET", "/runs/sweep").json()["spec"]
    assert spec["array"] == {"size": 100, "max_parallel": 8} and spec["start"] == "Independent"
    expect(page.locator("#readout")).to_have_text("Workers 8 running of 100")  # followed live
    rows = page.locator("#workers-table tbody tr")
    expect(rows).to_have_count(50)
    expect(rows.nth(8)).to_contain_text("Array runs at most 8 workers at once")  # the next waiting copy
    expect(rows.nth(0)).to_contain_text("Running")
    shot(page, "workers", tmp_path)
    page.locator('tr[data-worker="sweep-3"] a.log-link').click()
    expect(page.locator("#log")).to_have_text("copy 3 of 100\n")
    live.api("DELETE", "/runs/sweep")


def test_a_bad_form_shows_the_seeds_array_messages(signed_in, tmp_path):
    page = signed_in
    page.goto(RUNS + "/-/new")
    page.fill("#name", "sweep-bad")
    page.fill("#image", "busybox")
    page.fill("#array_size", "20000")
    page.fill("#max_parallel", "8")
    page.fill("#drives", "datasets:data")
    page.click("#start-run")
    expect(page.locator('.error[data-for="array_size"]')).to_have_text("array.size must be from 1 to 10000")
    expect(page.locator('.error[data-for="drives"]')).to_have_text(
        "must be an absolute path, starting with '/'"
    )
    page.fill("#array_size", "100")
    page.fill("#max_parallel", "200")
    page.fill("#drives", "")
    page.click("#start-run")
    expect(page.locator('.error[data-for="max_parallel"]')).to_have_text(
        "array.max_parallel must be from 0 (no cap) to array.size (100)"
    )
    expect(page.locator(".error")).to_have_count(1)
    shot(page, "new-run-errors", tmp_path)


def test_a_log_follows_the_worker_s_output_and_shows_markup_as_text(signed_in, live, tmp_path):
    page = signed_in
    script = (
        "echo '<script>window.pwned=1</script> javascript:alert(1)'; "
        "for i in 1 2 3 4 5; do echo line $i; sleep 1; done"
    )
    doc = {
        "metadata": {"name": "chatty", "labels": {"note": "<script>window.pwned=2</script>"}},
        "spec": {"task_template": {"image": "busybox", "command": "sh", "args": ["-c", script]}},
    }
    assert live.api("POST", "/runs", json=doc).status_code == 201
    page.goto(RUNS + "/chatty")
    page.locator('tr[data-worker="chatty-0"] a.log-link').click()  # the row comes with the page's refresh
    log = page.locator("#log")
    expect(log).to_contain_text("line 1")
    expect(log).to_contain_text("line 5")  # appended as it was written, without a reload
    expect(page.locator("#follow")).to_have_text("The worker has ended.")
    expect(log).to_contain_text("<script>window.pwned=1</script> javascript:alert(1)")
    assert page.evaluate("window.pwned") is None
    shot(page, "log", tmp_path)
    page.goto(RUNS)
    expect(page.locator('tr[data-run="chatty"]')).to_contain_text("note=<script>window.pwned=2</script>")
    assert page.evaluate("window.pwned") is None
    shot(page, "runs", tmp_path)


def test_the_sources_page_after_an_apply_and_a_stalled_one(signed_in, live, tmp_path):
    page = signed_in
    folder = live.cwd / "runs"
    folder.mkdir(exist_ok=True)
    (folder / "etl.yaml").write_text(
        "metadata: {name: etl}\nspec:\n  task_template:\n    image: busybox\n    command: sh\n"
        "    args: [-c, sleep 60]\n"
    )
    applied = live.astra("apply", "-f", "runs", "--yes", "--source", "prod")  # no git: files' digest
    assert applied.returncode == 0, applied.stderr
    page.goto("/o/default/w/default/sources")
    source = page.locator('[data-source="prod"]')
    expect(source.locator("h2")).to_have_text("prod Ready")  # an apply writes the source's status
    expect(source).to_contain_text("runs/etl.yaml")
    expect(source.locator(".history tbody tr")).to_have_count(1)
    expect(source.locator(".history tbody tr")).to_contain_text("created: etl")
    expect(source.locator(".revision")).to_contain_text("sha256:")
    # a watch pass over a broken file: the status it writes is the source's, said as it is
    (folder / "broken.yaml").write_text(
        'metadata: {name: broken}\nspec:\n  task_template: {image: busybox}\n  "<b>x</b>": 1\n'
    )
    watched = live.astra("watch", "runs", "--source", "prod", "--once")
    assert "Stalled" in watched.stdout + watched.stderr, watched.stdout + watched.stderr
    page.reload()
    expect(source.locator("h2")).to_have_text("prod Stalled")
    expect(source.locator(".reason")).to_contain_text("ValidationFailed")
    expect(source.locator(".reason")).to_contain_text("broken.yaml")
    expect(source.locator(".reason")).to_contain_text("unknown field '<b>x</b>'")  # a file's words are text
    (folder / "broken.yaml").unlink()
    shot(page, "sources-stalled", tmp_path)
    page.goto(RUNS + "/etl")
    expect(page.locator("#owned")).to_contain_text("source prod applied it from")
    page.goto("/o/default/w/default/sources")
    expect(source.locator(f'a[href="{RUNS}/etl"]')).to_have_count(1)
    deleted = live.astra("delete", "etl", "--yes")  # issue 32: it leaves the source's runs and count
    assert deleted.returncode == 0, deleted.stderr
    page.reload()
    expect(source.locator("h2")).to_be_visible()
    expect(source.locator(f'a[href="{RUNS}/etl"]')).to_have_count(0)  # no link to a "Not found" page


def test_astra_console_opens_a_run_logged_in_with_a_one_time_link(browser, live):
    printed = live.astra("console", "chatty", "--no-browser")
    assert printed.returncode == 0, printed.stderr
    link = printed.stdout.strip()
    assert link.startswith(live.url + "/login/once/")
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(link)
        expect(page).to_have_url(live.url + RUNS + "/chatty")
        expect(page.locator("h1")).to_contain_text("chatty")
        other = context.new_page()  # the same browser, logged in; the link itself is spent
        other.goto(link)
        expect(other.locator("#login-error")).to_have_text("That link was used already, or is too old.")
    finally:
        context.close()


def test_the_truth_at_a_glance_no_command_refused_a_failed_run_s_words_and_the_icon(
    signed_in, live, tmp_path
):
    """Issue 32's console items: the seeds' form with no Command is refused beside the field in
    the executor's words; a run that failed before placement says so where the readout was (its
    readout once, its reason not repeated); the icon answers."""
    page = signed_in
    page.goto(RUNS + "/-/new")
    page.fill("#name", "llama-ft")
    page.fill("#image", "nvcr.io/nvidia/pytorch:24.08-py3")
    page.fill("#gpus", "16")
    page.click("#start-run")
    expect(page.locator('p.error[data-for="command"]')).to_have_text(
        "this worker names no command, and the local executor cannot run an image's entrypoint: "
        "give task_template.command"
    )
    shot(page, "new-run-no-command", tmp_path)
    assert live.api("GET", "/runs/llama-ft").status_code == 404
    huge = {
        "metadata": {"name": "gpus-huge"},
        "spec": {
            "task_template": {
                "image": "x",
                "command": "sh",
                "requested_resources": {"gpu_requests": {"count": 200}},
            }
        },
    }
    assert live.api("POST", "/runs", json=huge).status_code == 201
    page.goto(RUNS + "/gpus-huge")
    expect(page.locator("#run-state")).to_have_text("Failed")
    expect(page.locator("#readout")).to_have_text("no workers: failed before placement")
    expect(page.locator("#run-reason")).to_contain_text("200")
    shot(page, "run-failed-before-placement", tmp_path)
    icon = page.request.get(live.url + "/favicon.ico")
    assert icon.status == 200 and icon.headers["content-type"].startswith("image/svg+xml")
    live.api("DELETE", "/runs/gpus-huge")


def _doc(name: str, script: str, **spec) -> dict:
    template = {"image": "busybox", "command": "sh", "args": ["-c", script]}
    return {"metadata": {"name": name}, "spec": {"task_template": template, **spec}}


def _lines(page, selector: str) -> int:
    """How many lines the text of ``selector`` takes on the screen (its text's rectangles)."""
    return page.locator(selector).evaluate(
        "el => { const r = document.createRange(); r.selectNodeContents(el);"
        " return new Set([...r.getClientRects()].map(x => Math.round(x.top))).size; }"
    )


def test_a_wrong_token_then_the_right_one_lands_on_the_page_first_asked_for_and_never_away(
    page, live, tmp_path
):
    """Issue 32: ``?next=`` is kept through a wrong token; ``next`` is only ever a path here."""
    asked = "/o/default/w/default/cluster/default"
    page.goto(asked)
    expect(page.locator("#token")).to_be_visible()
    page.fill("#token", "not-the-token")
    page.click("button[type=submit]")
    expect(page.locator("#login-error")).to_have_text("That is not a token of this server.")
    expect(page.locator("#login-next")).to_have_text(f"Then back to {asked}.")
    shot(page, "login-wrong-token", tmp_path)
    page.fill("#token", TOKEN)
    page.click("button[type=submit]")
    expect(page).to_have_url(live.url + asked)
    expect(page.locator("h1")).to_have_text("Cluster default")
    for away in ("https://evil.example/", "//evil.example/", "/\\evil.example/", "/\t/evil.example"):
        page.goto("/login?next=" + quote(away, safe=""))
        page.fill("#token", "wrong")
        page.click("button[type=submit]")
        expect(page.locator("#login-error")).to_be_visible()
        expect(page.locator("#login-next")).to_have_count(0)  # not kept: the start page it is
        page.fill("#token", TOKEN)
        page.click("button[type=submit]")
        expect(page).to_have_url(live.url + RUNS)  # the start page: never another site
        expect(page.locator("h1")).to_have_text("Runs")


def test_waiting_copies_show_the_gpus_they_ask_for_and_no_log_link(signed_in, live, tmp_path):
    """Issue 32: in the queue and the Workers tab a waiting copy asks for 1 GPU (it holds none);
    the readout once; names whole beside a long reason; no Log link for a copy never started."""
    page = signed_in
    name = "lr-sweep-with-a-long-hyphenated-name"
    doc = _doc(name, "sleep 120", array={"size": 6, "max_parallel": 2})
    doc["spec"]["task_template"]["requested_resources"] = {"gpu_requests": {"count": 1}}
    assert live.api("POST", "/runs", json=doc).status_code == 201
    page.goto(f"{RUNS}/{name}")
    expect(page.locator("#readout")).to_have_text("Workers 2 running of 6")
    expect(page.get_by_text("Workers 2 running of 6", exact=True)).to_have_count(1)  # the readout once
    running, waiting = (
        page.locator(f'tr[data-worker="{name}-0"]'),
        page.locator(f'tr[data-worker="{name}-5"]'),
    )
    expect(running.locator("td.gpu-count")).to_have_text("1 / 1")
    expect(waiting.locator("td.gpu-count")).to_have_text("0 / 1")
    expect(waiting).to_contain_text("Pending")
    expect(running.locator("a.log-link")).to_have_count(1)
    expect(waiting.locator("a.log-link")).to_have_count(0)  # never started: no Log to show
    assert _lines(page, f'tr[data-worker="{name}-5"] td.name') == 1  # whole, not cut at a hyphen
    expect(page.locator("dt", has_text="Run restarts")).to_have_count(1)
    shot(page, "workers-waiting", tmp_path)
    page.goto("/o/default/w/default/cluster/default")
    queue = page.locator("#queue tbody tr", has_text=f"{name}-5")
    expect(queue.locator("td.gpu-count")).to_have_text("1")
    expect(page.locator("#queue thead")).to_contain_text("GPUs asked")
    expect(page.locator("#queue tbody tr", has_text=name)).to_have_count(4)
    assert _lines(page, f'#queue tbody tr:has-text("{name}-5") td.name >> nth=1') == 1  # the worker
    page.locator("#queue").scroll_into_view_if_needed()
    shot(page, "queue", tmp_path)
    live.api("DELETE", f"/runs/{name}")


def test_a_log_says_the_worker_s_state_attempt_machine_and_masking(signed_in, live, tmp_path):
    """Issue 32: the Log page shows the worker's state and reason, which start it is on
    (``ASTRAEUS_ATTEMPT``, its restarts and why), its machine; issue 30: masking is on. The
    worker fails its first start and runs on its second (one real backoff of the live server)."""
    page = signed_in
    put = live.astra("secret", "set", "hf-token", input="s3cr3t-canary-value")
    assert put.returncode == 0, put.stderr
    script = 'echo "attempt $ASTRAEUS_ATTEMPT token=$HF"; [ "$ASTRAEUS_ATTEMPT" = 0 ] && exit 3; sleep 120'
    doc = _doc("resumer", script)
    doc["spec"]["task_template"]["env"] = {"HF": {"secret": "hf-token"}}
    assert live.api("POST", "/runs", json=doc).status_code == 201
    page.goto(RUNS + "/resumer/log/resumer-0")
    expect(page.locator("#masking")).to_contain_text(
        "masking is on: the value of secret hf-token is shown as ***"
    )
    expect(page.locator("#attempt")).to_have_text("ASTRAEUS_ATTEMPT=1 (started 2 times)")  # followed live
    expect(page.locator("#worker-state")).to_contain_text("Running")
    expect(page.locator("#restarts")).to_have_text("1, last: Failed")
    machine = live.api("GET", "/runs/resumer/workers").json()["items"][0]["machine"]
    assert machine
    expect(page.locator("#machine")).to_have_text(machine)
    expect(page.locator("#log")).to_have_text("attempt 1 token=***\n")  # the start it is on, followed
    assert "s3cr3t-canary-value" not in page.content()
    shot(page, "log-attempt", tmp_path)
    page.goto(RUNS + "/resumer")  # the worker's restart is its row's; the run's own restarts stay 0
    expect(page.locator('tr[data-worker="resumer-0"] td').nth(6)).to_have_text("1")
    expect(
        page.locator("dt", has_text="Run restarts").locator("xpath=following-sibling::dd[1]")
    ).to_have_text("0")
    live.api("DELETE", "/runs/resumer")


TRAIN = """\
metadata: {{name: gf-train}}
spec:
  task_template:
    image: busybox
    command: sh
    args: [-c, "sleep 300 # {word}"]
    requested_resources: {{gpu_requests: {{count: 1}}}}
"""


def test_sources_latest_first_who_as_a_person_reads_it_and_held_replaces(signed_in, live, tmp_path):
    """Issue 32: the source applied last comes first and its applier is ``user@host`` (no pid);
    issue 31: a held replace is on the Sources page and on the source's own page."""
    page = signed_in
    for source, text in (("aa-older", "etl"), ("zz-newer", "train")):
        folder = live.cwd / source
        folder.mkdir(exist_ok=True)
        (folder / "run.yaml").write_text(TRAIN.format(word="--lr=1e-4").replace("gf-train", f"{text}-run"))
        applied = live.astra("apply", "-f", source, "--yes", "--source", source)
        assert applied.returncode == 0, applied.stderr
    until(lambda: _state(live, "train-run") == "Running", what="train-run to run")
    (live.cwd / "zz-newer" / "run.yaml").write_text(
        TRAIN.format(word="--lr=3e-4").replace("gf-train", "train-run")
    )
    held = live.astra("apply", "-f", "zz-newer", "--yes", "--source", "zz-newer")
    assert held.returncode == 0, held.stderr
    assert "held" in held.stdout, held.stdout
    page.goto("/o/default/w/default/sources")
    names = page.locator("section.source").evaluate_all("els => els.map(e => e.dataset.source)")
    assert names[:2] == ["zz-newer", "aa-older"], names  # the latest activity first, not by name
    newer = page.locator('[data-source="zz-newer"]')
    person = f"{getpass.getuser()}@{socket.gethostname()}"
    expect(newer.locator("dd.who")).to_have_text(person)
    expect(newer.locator(".history td.who").first).to_have_text(person)
    replace = newer.locator('[data-held="train-run"]')
    expect(replace).to_contain_text("train-run is Running")
    expect(replace).to_contain_text("it will be replaced when it ends")
    shot(page, "sources", tmp_path)
    newer.locator("h2 a").click()
    expect(page).to_have_url(live.url + "/o/default/w/default/sources/zz-newer")
    expect(page.locator("h1")).to_contain_text("zz-newer")
    expect(page.locator('[data-held="train-run"]')).to_contain_text("it will be replaced when it ends")
    shot(page, "source", tmp_path)
    page.goto(RUNS + "/train-run")  # the run's own page says it too
    expect(page.locator("#held-replace")).to_contain_text(
        "Replace held by source zz-newer: train-run is Running"
    )
    expect(page.locator("#held-replace")).to_contain_text("astra apply --replace train-run replaces it now.")
    shot(page, "run-held-replace", tmp_path)
    page.goto(RUNS)
    page.locator('tr[data-run="train-run"] a', has_text="zz-newer").click()
    expect(page).to_have_url(live.url + "/o/default/w/default/sources/zz-newer")
    for run in ("etl-run", "train-run"):
        live.api("DELETE", f"/runs/{run}")


def _state(live, run: str) -> str:
    return live.api("GET", f"/runs/{run}").json()["status"]["state"]


def test_a_crash_looping_run_says_its_worker_restarts_on_the_runs_page_and_its_own(signed_in, live, tmp_path):
    """Issue 32: a run whose command does not exist says at its own level that its worker
    restarts and why (not ``Waiting in the queue``), on the Runs page and the run's; its name
    is whole beside the long reason."""
    page = signed_in
    name = "crashloop-with-a-long-hyphenated-name"
    doc = {"metadata": {"name": name}, "spec": {"task_template": {"image": "busybox", "command": "trainz"}}}
    assert live.api("POST", "/runs", json=doc).status_code == 201
    said = (
        f"1 of 1 workers restarting: Worker {name}-0: Could not start 'trainz': "
        "No such file or directory (exit code 127); restart 1 of 10 in 10 s"
    )
    page.goto(f"{RUNS}/{name}")
    expect(page.locator("#run-state")).to_have_text("Pending")
    expect(page.locator("#run-reason")).to_have_text(said)  # followed live
    shot(page, "run-restarting", tmp_path)
    page.goto(RUNS)
    row = page.locator(f'tr[data-run="{name}"]')
    expect(row.locator("td.reason")).to_have_text(said)
    assert _lines(page, f'tr[data-run="{name}"] td.name') == 1  # whole, not cut at a hyphen
    live.api("DELETE", f"/runs/{name}")
