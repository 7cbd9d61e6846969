"""Where templates are found: ``templates/`` of the current directory, then each folder of
``ASTRA_TEMPLATE_PATH``; a template's name is its file's name without the suffix. Apart from
``reconciler.templates`` (which renders them, with jinja2) so that a load that only needs to know
which template files there are imports nothing more.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from .runspec.files import SPEC_SUFFIXES

__all__ = ["TEMPLATE_PATH_ENV", "available", "search_folders"]

TEMPLATE_PATH_ENV = "ASTRA_TEMPLATE_PATH"


def search_folders(environ: Mapping[str, str] | None = None) -> list[Path]:
    """``templates/`` of the current directory, then each folder of ``ASTRA_TEMPLATE_PATH``."""
    environ = os.environ if environ is None else environ
    extra = [Path(p) for p in environ.get(TEMPLATE_PATH_ENV, "").split(os.pathsep) if p]
    return [Path("templates"), *extra]


def available(folders: Iterable[Path]) -> dict[str, Path]:
    """Every template file by name (its file name without suffix); the first folder wins."""
    found: dict[str, Path] = {}
    for folder in folders:
        if not folder.is_dir():
            continue
        for f in sorted(folder.iterdir()):
            if f.suffix in SPEC_SUFFIXES and f.is_file() and not f.name.startswith("."):
                found.setdefault(f.stem, f)
    return dict(sorted(found.items()))
