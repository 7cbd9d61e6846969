"""Secrets sent sealed with age, opened by the server's own identity (``astra server
--age-identity FILE``, issue 30): ``POST /secrets:plan``'s ``sealed`` and ``PUT /secrets/{name}``
with ``Content-Type: application/age``; the value kept is the one encrypted, and a server without
the identity answers a 422 naming the secret, never a value."""

from __future__ import annotations

import base64

import pyrage
from pyrage import x25519

VALUE = b"hf_sealed_canary\n\x00\xff"
AGE = {"Content-Type": "application/age"}


def sealed(identity: x25519.Identity, value: bytes = VALUE) -> bytes:
    return pyrage.encrypt(value, [identity.to_public()])


def test_a_sealed_value_is_planned_set_and_kept_as_it_was_encrypted(client, plane):
    identity = x25519.Identity.generate()
    client.app.state.age_identities = [identity]
    box = base64.b64encode(sealed(identity)).decode()
    planned = client.post("/api/secrets:plan", json={"sealed": {"hf-token": box}})
    assert planned.status_code == 200 and planned.json()["changes"] == {"hf-token": "create"}
    assert client.put("/api/secrets/hf-token", content=sealed(identity), headers=AGE).status_code == 201
    assert plane.secret("default/default", "hf-token") == VALUE
    again = client.post("/api/secrets:plan", json={"sealed": {"hf-token": box}})
    assert again.json()["changes"] == {"hf-token": "none"}  # another sealing of the same value
    other = base64.b64encode(sealed(identity, VALUE + b"2")).decode()
    assert client.post("/api/secrets:plan", json={"sealed": {"hf-token": other}}).json()["changes"] == {
        "hf-token": "update"
    }


def test_without_the_identity_a_sealed_value_is_a_422_naming_the_secret(client, plane):
    identity = x25519.Identity.generate()
    box = sealed(identity)
    none = client.put("/api/secrets/hf-token", content=box, headers=AGE)
    assert none.status_code == 422
    [problem] = none.json()
    assert problem["message"].startswith("secret hf-token: the server holds no age identity to open it")
    client.app.state.age_identities = [x25519.Identity.generate()]
    wrong = client.post("/api/secrets:plan", json={"sealed": {"hf-token": base64.b64encode(box).decode()}})
    assert wrong.status_code == 422
    [problem] = wrong.json()
    assert problem["path"] == "sealed.hf-token"
    assert "secret hf-token does not decrypt with the server's age identity" in problem["message"]
    assert client.get("/api/secrets").json()["items"] == []
    assert plane.secret("default/default", "hf-token") is None
