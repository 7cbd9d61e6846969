"""The secrets' shapes on the wire (``/secrets``): a workspace's named values, write-only.

Owns: ``Secret`` and ``SecretList`` (answers: metadata only; no answer has a field that could
hold a value) and ``KeyRotated`` (the answer of ``POST /secrets:rotate-key``). A value is sent
as the raw body of ``PUT /secrets/{name}`` (any bytes, ``application/octet-stream``), never in
JSON. Must not touch: HTTP, the store, the values themselves.

::

    secrets    GET /secrets → SecretList;  PUT /secrets/{name} (raw bytes) → Secret (201 new, 200 replaced)
               GET /secrets/{name} → Secret;  DELETE /secrets/{name}[?force=true] → Secret
               (409 while a run not ended reads it, unless forced);  POST /secrets:rotate-key → KeyRotated
               POST /secrets:plan SecretsPlan → SecretsPlanned (what setting each would do)
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from .models import EPOCH, Answer, RequestBody

#: Standard base64, padded (what ``base64.b64encode`` writes).
BASE64_PATTERN = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"

__all__ = ["KeyRotated", "Secret", "SecretList", "SecretsPlan", "SecretsPlanned"]


class Secret(Answer):
    """A secret's metadata: never its value."""

    name: str
    org: str
    workspace: str
    size: int = Field(description="Its value's length in bytes.")
    set_by: str = Field(description="The token that set its value last.")
    set_at: float = Field(description=EPOCH)
    created_at: float = Field(description=EPOCH)
    used_by: list[str] = Field(description="The runs not ended whose workers read it.")


class SecretList(Answer):
    items: list[Secret]


class KeyRotated(Answer):
    """Every secret of the server sealed anew with a new key."""

    key_id: str = Field(
        description="The new key's id (a digest's first digits: it reveals nothing of the key)."
    )
    secrets: int = Field(description="How many values were sealed anew.")


class SecretsPlan(RequestBody):
    """``POST /secrets:plan``: values to compare with the workspace's, by name (base64)."""

    values: dict[str, Annotated[str, Field(pattern=BASE64_PATTERN)]] = Field(
        default_factory=dict, description="Each secret's value, base64-encoded, by name."
    )
    sealed: dict[str, Annotated[str, Field(pattern=BASE64_PATTERN)]] = Field(
        default_factory=dict,
        description="Each secret's age file, base64-encoded, by name: opened with the server's own "
        "identity (astra server --age-identity FILE).",
    )


class SecretsPlanned(Answer):
    """What setting each value would do: ``create``, ``update`` (another value) or ``none``."""

    changes: dict[str, Literal["create", "update", "none"]]
    used_by: dict[str, list[str]] = Field(description="The runs not ended that read each, by name.")
