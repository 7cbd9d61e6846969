"""``jsonschema_rs`` imported without ``email.utils`` (``reconciler.runspec.jsonschema_lean``): the
schema checks the same, ``email.utils`` is still the real one for whoever imports it later, and
a jsonschema-rs that asks for more is imported as it is."""

from __future__ import annotations

import email.utils
import subprocess
import sys

import pytest

from reconciler.runspec.jsonschema_lean import _parsedate_to_datetime
from reconciler.runspec.validate import validate_data

#: a run the schema refuses: a time limit that is no number
DOC = {"metadata": {"name": "a"}, "spec": {"task_template": {"image": "x", "time_limit_seconds": [1]}}}


def _python(code: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_the_lean_import_checks_the_same_without_email_utils():
    said = _python(
        "import sys\n"
        "from reconciler.runspec.jsonschema_lean import jsonschema_rs\n"
        "print(sorted(m for m in ('email.utils', 'socket', 'calendar') if m in sys.modules) or 'none')\n"
        "from reconciler.runspec.validate import validate_data\n"
        f"print(repr([e.message for e in validate_data({DOC!r})]).replace(' ', '_'))\n"
        "import email.utils\n"
        "print(email.utils.parsedate_to_datetime('Tue, 27 Oct 2026 10:17:51 +0000').year)\n"
    )
    assert said[0] == "none"  # not imported on the way
    assert said[1] == repr([e.message for e in validate_data(DOC)]).replace(" ", "_")  # the schema's words
    assert "integer" in said[1]
    assert said[2] == "2026"  # the real module, imported after


def test_a_jsonschema_rs_asking_for_more_is_imported_as_it_is():
    said = _python(
        "import sys\n"
        "import reconciler.runspec.jsonschema_lean as lean\n"  # imported once, with the shim …
        "del sys.modules['jsonschema_rs'], sys.modules['jsonschema_rs.jsonschema_rs']\n"
        "def refuse(text): raise ValueError(text)\n"
        "lean._parsedate_to_datetime = refuse\n"  # … then again, with a shim that refuses
        "module = lean._import()\n"
        "print(module.Draft7Validator({'type': 'object'}).is_valid([]), 'email.utils' in sys.modules)\n"
    )
    assert said == ["False", "True"]  # it works, through the real email.utils


@pytest.mark.parametrize(
    "text",
    ["Tue, 27 Oct 2026 10:17:51 +0000", "Mon, 02 Mar 2026 01:02:03 -0530", "Sun, 31 Dec 2023 23:59:59 +1400"],
)
def test_the_build_date_is_read_as_email_utils_reads_it(text):
    assert _parsedate_to_datetime(text) == email.utils.parsedate_to_datetime(text)


@pytest.mark.parametrize("text", ["27 Oct 2026 10:17:51 +0000", "Tue, 27 Oct 2026 10:17:51 GMT", "yesterday"])
def test_another_form_of_date_is_refused(text):
    with pytest.raises(ValueError):
        _parsedate_to_datetime(text)
