"""Listings for the CLI: the formats of the ``-o table|json|yaml`` option every listing takes
(its typer form is ``options.ListOutput``; this module imports no typer), and how a listing is
printed for machines (tables are each command's own)."""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Any

__all__ = ["ListFormat", "print_listing"]


class ListFormat(StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"


def print_listing(value: Any, output: ListFormat | str) -> None:
    """``-o json`` / ``-o yaml`` of a listing, keys in the order the command built them (a
    row's name first)."""
    if output == "json":
        from .output import print_json

        print_json(value)
        return
    from ruamel.yaml import YAML

    yaml: Any = YAML(typ="safe", pure=True)  # its options are set as attributes
    yaml.default_flow_style = False
    yaml.sort_base_mapping_type_on_output = False
    yaml.width = 100_000
    yaml.dump(value, sys.stdout)
