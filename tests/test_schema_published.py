"""The published schemas are generated from the models, checked in, and valid draft-07."""

import json

import jsonschema
import pytest

from reconciler.runspec.astrafile import astra_schema
from reconciler.runspec.schema import dumps, run_schema, template_schema
from reconciler.runspec.validate import published_schema


@pytest.mark.parametrize(
    "kind, make", [("run", run_schema), ("template", template_schema), ("astra", astra_schema)]
)
def test_checked_in_schema_equals_the_models(root, kind, make):
    generated = dumps(make())
    checked_in = (root / "schema" / f"{kind}.schema.json").read_text()
    assert checked_in == generated, f"schema/{kind}.schema.json is stale: run `task schema`"
    assert published_schema(kind) == json.loads(generated), "the copy in the package is stale: `task schema`"


@pytest.mark.parametrize("kind", ["run", "template", "astra"])
def test_schema_is_draft_07(kind):
    schema = published_schema(kind)
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    jsonschema.Draft7Validator.check_schema(schema)


def test_cli_prints_the_schema(root):
    import contextlib
    import io

    from reconciler.cli.app import run

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert run(["schema", "run"]) == 0
    assert out.getvalue() == (root / "schema" / "run.schema.json").read_text()
