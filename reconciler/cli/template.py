"""``astra template``: list and show templates, and render run specs as validate and apply see them.

Thin: each command is one call into ``reconciler.templates`` or ``reconciler.desired``, then
printing. Problems are printed as ``FILE:LINE:COLUMN: PATH: MESSAGE`` on stderr, exit 1.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from .listing import ListFormat, print_listing
from .options import ListOutput
from .output import echo, error

__all__ = ["template_app"]

template_app = typer.Typer(
    name="template",
    help=(
        "Templates: reusable run specs with typed parameters.\n\n"
        "A spec file's templates are searched in the nearest templates/ folder upward from it, then "
        "in each folder of ASTRA_TEMPLATE_PATH, then among the templates shipped with astra (gang, "
        "service, sweep)."
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


class RenderFormat(StrEnum):
    yaml = "yaml"
    json = "json"


def _print_errors(errors) -> None:
    for e in errors:
        echo(e.format(), err=True)
    noun = "problem" if len(errors) == 1 else "problems"
    error(f"{len(errors)} {noun}")


def _describe(template) -> dict[str, Any]:
    return {
        "name": template.name,
        "description": template.description,
        "file": template.file,
        "parameters": {
            p.name: {
                "type": p.type,
                **({"default": p.default} if p.default is not None else {}),
                "required": p.required,
                **({"description": p.description} if p.description else {}),
            }
            for p in template.parameters.values()
        },
        "spec": template.spec,
    }


def _table(rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        echo("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


@template_app.command("list")
def list_templates(
    output: ListOutput = ListFormat.table,
) -> None:
    """List the templates found: in the nearest templates/ upward, on ASTRA_TEMPLATE_PATH, then the
    ones shipped with astra (the first of a name wins)."""
    from ..templates import TemplateLibrary

    library = TemplateLibrary()
    items, errors = [], []
    for name in library.names():
        template, problems, _ = library.get(name)
        errors += problems
        if template is not None:
            items.append(_describe(template))
    if output is ListFormat.table:
        rows = [["NAME", "PARAMETERS", "FILE", "DESCRIPTION"]]
        for t in items:
            params = ", ".join(n + ("*" if p["required"] else "") for n, p in t["parameters"].items())
            rows.append([t["name"], params or "-", t["file"], t["description"]])
        _table(rows)
        if len(rows) == 1:
            searched = ", ".join(str(f) for f in library.folders) or "no folder"
            echo(f"no templates found (searched {searched})", err=True)
    else:
        print_listing([{k: v for k, v in t.items() if k != "spec"} for t in items], output)
    if errors:
        _print_errors(errors)
    raise typer.Exit(1 if errors else 0)


@template_app.command("show")
def show(
    name: Annotated[str, typer.Argument(help="The template's name.", show_default=False)],
    output: ListOutput = ListFormat.table,
) -> None:
    """Show a template: its description, its parameters, and its spec before rendering."""
    from ..desired import to_yaml
    from ..templates import TemplateLibrary

    template, errors, missing = TemplateLibrary().get(name)
    if missing:
        error(missing)
        raise typer.Exit(1)
    if template is None:
        _print_errors(errors)
        raise typer.Exit(1)
    described = _describe(template)
    if output is not ListFormat.table:
        print_listing(described, output)
        raise typer.Exit(0)
    echo(f"{template.name}: {template.description}" if template.description else template.name)
    echo(f"file: {template.file}")
    echo()
    rows = [["PARAMETER", "TYPE", "DEFAULT", "DESCRIPTION"]]
    for p in template.parameters.values():
        default = "(required)" if p.required else ("-" if p.default is None else _short(p.default))
        rows.append([p.name, p.type, default, p.description])
    _table(rows)
    echo()
    echo("spec:")
    for line in to_yaml([template.spec]).rstrip("\n").splitlines():
        echo("  " + line)


def _short(value: Any) -> str:
    import json

    return value if isinstance(value, str) else json.dumps(value)


@template_app.command("render")
def render(
    files: Annotated[
        list[Path],
        typer.Option("--file", "-f", help="Run spec files or folders; repeatable.", show_default=False),
    ],
    template: Annotated[
        str | None, typer.Option("--template", help="Apply this template to every run.")
    ] = None,
    sets: Annotated[
        list[str] | None,
        typer.Option("--set", help="A template parameter, key=value (a YAML value); repeatable."),
    ] = None,
    explain: Annotated[
        bool, typer.Option("--explain", help="For each final value, the file and line it came from.")
    ] = False,
    output: Annotated[RenderFormat, typer.Option("--output", "-o", help="yaml or json.")] = RenderFormat.yaml,
) -> None:
    """Print the final run specs, exactly as validate and apply see them.

    Several runs are a YAML stream (or a JSON list). Keys are in the run spec's field order.
    Nothing is printed when any run has a problem.

    Examples:

        astra template render -f examples/templated/llama-ft.yaml

        astra template render -f run.yaml --template gang --set gpus=32 --explain
    """
    # Over 60 lines: its signature is its options' one declaration (typer's); the body is under 40. (A
    # comment, not the docstring: the docstring is its --help.)
    from ..desired import explain as explain_run
    from ..desired import load_desired, to_json, to_yaml

    desired = load_desired(files, template=template, sets=sets or ())
    if desired.errors:
        _print_errors(desired.errors)
        raise typer.Exit(1)
    if not explain:
        docs = [r.data for r in desired.runs]
        text = to_json(docs) if output is RenderFormat.json else to_yaml(docs)
        echo(text.rstrip("\n"))
        raise typer.Exit(0)
    explained: list[dict[str, Any]] = [
        {"name": r.name, "file": r.document.source.name, "fields": explain_run(r)} for r in desired.runs
    ]
    if output is RenderFormat.json:
        echo(to_json(explained).rstrip("\n"))
        raise typer.Exit(0)
    import json

    for i, run in enumerate(explained):
        if i:
            echo()
        echo(f"# {run['name']} ({run['file']})")
        rows = []
        for f in run["fields"]:
            where = f"{f['file']}:{f['line']}:{f['column']}" if f["line"] is not None else f["file"]
            if "from" in f:
                where += f" ({f['from']})"
            what = f"{f['path']} = {json.dumps(f['value'], ensure_ascii=False)}"
            if "parameter" in f:
                what += f"  (parameter {f['parameter']}, used at {f['via']})"
            rows.append([where, what])
        width = max(len(r[0]) for r in rows)
        for where, what in rows:
            echo(f"{where.ljust(width)}  {what}")
