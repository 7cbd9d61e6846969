"""The REST API fuzzed for real: schemathesis, every check, against a live ``astra server``.

schemathesis reads the server's OpenAPI document (the body of ``POST /runs`` is the published run
schema) and, for every operation, sends a bounded number of generated requests, valid and
invalid, with the server's token; each answer is held to every check schemathesis has: no 5xx,
the status, its content type, headers and body as documented, invalid data refused, valid data
accepted, the token enforced (without it, and with another), a method not served answered 405
with ``Allow`` listing what is.

Two facts the document cannot state, each held here by other means:

* **NUL.** Every text of every body refuses NUL characters (docs/limits.md;
  ``test_request_errors.py`` holds it); JSON Schema would say so only with a pattern on each
  string, so schemathesis generates no NUL (``allow_x00=False``) rather than call each refusal
  a valid request rejected.
* **Cross-field rules.** A run document valid by the schema may still break a rule JSON Schema
  cannot state (CONTRACT §2: ``start_after`` naming a group of the run, a mount path used once,
  the workers of a run summed over its groups), or, in a PUT, change what the run cannot take
  in place; its 422 is right. So for the run writes, ``positive_data_acceptance`` gives way to
  a stricter check: a 422 to a document lists every problem ``validate_data`` finds in it, in
  its words, and nothing else; to a valid one in a PUT, only the in-place rule's words.
* **Token names.** ``POST /tokens`` with a name the org's tokens have is a 409 (as a run's
  name taken): its only refusal of valid data, in its words.
* **Drives.** A run document valid by the schema may name a drive the workspace does not have:
  its 422 names each such drive (``drive 'x' does not exist in workspace default``). ``POST
  /drives`` takes an existing folder of the server's host: a path that is none is a 422 in words.
* **Usage periods.** ``GET /usage`` takes ``since`` or ``month``, not both (as ``astra usage``):
  a valid request's only 422 is that one, in its words.
* **Sealed secrets.** ``POST /secrets:plan`` takes values ``sealed`` with age, which a server
  started without ``--age-identity`` (as this one) cannot open: a valid request's only 422 is
  that, in its words, for each sealed value.
* **Page tokens.** ``GET /workers?continue=`` takes only a token the server gave (any string by
  the schema): a valid request's only 422 is that one, in its words.

The server can run nothing: its workers' ``PATH`` and working folder are empty folders, and its
one machine has no GPU, no core and no memory, so a generated run asking for anything is never
placed (and one asking for nothing could only run a command that is not there).
"""

from __future__ import annotations

import re

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from reconciler.controlplane.api.app import documented_router, openapi_document
from reconciler.runspec import messages as msg
from reconciler.runspec.validate import validate_data
from tests.controlplane_api.conftest import TOKEN, LiveServer

#: Examples per operation: enough to find what a careless client sends, bounded in time.
EXAMPLES = 12
#: The operations whose body is a run document, checked by ``validate_data``.
RUN_WRITES = {("POST", "/runs"), ("POST", "/jobs"), ("PUT", "/runs/{name}"), ("PUT", "/jobs/{name}")}
#: The pages of the worker collection, whose ``continue`` is a token only the server gives.
PAGED = {("GET", "/workers"), ("GET", "/tasks")}
#: Makes a token: a name taken is a 409.
TOKEN_WRITE = ("POST", "/tokens")
#: GPU-hours: ``since`` and ``month`` together are a 422.
USAGE = ("GET", "/usage")
#: A source's plan of its secrets: a sealed value this server (no age identity) cannot open.
SECRETS_PLAN = ("POST", "/secrets:plan")
UNSEALABLE = "the server holds no age identity to open it: start it with astra server --age-identity FILE"
#: The drives' create, whose folder must exist on the server's host (no schema can say so).
DRIVE_CREATE = ("POST", "/drives")
#: A run naming a drive the workspace does not have (the fuzzed server has none).
DRIVE_MISSING = re.compile(r"drive '.*' does not exist in workspace default", re.S)
TEMPLATE_REFUSED = (
    "template",
    "the cluster takes final run specs: render the template first (astra template render, or astra apply)",
)

#: The document the server serves at /openapi.json, made the way it makes it (schemathesis reads
#: a schema when the tests are collected, before any server runs); ``base_url`` checks they agree.
DOCUMENT = openapi_document(documented_router())
schema = schemathesis.openapi.from_dict(DOCUMENT)
schema.config.generation.update(max_examples=EXAMPLES, deterministic=True, allow_x00=False)


@schema.auth(refresh_interval=None)
class Token:
    """The server's token, as schemathesis' own auth: sent with every case, left out or changed
    where a check asks whether it is enforced."""

    def get(self, case, context):
        return TOKEN

    def set(self, case, data, context):
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}


@pytest.fixture(scope="module")
def fuzzed_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzzed")
    for folder in ("empty", "work"):
        (root / folder).mkdir()
    inventory = root / "inventory.yaml"
    inventory.write_text("machines:\n  - {name: nothing, gpus: 0, cpu_cores: 0, memory_bytes: 0}\n")
    server = LiveServer(
        root / "home",
        root / "work",
        args=("--inventory", str(inventory)),
        env={"PATH": str(root / "empty"), "HOME": str(root / "empty")},
    ).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def base_url(fuzzed_server):
    served = httpx.get(fuzzed_server.url + "/openapi.json", timeout=30).json()
    assert served == DOCUMENT
    return fuzzed_server.url + "/api"


@schema.parametrize()
@settings(deadline=None, suppress_health_check=list(HealthCheck))
def test_every_operation_holds_to_every_check(case, base_url):
    key = (case.method.upper(), case.path)
    own = key in RUN_WRITES or key in PAGED or key in (TOKEN_WRITE, DRIVE_CREATE, USAGE, SECRETS_PLAN)
    response = case.call_and_validate(
        base_url=base_url, excluded_checks=[positive_data_acceptance] if own else None
    )
    if key == TOKEN_WRITE and response.status_code == 409:
        taken = f"a token named {case.body['name']} exists in org default"
        assert response.json() == {"detail": taken}, case.as_curl_command()
    if response.status_code != 422:
        return
    if key in PAGED:  # a continue token the server did not give: the only refusal of valid data
        negative = case.meta is not None and case.meta.generation.mode.is_negative
        refused = f"continue {case.query.get('continue')!r} is not a token this server gave"
        assert negative or response.json() == {"detail": refused}, case.as_curl_command()
    elif key == USAGE:
        negative = case.meta is not None and case.meta.generation.mode.is_negative
        both = {"detail": "give --since or --month, not both"}
        assert negative or response.json() == both, case.as_curl_command()
    elif key == SECRETS_PLAN:
        negative = case.meta is not None and case.meta.generation.mode.is_negative
        sealed = isinstance(case.body, dict) and isinstance(case.body.get("sealed"), dict)
        words = {(p["path"], p["message"]) for p in response.json()} if sealed else set()
        opened = {
            (f"sealed.{name}", f"secret {name}: {UNSEALABLE}, or give the command --age-identity FILE")
            for name in (case.body["sealed"] if sealed else {})
        }
        assert negative or (words and words == opened), case.as_curl_command()
    elif key == DRIVE_CREATE:
        negative = case.meta is not None and case.meta.generation.mode.is_negative
        words = {p["message"] for p in response.json()}
        refusals = (  # a folder that is not there, or one in or around astra's home (docs/sandbox.md)
            "is not a folder of the cluster's host: make it first",
            "give a folder outside it",
        )
        assert negative or all(w.endswith(refusals) for w in words)
    elif key in RUN_WRITES and isinstance(case.body, dict):
        answered = {(p["path"], p["message"]) for p in response.json()}
        answered -= {(p, m) for p, m in answered if DRIVE_MISSING.fullmatch(m)}
        found = {(str(e.path), e.message) for e in validate_data(case.body)}
        if found or case.method.upper() == "POST":
            assert found <= answered, case.as_curl_command()
            assert answered - found <= {TEMPLATE_REFUSED}, case.as_curl_command()
        else:  # a valid document, refused as a change the run cannot take in place
            name = case.path_parameters["name"]
            assert all(m in in_place_words(p, name) for p, m in answered), case.as_curl_command()


def in_place_words(path: str, name: str) -> set[str]:
    """What a PUT of a valid document may be refused with: a change the run cannot take in place."""
    return {
        msg.UPDATE_REPLACE_ONLY.format(path=path),
        msg.UPDATE_RENAME,
        f"must be {name}, the run this PUT names",
        TEMPLATE_REFUSED[1],
    }
