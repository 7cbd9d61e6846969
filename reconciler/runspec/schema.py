"""The published JSON Schemas (draft-07), generated from the models and the rules table.

``run_schema()`` is ``schema/run.schema.json``; ``template_schema()`` is
``schema/template.schema.json``. Both are checked in, shipped inside the package (where
``astra validate`` reads them without importing pydantic) and kept equal to this output by a
test. Draft-07, because that is what yaml-language-server and SchemaStore support best.

The forbidden combinations become ``allOf``/``if``/``then`` blocks whose failing keyword is a
``const`` or a ``type: "null"`` carrying an ``errorMessage``: yaml-language-server shows that
text, and ``astra validate`` shows the same text, read from the same place.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from pydantic.json_schema import GenerateJsonSchema

from . import messages as msg
from .models import Run
from .rules import COMBINATIONS

__all__ = ["SCHEMA_ID_BASE", "dumps", "run_schema", "template_schema"]

DRAFT_07 = "http://json-schema.org/draft-07/schema#"
SCHEMA_ID_BASE = "https://astra.dev/schema/"
TEMPLATE_EXPRESSION = r"\{\{.*\}\}"


class _Draft07(GenerateJsonSchema):
    """pydantic's generator, speaking draft-07: ``definitions``, no null branches for optionals."""

    def nullable_schema(self, schema):  # Optional[X] is "may be left out", not "may be null"
        return self.generate_inner(schema["schema"])

    def default_schema(self, schema):
        json_schema = super().default_schema(schema)
        if json_schema.get("default", ...) is None:
            json_schema.pop("default")
        return json_schema


def _generate() -> dict[str, Any]:
    schema = Run.model_json_schema(
        ref_template="#/definitions/{model}", schema_generator=_Draft07, mode="validation"
    )
    schema["definitions"] = schema.pop("$defs")
    return _clean(schema)


def _clean(node: Any) -> Any:
    """Draft-07 tidying: a ``$ref`` stands alone (siblings of $ref are ignored in draft-07)."""
    if isinstance(node, dict):
        node = {k: _clean(v) for k, v in node.items()}
        if "$ref" in node and len(node) > 1:
            ref = {"$ref": node.pop("$ref")}
            return {**{k: node[k] for k in ("title", "description") if k in node}, "allOf": [ref]} | {
                k: v for k, v in node.items() if k not in ("title", "description")
            }
        return node
    if isinstance(node, list):
        return [_clean(v) for v in node]
    return node


def _combination_blocks(partial: bool) -> list[dict[str, Any]]:
    """The rules table as if/then blocks, one block per triggering field."""
    blocks: dict[str, dict[str, Any]] = {}
    for rule in COMBINATIONS:
        then = blocks.setdefault(rule.when, {"if": {"required": [rule.when]}, "then": {"properties": {}}})[
            "then"
        ]
        target = then
        for step in rule.field[:-1]:
            target = target["properties"].setdefault(step, {"properties": {}})
        leaf = {"type": "null"} if rule.allowed is None else {"const": rule.allowed}
        target["properties"][rule.field[-1]] = {**leaf, "errorMessage": rule.message}
    out = list(blocks.values())
    for name in ("start", "policy"):
        out.append(
            {
                "if": {"required": [name], "properties": {name: {"const": "MinAvailable"}}},
                "then": {
                    "properties": {"min_available": {"minimum": 1, "errorMessage": msg.MIN_AVAILABLE}},
                    **({} if partial else {"required": ["min_available"], "errorMessage": msg.MIN_AVAILABLE}),
                },
            }
        )
    for name in ("start", "policy"):
        out.append(
            {
                "if": {"required": [name], "properties": {name: {"const": "Gang"}}},
                "then": {
                    "properties": {
                        "task_groups": {
                            "items": {
                                "properties": {
                                    "start_after": {"type": "null", "errorMessage": msg.GANG_START_AFTER}
                                }
                            }
                        }
                    }
                },
            }
        )
    if not partial:
        out.append(
            {
                "if": {"not": {"required": ["task_groups"]}},
                "then": {"required": ["task_template"], "errorMessage": msg.NO_TEMPLATE},
            }
        )
    return out


def _partial(definitions: dict[str, Any], *, expressions: bool) -> dict[str, Any]:
    """Partial copies of every definition, named ``Partial<Name>``.

    Nothing is required, and ``null`` is allowed everywhere (a null in a run spec removes the
    template's value). With ``expressions``, any leaf may also be a jinja expression
    (``"{{ gpus }}"``), as in a template before it is rendered.
    """

    def walk(node: Any, top: bool = False) -> Any:
        if isinstance(node, list):
            return [walk(v) for v in node]
        if not isinstance(node, dict):
            return node
        node = dict(node)
        if "$ref" in node:
            node["$ref"] = node["$ref"].replace("#/definitions/", "#/definitions/Partial")
        if top:
            node.pop("required", None)
        for key in ("properties", "additionalProperties", "items"):
            if isinstance(node.get(key), dict):
                if key == "properties":
                    node[key] = {name: _loosen(walk(sub)) for name, sub in node[key].items()}
                else:
                    node[key] = _loosen(walk(node[key]))
        for key in ("allOf", "anyOf"):
            if key in node:
                node[key] = walk(node[key])
        return node

    def _loosen(sub: dict[str, Any]) -> dict[str, Any]:
        branches: list[dict[str, Any]] = [{"type": "null"}]
        if expressions:
            branches.append({"type": "string", "pattern": TEMPLATE_EXPRESSION})
        head: dict[str, Any] = {k: sub[k] for k in ("title", "description", "default") if k in sub}
        body = {k: v for k, v in sub.items() if k not in head}
        return {**head, "anyOf": [body, *branches]}

    out = {}
    for name, definition in definitions.items():
        out["Partial" + name] = walk(copy.deepcopy(definition), top=True)
    return out


def run_schema() -> dict[str, Any]:
    """``schema/run.schema.json``: a run spec, whole; or partial when it names a template."""
    generated = _generate()
    definitions = generated["definitions"]
    definitions["Spec"]["allOf"] = _combination_blocks(partial=False)
    partial = _partial(definitions, expressions=False)
    partial["PartialSpec"]["allOf"] = _combination_blocks(partial=True)
    definitions.update(partial)
    properties = generated["properties"]
    # which spec (whole or partial) is decided by the if/then/else below; a $ref to the whole
    # Spec here would also apply to a run that names a template, and refuse its partial spec
    properties["spec"] = {
        "title": "Spec",
        "description": (
            "What the run does and how the scheduler treats it; partial when the run names a "
            "template (the template's spec is the base, this spec wins)."
        ),
        "type": "object",
    }
    return {
        "$schema": DRAFT_07,
        "$id": SCHEMA_ID_BASE + "run.schema.json",
        "title": generated["title"],
        "description": generated["description"],
        "type": "object",
        "properties": properties,
        # spec is required unless the run names a template (which may give the whole spec)
        "required": [r for r in generated["required"] if r != "spec"],
        "additionalProperties": False,
        "allOf": [
            {
                "if": {"required": ["template"]},
                "then": {"properties": {"spec": {"$ref": "#/definitions/PartialSpec"}}},
                "else": {"required": ["spec"], "properties": {"spec": {"$ref": "#/definitions/Spec"}}},
            }
        ],
        "definitions": dict(sorted(definitions.items())),
    }


def template_schema() -> dict[str, Any]:
    """``schema/template.schema.json``: metadata, typed parameters, and a partial spec.

    Over 60 lines: the template schema's parts written out in the order the published schema shows them."""
    generated = _generate()
    definitions = _partial(generated["definitions"], expressions=True)
    definitions["PartialSpec"]["allOf"] = _combination_blocks(partial=True)
    definitions["Parameter"] = {
        "title": "Parameter",
        "type": "object",
        "additionalProperties": False,
        "required": ["type"],
        "properties": {
            "type": {
                "title": "Type",
                "enum": ["string", "integer", "number", "boolean", "list", "map"],
                "description": "What values the parameter takes.",
            },
            "default": {"title": "Default", "description": "The value when a run spec gives none."},
            "description": {"title": "Description", "type": "string"},
            "required": {
                "title": "Required",
                "type": "boolean",
                "default": False,
                "description": "A run spec must give a value.",
            },
        },
    }
    return {
        "$schema": DRAFT_07,
        "$id": SCHEMA_ID_BASE + "template.schema.json",
        "title": "Astraeus run template",
        "description": (
            "A reusable, partial run spec with typed parameters. String values may use jinja2 "
            "expressions of the parameters; a value that is one expression keeps its type."
        ),
        "type": "object",
        "additionalProperties": False,
        "required": ["metadata"],
        "properties": {
            "metadata": {
                "title": "Metadata",
                "type": "object",
                "additionalProperties": False,
                "required": ["name"],
                "properties": {
                    "name": {
                        "title": "Name",
                        "type": "string",
                        "pattern": r"^[a-z]([-a-z0-9]*[a-z0-9])?$",
                        "errorMessage": msg.GROUP_NAME,
                    },
                    "description": {"title": "Description", "type": "string"},
                },
            },
            "parameters": {
                "title": "Parameters",
                "type": "object",
                "propertyNames": {"pattern": r"^[A-Za-z_][A-Za-z0-9_]*$"},
                "additionalProperties": {"$ref": "#/definitions/Parameter"},
            },
            "spec": {"$ref": "#/definitions/PartialSpec"},
        },
        "definitions": dict(sorted(definitions.items())),
    }


def dumps(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
