"""Every request error is a 4xx with a message, never a 500; a refused request stores nothing.

Each case is one an attacker or a careless client sent (issue 12, case 4) or one the fuzzer
found (tests/hostile/test_fuzzed_api.py). The API is driven in-process (httpx's ASGI transport:
an exception the app does not answer is raised here, so a 500 cannot hide).
"""

from __future__ import annotations

import asyncio
import base64
import json

import httpx
import pytest

from reconciler.controlplane.api import body
from reconciler.runspec import messages as msg
from tests.controlplane_api.conftest import LONG, TOKEN, Client, Plane
from tests.controlplane_api.test_api import tiny

JSON = {"content-type": "application/json"}
TT = "spec.task_template"


@pytest.fixture
def client(tmp_path):
    plane = Plane(tmp_path)
    yield Client(plane)
    plane.close()


def problems(r: httpx.Response) -> dict[str, str]:
    assert r.status_code == 422, r.text
    return {p["path"]: p["message"] for p in r.json()}


def post_text(client, text: str, path: str = "/api/runs") -> httpx.Response:
    return client.post(path, content=text.encode("utf-8", "surrogatepass"), headers=JSON)


def with_template(name: str, text_of_template: str) -> str:
    """A run document as JSON text whose task template's JSON is ``text_of_template`` (which
    Python's ``json.dumps`` could not write: NaN as a bare word, a key twice, a lone escape)."""
    doc = json.dumps(tiny(name))
    plain = json.dumps(tiny(name)["spec"]["task_template"])
    return doc.replace(plain, text_of_template)


# ---- malformed bodies ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/api/runs", "/api/sources/deep", "/api/sources/deep/status"])
@pytest.mark.parametrize("opening", ["[", '{"a":'])
def test_a_body_nested_10000_levels_deep_is_a_422_not_a_recursion_error(client, path, opening):
    closing = "]" if opening == "[" else "}"
    text = opening * 10_000 + "1" + closing * 10_000
    request = client.post if path == "/api/runs" else client.put
    r = request(path, content=text, headers=JSON)
    assert problems(r) == {"": body.TOO_DEEP}
    assert client.get("/api/sources/deep").status_code == 404


def test_brackets_inside_strings_do_not_count_as_nesting(client):
    doc = tiny("brackets")
    doc["spec"]["task_template"]["args"] = ["-c", "echo " + "[{" * 5000]
    assert client.post("/api/runs", json=doc).status_code == 201


def test_a_run_nested_past_32_levels_is_named_by_the_validator_at_its_path(client):
    doc = tiny("deepish")
    doc["metadata"]["annotations"] = {"a": json.dumps(0)}
    deep: dict = {}
    doc["spec"]["task_template"]["env"] = deep
    for _ in range(40):
        deep["x"] = {}
        deep = deep["x"]
    found = problems(client.post("/api/runs", json=doc))
    assert msg.TOO_DEEP in found.values()


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        (b"{", "the body is not JSON: Expecting property name enclosed in double quotes: line 1 column 2"),
        (b"\xff\xfe{}", "the body is not JSON: it is not UTF-8 text (invalid start byte at byte 0)"),
        (b"", "the body is not JSON: Expecting value: line 1 column 1 (char 0)"),
    ],
    ids=["cut-short", "not-utf8", "empty"],
)
def test_a_body_that_is_not_json_says_so(client, raw, said):
    found = problems(client.post("/api/runs", content=raw, headers=JSON))
    assert found[""].startswith(said)


def test_a_duplicate_key_is_refused_naming_it_and_its_path(client):
    text = with_template("twice", '{"image": "a", "image": "b", "command": "true"}')
    assert problems(post_text(client, text)) == {
        f"{TT}.image": "duplicate key 'image': a key may appear once in an object"
    }
    r = client.put(
        "/api/sources/twice/status", content=b'{"state": "Ready", "state": "Stalled"}', headers=JSON
    )
    assert problems(r) == {"state": "duplicate key 'state': a key may appear once in an object"}
    assert client.get("/api/runs/twice").status_code == 404
    assert client.get("/api/sources/twice").status_code == 404


@pytest.mark.parametrize(
    ("word", "named"),
    [("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity"), ("1e999", "Infinity")],
)
def test_nan_and_infinity_are_named_as_such_not_as_null(client, word, named):
    text = with_template("nan", f'{{"image": "a", "command": "true", "time_limit_seconds": {word}}}')
    found = problems(post_text(client, text))
    assert found == {f"{TT}.time_limit_seconds": f"must be a finite number, not {named}"}
    r = client.put("/api/sources/nan/status", content=f'{{"updated_at": {word}}}', headers=JSON)
    assert problems(r) == {"updated_at": f"must be a finite number, not {named}"}
    assert client.get("/api/sources/nan").status_code == 404


def test_an_integer_too_long_to_read_is_refused_at_its_path(client):
    digits = "9" * 5000
    text = with_template("long", f'{{"image": "a", "command": "true", "time_limit_seconds": {digits}}}')
    assert problems(post_text(client, text)) == {
        f"{TT}.time_limit_seconds": "is a whole number of 5000 digits; a request's numbers have at most 4300"
    }
    text = with_template(
        "wide", '{"image": "a", "command": "true", "time_limit_seconds": 123456789012345678901234567890}'
    )
    assert problems(post_text(client, text)) == {f"{TT}.time_limit_seconds": msg.INTEGER_RANGE}


def test_a_body_over_16_mib_is_a_413_before_it_is_read(client):
    r = client.post("/api/runs", content=b" " * (body.BODY_MAX_BYTES + 1), headers=JSON)
    assert r.status_code == 413
    assert r.json() == {
        "detail": "the body is 16777217 bytes; a request's body may be at most 16777216 bytes (16 MiB)"
    }


def test_the_webhook_body_is_bounded_too(client):
    r = client.post("/api/sources/w/hook", content=b"{}" * (body.BODY_MAX_BYTES // 2 + 1), headers=JSON)
    assert r.status_code == 413


def test_the_token_is_checked_before_any_of_the_body_is_read(client):
    r = client.post("/api/runs", content="[" * 10_000, headers=JSON, token="wrong")
    assert r.status_code == 401
    r = client.post(LONG.replace("default", "other", 1) + "/runs", content=b"\xff", headers=JSON)
    assert r.status_code == 403


# ---- text that is not Unicode, or holds NUL ---------------------------------------------------


def test_a_lone_surrogate_is_refused_and_stores_nothing_and_every_read_still_answers(client):
    text = with_template("poison", '{"image": "a", "command": "true", "env": {"A": "\\udc00"}}')
    assert problems(post_text(client, text)) == {f"{TT}.env.A": msg.TEXT}
    assert client.get("/api/runs/poison").status_code == 404
    for listing in ("/api/runs", "/api/runs?view=summary"):
        r = client.get(listing)
        assert r.status_code == 200 and r.json()["items"] == []
    r = client.post("/api/sources/poison/lock", content=b'{"owner": "\\udc00"}', headers=JSON)
    assert problems(r) == {"owner": msg.TEXT}
    assert client.get("/api/sources/poison").status_code == 404


def test_a_surrogate_in_a_key_is_named_printably(client):
    r = client.put("/api/sources/key/status", content=b'{"\\ud800x": 1}', headers=JSON)
    assert problems(r) == {"\\ud800x": msg.TEXT}


def test_a_nul_in_any_text_of_any_body_is_refused(client):
    r = client.put("/api/sources/nul/status", json={"message": "a\x00b"})
    assert problems(r) == {"message": msg.TEXT}
    doc = tiny("nul", command="echo \x00")
    assert problems(client.post("/api/runs", json=doc)) == {f"{TT}.args[1]": msg.TEXT}


# ---- what the fuzzer found -----------------------------------------------------------------------


def test_a_lock_id_that_cannot_travel_in_a_header_is_refused_and_stores_nothing(client):
    """It went into the source's ETag: the header could not be written, after the lock was."""
    r = client.post("/api/sources/tag/lock", json={"id": "Ā-lock", "owner": "me"})
    assert r.status_code == 422
    assert r.json()[0]["path"] == "id" and r.json()[0]["message"].startswith("must match ")
    assert client.get("/api/sources/tag").status_code == 404
    r = client.post("/api/sources/tag/lock", json={"id": "0f3a9c1d2e4b", "owner": "me"})
    assert r.status_code == 201 and r.headers["ETag"] == '"0-0f3a9c1d2e4b"'


def test_a_resource_version_is_an_integer_every_json_reader_holds(client):
    assert client.put("/api/sources/rv", json={"resource_version": 0.0}).status_code == 200
    r = client.put("/api/sources/rv", json={"resource_version": 2**53})
    assert problems(r) == {"resource_version": "must be at most 9007199254740991"}
    r = client.put("/api/sources/rv", json={"resource_version": True})
    assert problems(r) == {"resource_version": "must be an integer"}


def test_a_method_not_served_is_a_405_whose_allow_lists_every_method_of_the_path(client):
    r = client.request("PATCH", "/api/runs")
    assert (r.status_code, r.headers["Allow"]) == (405, "GET, POST")
    assert r.json() == {"detail": "PATCH is not served here; this path takes GET, POST"}
    r = client.request("OPTIONS", LONG + "/runs/x")
    assert r.headers["Allow"] == "DELETE, GET, PUT"


# ---- query parameters ----------------------------------------------------------------------------


@pytest.fixture
def worker(client):
    assert client.post("/api/runs", json=tiny("q")).status_code == 201
    client.plane.step()
    return "q-0"


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("attempt=²", "attempt must be an integer"),
        ("attempt=" + "9" * 5000, "attempt must be a whole number that fits in 64 bits"),
        ("attempt=-1", "attempt must be at least 0"),
        ("attempt=", "attempt must be an integer"),
    ],
    ids=["superscript-two", "5000-digits", "negative", "empty"],
)
def test_a_malformed_attempt_is_a_422_in_words(client, worker, query, said):
    r = client.get(f"/api/workers/{worker}/logs?{query}")
    assert (r.status_code, r.json()) == (422, {"detail": said})


def test_a_continue_token_nested_10000_deep_is_not_one_the_server_gave(client):
    token = base64.urlsafe_b64encode(b"[" * 10_000).decode().rstrip("=")
    r = client.get(f"/api/workers?limit=1&continue={token}")
    assert (r.status_code, r.json()) == (
        422,
        {"detail": f"continue {token!r} is not a token this server gave"},
    )


def test_an_empty_view_is_an_unknown_view(client):
    r = client.get("/api/runs?view=")
    assert (r.status_code, r.json()) == (422, {"detail": "unknown view '': 'summary', 'full' or 'brief'"})


def test_a_query_parameter_a_call_does_not_take_is_a_400_with_a_suggestion(client):
    r = client.get("/api/runs?veiw=summary")
    assert (r.status_code, r.json()) == (
        400,
        {"detail": "unknown query parameter 'veiw'; did you mean 'view'?"},
    )
    r = client.get("/api/machines?all=1")
    assert r.json() == {"detail": "unknown query parameter 'all': this call takes none"}


# ---- the last resort -----------------------------------------------------------------------------


def test_an_unforeseen_error_is_a_500_in_one_line(client, monkeypatch):
    def broken(*_cluster):
        raise RuntimeError("the disk caught fire")

    monkeypatch.setattr(client.plane.engine.store, "machine_rows", broken)

    async def go():
        transport = httpx.ASGITransport(app=client.app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://astra.test") as c:
            return await c.get("/api/machines", headers={"Authorization": f"Bearer {TOKEN}"})

    r = asyncio.run(go())
    assert (r.status_code, r.json()) == (
        500,
        {"detail": "internal error (RuntimeError): the server's log has the details"},
    )


def test_a_put_of_an_empty_source_answers_it(client):
    """Found by the fuzzer: a source emptied by its own PUT (as 'astra source delete' leaves one)."""
    body = {"history": [], "inventory": {}, "lock_id": None, "resource_version": 0, "status": None}
    r = client.put("/api/sources/0", json=body)
    assert r.status_code == 200
    assert r.json()["inventory"] == {} and r.headers["ETag"]


def test_a_large_compact_body_is_read_as_strictly_as_any(client):
    """A batch as ``astra apply`` writes one (compact UTF-8, about 1 kB a run): a key twice (its
    values holding colons) is still named, an integer past 64 bits still read whole, not rounded."""
    docs = [tiny(f"r{i:03d}", command="echo: équipe") for i in range(300)]

    def batch(text_of_template: str) -> bytes:
        plain = json.dumps(docs[7]["spec"]["task_template"], ensure_ascii=False, separators=(",", ":"))
        text = json.dumps({"runs": docs}, ensure_ascii=False, separators=(",", ":"))
        assert text.count(plain) == 300
        head, tail = text.split(plain, 1)
        return (head + text_of_template + tail).encode()

    twice = batch('{"image":"a:b","image":"c:d","command":"true"}')
    r = client.post("/api/runs:batch", content=twice, headers=JSON)
    assert problems(r) == {f"runs[0].{TT}.image": "duplicate key 'image': a key may appear once in an object"}
    wide = batch('{"image":"a","command":"true","time_limit_seconds":18446744073709551616}')
    r = client.post("/api/runs:batch", content=wide, headers=JSON)
    assert r.status_code == 200
    first, *rest = r.json()["items"]
    assert first["status"] == 422 and first["errors"] == [
        {"path": f"{TT}.time_limit_seconds", "message": msg.INTEGER_RANGE}
    ]
    assert [i["status"] for i in rest] == [201] * 299
    assert client.get("/api/runs/r001").json()["spec"]["task_template"]["args"] == ["-c", "echo: équipe"]
