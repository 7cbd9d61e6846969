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

import os
from pathlib import Path

import pytest

from tests.controlplane_api.conftest import TOKEN, LiveServer

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
    shot(page, "sources", tmp_path)
    page.goto(RUNS + "/etl")
    expect(page.locator("#owned")).to_contain_text("source prod applied it from")
    live.api("DELETE", "/runs/etl")


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
