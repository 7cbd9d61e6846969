"""``astra.yaml``: the sources a watch reconciles, as Flux's Kustomizations or Argo CD's
Applications declare them. The model, its published schema (``schema/astra.schema.json``,
generated like the run schema, draft-07) and its loading with every problem positioned.

```yaml
# yaml-language-server: $schema=schema/astra.schema.json
sources:
  - name: team-a
    repo: https://github.com/acme/runs.git    # or `path: runs/` (a folder, read as it is)
    ref: main                                  # a branch or a tag (default: the remote's HEAD)
    folder: runs/team-a                        # inside the repository (default: its root)
    cluster: http://astraeus.acme:8750         # default: --server / ASTRA_SERVER
    prune: true
    interval: 1m
    secrets:                                   # committed encrypted: age -r age1… -o F.age
      - {name: hf-token, file: secrets/hf-token.age}
```

``load_astra_file(path)`` gives the model or every problem (``FILE:LINE:COLUMN: PATH: MESSAGE``,
the words of ``messages``): the schema's (``validate_data(doc, "astra")``) and the rule it cannot
say (names unique). A relative ``path``, ``token_file`` or ``webhook_secret_file`` is read from
the file's folder.

Must not touch: git, clusters; nothing beyond the spec layer.
"""

from __future__ import annotations

import os
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from . import messages as msg
from .alertdecl import AlertDecl, sink_requirements
from .errors import ErrorType, FieldError
from .paths import FieldPath
from .quantities import POSITIVE_DURATION_PATTERN, parse_duration
from .secrets import SECRET_NAME, SECRET_NAME_MAX, SECRET_NAME_PATTERN

__all__ = ["AstraFile", "SecretDecl", "SourceDecl", "astra_schema", "load_astra_file"]


def _duration(value: Any) -> Any:
    if isinstance(value, str | int) and not isinstance(value, bool):
        try:
            return parse_duration(value)
        except ValueError:
            return value  # not a duration: the schema's pattern says so
    return value


#: How often a source is fetched and resynced: a duration, as a run's time limit is written.
Interval = Annotated[
    int | None,
    BeforeValidator(_duration),
    WithJsonSchema(
        {
            "title": "Interval",
            "description": (
                "How often the source is fetched and resynced (±10% jitter), which undoes drift: "
                "1m, 30s, 1h, or seconds."
            ),
            "type": ["integer", "string"],
            "minimum": 1,
            "pattern": POSITIVE_DURATION_PATTERN,
            "errorMessage": msg.DURATION,
        }
    ),
]


class SecretDecl(BaseModel):
    """A secret of the source's workspace, committed encrypted with age (``age -r age1… -o F.age``)."""

    model_config = ConfigDict(extra="forbid", title="Secret")

    name: str = Field(
        title="Name",
        description="The secret's name in the workspace (what a run's {secret: NAME} reads).",
        min_length=1,
        max_length=SECRET_NAME_MAX,
        pattern=SECRET_NAME_PATTERN,
        json_schema_extra={"errorMessage": SECRET_NAME},
    )
    file: str = Field(
        title="File",
        description="Its age file, relative to the source's folder (secrets/hf-token.age).",
        min_length=1,
        pattern=r"\.age$",
        json_schema_extra={"errorMessage": "an age file's name ends in .age"},
    )


class SourceDecl(BaseModel):
    """One source: where its run specs are, and how to reconcile them."""

    model_config = ConfigDict(extra="forbid", title="Source")

    name: str = Field(
        min_length=1,
        title="Name",
        description="The source's name: its status, lock, inventory and history are kept under it.",
    )
    repo: str | None = Field(
        None,
        title="Repository",
        description="A git URL (https://, ssh://, git@host:path, file://, a folder).",
    )
    ref: str | None = Field(None, title="Ref", description="A branch or a tag (default: the remote's HEAD).")
    folder: str | None = Field(
        None, title="Folder", description="The folder in the repository (default: its root)."
    )
    path: str | None = Field(
        None, title="Path", description="A folder on disk, read as it is (relative: to this file's folder)."
    )
    cluster: str | None = Field(
        None,
        title="Cluster",
        description="http(s)://… or slurm://[PARTITION] (default: --server / ASTRA_SERVER).",
    )
    prune: bool = Field(
        False, title="Prune", description="Delete runs this source applied that it no longer holds."
    )
    allow_empty: bool = Field(False, title="Allow empty", description="With prune: allow deleting every run.")
    interval: Interval = None
    token_file: str | None = Field(
        None, title="Token file", description="A file holding a token for the repository's HTTPS URL."
    )
    webhook_secret_file: str | None = Field(
        None,
        title="Webhook secret file",
        description="A file holding the secret that signs this source's webhook (POST /sources/NAME/hook).",
    )
    secrets: list[SecretDecl] | None = Field(
        None,
        title="Secrets",
        description=(
            "Secrets committed encrypted with age, set as the workspace's at each apply "
            "(--age-identity FILE decrypts them: astra watch, plan and apply)."
        ),
    )
    alerts: list[AlertDecl] | None = Field(
        None,
        title="Alerts",
        description=(
            "Alerts of the source's workspace, applied like its runs (the plan says + alert NAME); "
            "with prune, an alert this source declared before and no longer does is deleted. "
            "A sink's URL, key and token are secrets' names."
        ),
    )


class AstraFile(BaseModel):
    """The sources ``astra watch -c astra.yaml`` reconciles, each with its own status and lock."""

    model_config = ConfigDict(extra="forbid", title="astra.yaml")

    sources: list[SourceDecl] = Field(min_length=1, title="Sources")


def astra_schema() -> dict[str, Any]:
    """``schema/astra.schema.json``."""
    from .schema import DRAFT_07, SCHEMA_ID_BASE, _clean, _Draft07

    schema = AstraFile.model_json_schema(
        ref_template="#/definitions/{model}", schema_generator=_Draft07, mode="validation"
    )
    definitions = schema.pop("$defs")
    source = definitions["SourceDecl"]
    definitions["AlertSink"]["allOf"] = sink_requirements()
    source["allOf"] = [
        {
            "if": {"required": ["repo"]},
            "then": {"properties": {"path": {"type": "null", "errorMessage": msg.SOURCE_NOT_BOTH}}},
            "else": {
                "required": ["path"],
                "errorMessage": msg.SOURCE_NEEDS_ONE,
                "properties": {
                    "ref": {"type": "null", "errorMessage": msg.SOURCE_REPO_ONLY},
                },
            },
        }
    ]
    return _clean(
        {
            "$schema": DRAFT_07,
            "$id": SCHEMA_ID_BASE + "astra.schema.json",
            **schema,
            "description": (
                "The sources astra watch -c astra.yaml reconciles: each a git repository (repo, "
                "ref, folder) or a folder (path), with its cluster, prune and interval."
            ),
            "definitions": dict(sorted(definitions.items())),
        }
    )


def _alert_names(doc: Any, i: int, item: Any) -> list[FieldError]:
    """An alert's name given twice in one source's ``alerts``, positioned at the second."""
    alerts = item.get("alerts") if isinstance(item, dict) else None
    out: list[FieldError] = []
    seen: dict[str, int] = {}
    for j, alert in enumerate(alerts if isinstance(alerts, list) else []):
        name = alert.get("name") if isinstance(alert, dict) else None
        if not isinstance(name, str):
            continue
        if name in seen:
            at = FieldPath.root().child("sources").index(i).child("alerts").index(j).child("name")
            words = msg.ALERT_DUPLICATE.format(name=name, other=seen[name])
            out.append(doc.source.position(FieldError(ErrorType.duplicate, at, words), doc.index))
        else:
            seen[name] = j
    return out


def load_astra_file(path: str | os.PathLike[str]) -> tuple[AstraFile | None, list[FieldError]]:
    """The file's sources, or every problem with its position (see the module docstring)."""
    from .loading import load_file
    from .validate import validate_documents

    docs, errors = load_file(path)
    if errors:
        return None, errors
    if len(docs) != 1:
        return None, [
            FieldError(ErrorType.invalid, FieldPath.root(), "astra.yaml holds one document", str(path), 1, 1)
        ]
    doc = docs[0]
    errors = validate_documents(docs, "astra")
    seen: dict[str, int] = {}
    listed = doc.data.get("sources") if isinstance(doc.data, dict) else None
    for i, item in enumerate(listed if isinstance(listed, list) else []):
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str):
            continue
        if name in seen:
            at = FieldPath.root().child("sources").index(i).child("name")
            error = FieldError(
                ErrorType.duplicate, at, msg.SOURCE_DUPLICATE.format(name=name, other=seen[name])
            )
            errors.append(doc.source.position(error, doc.index))
        else:
            seen[name] = i
        errors += _alert_names(doc, i, item)
    if errors:
        return None, errors
    made = AstraFile.model_validate(doc.data)
    base = os.path.dirname(os.path.abspath(path))
    for s in made.sources:
        for key in ("path", "token_file", "webhook_secret_file"):
            value = getattr(s, key)
            if value is not None and not os.path.isabs(os.path.expanduser(value)):
                setattr(s, key, os.path.join(base, value))
            elif value is not None:
                setattr(s, key, os.path.expanduser(value))
        if s.repo is not None and "://" not in s.repo and ":" not in s.repo.split("/")[0]:
            s.repo = s.repo if os.path.isabs(s.repo) else os.path.join(base, s.repo)
    return made, []
