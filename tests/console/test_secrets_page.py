"""The console's Secrets page (issue 30): names, who set each, the runs that read it; set and
delete for a token that may write; a value never on any page, before or after the form is sent."""

from __future__ import annotations

from tests.controlplane_api.conftest import TOKEN
from tests.controlplane_api.test_teams import make_token

from .conftest import RUNS, Console

PAGE = "/o/default/w/default/secrets"
VALUE = "hf_console_canary_90c4"


def reads(name: str, secret: str) -> dict:
    template = {"image": "busybox", "command": "sh", "args": ["-c", "sleep 60"]}
    template["env"] = {"HF_TOKEN": {"secret": secret}}
    return {"metadata": {"name": name}, "spec": {"task_template": template}}


def test_a_secret_set_on_the_page_is_listed_by_name_and_its_value_is_never_shown(console):
    console.login()
    csrf = console.csrf(PAGE)
    sent = console.http.post(PAGE, data={"csrf": csrf, "name": "hf-token", "value": VALUE})
    assert (sent.status_code, sent.headers["location"]) == (303, PAGE)  # the page, without the value
    assert console.plane.store.secret_value("hf-token", "default/default") == VALUE.encode()
    assert console.api("POST", "/runs", json=reads("train", "hf-token")).status_code == 201
    page = console.http.get(PAGE)
    assert 'data-secret="hf-token"' in page.text and f'href="{RUNS}/train"' in page.text
    assert VALUE not in page.text and "90c4" not in page.text
    refused = console.http.post(f"{PAGE}/hf-token/delete", data={"csrf": console.csrf(PAGE)})
    assert refused.status_code == 409
    assert "secret &#39;hf-token&#39; is in use by run train" in refused.text
    forced = console.http.post(f"{PAGE}/hf-token/delete", data={"csrf": console.csrf(PAGE), "force": "true"})
    assert forced.status_code == 303
    assert console.plane.store.secret_value("hf-token", "default/default") is None
    trail = [
        (e["action"], e["name"])
        for e in console.api("GET", "/events").json()["items"]
        if e["kind"] == "secret"
    ]
    assert trail == [("create", "hf-token"), ("delete", "hf-token")]


def test_a_bad_name_is_said_and_the_value_is_not_filled_in_again(console):
    console.login()
    again = console.http.post(PAGE, data={"csrf": console.csrf(PAGE), "name": "Bad Name", "value": VALUE})
    assert again.status_code == 422
    assert "a secret&#39;s name is letters, digits" in again.text
    assert VALUE not in again.text


def test_a_read_token_sees_names_and_no_form_and_cannot_set_one(plane):
    console = Console(plane)
    reader = make_token(_Api(console), "reader", "read", "default")
    plane.store.set_secret("k", b"v", "server", 0.0, "default/default")
    headers = {"Authorization": f"Bearer {reader}"}
    page = console.http.get(PAGE, headers=headers)
    assert page.status_code == 200 and 'data-secret="k"' in page.text
    assert 'id="set-secret"' not in page.text
    refused = console.http.post(PAGE, data={"name": "x", "value": "y"}, headers=headers)
    assert refused.status_code == 404  # the console's answer to a page beyond a token's role
    assert plane.store.secret_value("x", "default/default") is None


class _Api:
    """``make_token``'s client: the console's app, with the server's token."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def post(self, path: str, *, json: dict, token: str = TOKEN):
        return self.console.http.post(path, json=json, headers={"Authorization": f"Bearer {token}"})
