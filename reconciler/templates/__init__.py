"""Templates: reusable, partial run specs with typed parameters.

A run names a template (``template: {name, parameters}``) or the command line does
(``--template``/``--set``); the template is found and loaded once, its parameters resolved, its
spec rendered in a jinja2 sandbox and merged under the run spec, which wins. The parts::

    library      finding templates by name and loading them (the only part that reads files)
    parameters   parameter types, ``--set`` parsing, each parameter's value and where it came from
    sandbox      the jinja2 sandbox: what expressions may do, compiling and evaluating them
    render       a template's spec with every expression evaluated, and every value's origin
    merge        maps deep, lists replace, null removes
    origins      where a value came from (file, line, column; or the command line)

Which template files there are is ``reconciler.template_files`` (kept apart: the load
fingerprints them without importing this package).

No exception leaves this package for a problem in a file or a value: every problem is a
``FieldError`` carrying the file, line and column it comes from (``COMMAND_LINE`` for
``--template``/``--set``). It must not touch a cluster or print.
"""

from __future__ import annotations

from ..template_files import TEMPLATE_PATH_ENV, available, search_folders
from .library import Template, TemplateLibrary, find_template, load_template
from .merge import UNSET, merge
from .origins import COMMAND_LINE, Origin
from .parameters import PARAMETER_TYPES, Parameter, parse_sets, resolve_parameters, type_error
from .render import render
from .sandbox import FILTERS, NOT_ALLOWED

__all__ = [
    "COMMAND_LINE",
    "FILTERS",
    "NOT_ALLOWED",
    "PARAMETER_TYPES",
    "TEMPLATE_PATH_ENV",
    "UNSET",
    "Origin",
    "Parameter",
    "Template",
    "TemplateLibrary",
    "available",
    "find_template",
    "load_template",
    "merge",
    "parse_sets",
    "render",
    "resolve_parameters",
    "search_folders",
    "type_error",
]
