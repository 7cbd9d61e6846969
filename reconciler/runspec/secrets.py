"""Secrets in a run spec: an env value that names a workspace's secret, and secret files.

Owns the spec layer's part of secrets, the one source the schema, the API, the executors and
the CLI read: the form (``SecretRef``: ``env: {HF_TOKEN: {secret: hf-token}}``; ``SecretFile``:
``secret_files: [{name: ssh-key, mount_path: /root/.ssh/id_ed25519}]``, Kubernetes' explicit
``secretKeyRef`` and secret volume, which a schema can check and an editor complete), the
limits of a secret (``SECRET_NAME_PATTERN``, ``SECRET_NAME_MAX``, ``SECRET_VALUE_MAX``), their
words, the reason a run waits for a secret not set yet (``secret_waiting``), and
``secret_refs(run)``: each secret a run's workers read, with the field that names it.

A spec never holds a value: a template may take a secret's name as a parameter, as any other
string, and the worker gets the value when it starts (the store's ``secret_value``).

Must not touch: the store, processes, HTTP (it is the spec layer: it imports no other part).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from . import messages as msg
from .secretnames import masking_note, secrets_of_document

if TYPE_CHECKING:
    from .models import Run

__all__ = [
    "SECRET_FILE_MODE",
    "SECRET_NAME",
    "SECRET_NAME_MAX",
    "SECRET_NAME_PATTERN",
    "SECRET_VALUE_EMPTY",
    "SECRET_VALUE_MAX",
    "SecretFile",
    "SecretRef",
    "env_value_schema",
    "masking_note",
    "secret_refs",
    "secret_too_large",
    "secret_waiting",
    "secrets_of_document",
]

#: A secret's name: letters, digits, ``-``, ``_`` and ``.`` (``hf-token``, ``HF_TOKEN``), as
#: Kubernetes' secret keys; the first a letter or digit.
SECRET_NAME_PATTERN = r"^[A-Za-z0-9][-_.A-Za-z0-9]*$"
SECRET_NAME_MAX = 128
#: A secret's value: any bytes, at least one, at most 64 KiB (Kubernetes keeps 1 MiB a secret;
#: a token, a key, a small config file fit in 64 KiB, and it is masked in every log line).
SECRET_VALUE_MAX = 64 * 1024
#: A secret file's mode inside the worker: its owner reads it, no one else, no one writes.
SECRET_FILE_MODE = 0o400

SECRET_NAME = (
    f"a secret's name is letters, digits, '-', '_' and '.', starting with a letter or digit, "
    f"at most {SECRET_NAME_MAX} characters"
)
SECRET_VALUE_EMPTY = "a secret's value is empty: give at least one byte"


def secret_too_large(size: int) -> str:
    return f"a secret's value is at most {SECRET_VALUE_MAX} bytes (64 KiB); this one is {size}"


def secret_waiting(name: str, workspace: str) -> str:
    """Why a run waits: ``Secret 'hf-token' does not exist in workspace ml: astra secret set hf-token``."""
    return f"Secret {name!r} does not exist in workspace {workspace}: astra secret set {name}"


class _Strict(BaseModel):
    """As ``models._Strict``: unknown fields refused, values read as the schema reads them."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True, strict=True)


_NAME = Field(
    title="Secret",
    description="The name of a secret of the run's workspace (astra secret set NAME).",
    min_length=1,
    max_length=SECRET_NAME_MAX,
    pattern=SECRET_NAME_PATTERN,
    json_schema_extra={"errorMessage": SECRET_NAME},
)


class SecretRef(_Strict):
    """An environment value that names a secret: the worker gets the secret's value."""

    secret: str = _NAME


class SecretFile(_Strict):
    """A secret given to every worker as a read-only file (mode 0400) at its mount path."""

    name: str = _NAME
    mount_path: str = Field(
        title="Mount path",
        description="Where the secret's file appears inside the worker.",
        max_length=msg.TEXT_MAX,
        pattern=r"^/",
        json_schema_extra={"errorMessage": msg.MOUNT_PATH},
    )


def env_value_schema() -> dict[str, Any]:
    """An env value's schema: a string, or (a mapping) a ``SecretRef``. Draft-07's ``if``/``then``
    rather than ``anyOf``, so that a mapping's own problem (a bad name, an unknown key) is said
    at its path, and a number still gets ``ENV_VALUE``'s words."""
    ref = SecretRef.model_json_schema()
    ref.pop("title", None)
    return {
        "title": "Value",
        "description": "The text of the variable, or {secret: NAME}: the value of a secret of the workspace.",
        "if": {"type": "object"},
        "then": ref,
        "else": {"type": "string", "errorMessage": msg.ENV_VALUE, "allOf": [{"maxLength": msg.ARG_MAX}]},
    }


def secret_refs(run: Run) -> list[tuple[str, str]]:
    """Each secret ``run``'s workers read: (the field's path, the secret's name), in the spec's order."""
    spec = run.spec
    templates = [
        (f"spec.task_groups[{i}].task_template", g.task_template)
        for i, g in enumerate(spec.task_groups or [])
    ]
    if spec.task_template is not None:
        templates.insert(0, ("spec.task_template", spec.task_template))
    found: list[tuple[str, str]] = []
    for at, tt in templates:
        for key, value in (tt.env or {}).items():
            if isinstance(value, SecretRef):
                found.append((f"{at}.env.{key}.secret", value.secret))
        for j, f in enumerate(tt.secret_files or []):
            found.append((f"{at}.secret_files[{j}].name", f.name))
    return found
