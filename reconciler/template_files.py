"""Where templates are found, and which files are templates.

A spec file's templates are searched, in order (the first of a name wins; a template's name is
its file's name without the suffix):

1. the nearest ``templates/`` folder upward from the spec file (from the working folder when
   there is no file: ``astra template list``), as git finds ``.git``: a repo's own templates,
   wherever in it the spec lives and wherever the command is run from;
2. each folder of ``ASTRA_TEMPLATE_PATH`` (separated by ``:``);
3. the templates shipped with astra (``gang``, ``service``, ``sweep``): in the wheel, package data
   under ``reconciler/templates/shipped/``; in a checkout, its ``templates/`` folder.

A file is a template (checked as one by validate, never loaded as a run) when it sits directly
in a folder named ``templates``, or when its document has a top-level ``parameters`` key
(``is_template``).

Apart from ``reconciler.templates`` (which renders them, with jinja2) so that a load that only
needs to know which template files there are imports nothing more.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from .runspec.files import SPEC_SUFFIXES

__all__ = [
    "TEMPLATES_FOLDER",
    "TEMPLATE_PATH_ENV",
    "available",
    "folders_for",
    "is_template",
    "search_folders",
    "shipped_folder",
]

TEMPLATE_PATH_ENV = "ASTRA_TEMPLATE_PATH"
#: The name of a folder of templates, found upward from a spec file.
TEMPLATES_FOLDER = "templates"


@cache
def shipped_folder() -> Path | None:
    """The templates shipped with astra: the wheel's package data, else a checkout's ``templates/``."""
    here = Path(__file__).resolve().parent
    packaged = here / "templates" / "shipped"
    if packaged.is_dir():
        return packaged
    checkout = here.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / TEMPLATES_FOLDER).is_dir():
        return checkout / TEMPLATES_FOLDER
    return None


def _shown(folder: Path) -> Path:
    """``folder`` relative to the working folder when it is under it (so messages stay short)."""
    try:
        rel = os.path.relpath(folder)
    except ValueError:  # another drive
        return folder
    return Path(rel) if not rel.startswith("..") else folder


def _nearest(start: Path) -> Path | None:
    start = start.resolve()
    folder = start if start.is_dir() else start.parent
    for candidate in (folder, *folder.parents):
        found = candidate / TEMPLATES_FOLDER
        if found.is_dir():
            return found
    return None


def search_folders(
    environ: Mapping[str, str] | None = None,
    start: str | os.PathLike[str] | None = None,
    *,
    shipped: bool = True,
) -> list[Path]:
    """Where the templates of a spec file ``start`` (default: the working folder) are searched:
    the nearest ``templates/`` upward, each folder of ``ASTRA_TEMPLATE_PATH``, the shipped ones
    (unless ``shipped`` is false)."""
    environ = os.environ if environ is None else environ
    nearest = _nearest(Path(start) if start is not None else Path.cwd())
    extra = [Path(p) for p in environ.get(TEMPLATE_PATH_ENV, "").split(os.pathsep) if p]
    shipped_here = shipped_folder() if shipped else None
    out: list[Path] = []
    seen: set[Path] = set()
    ends = [_shown(shipped_here)] if shipped_here else []
    for folder in [*([_shown(nearest)] if nearest else []), *extra, *ends]:
        key = folder.resolve()
        if key not in seen:
            seen.add(key)
            out.append(folder)
    return out


def folders_for(paths: Iterable[str | os.PathLike[str]], parents: Iterable[str] = ()) -> list[Path]:
    """Every folder a template of these spec paths may come from, but the shipped one (it changes
    with astra alone): the search folders of each path given, and each of ``parents`` (the
    folders of the files found under them) that is a ``templates/`` folder. What a load
    fingerprints, and what ``astra watch`` watches besides the paths."""
    out: dict[Path, None] = {}
    for p in paths:
        for folder in search_folders(start=p, shipped=False):
            out.setdefault(folder, None)
    for parent in sorted(set(parents)):
        if os.path.basename(parent) == TEMPLATES_FOLDER:
            out.setdefault(Path(parent), None)
    return list(out)


def is_template(file: str, data: Any) -> bool:
    """Whether a document is a template: its file sits in a ``templates/`` folder, or it has a
    top-level ``parameters`` key."""
    if isinstance(data, dict) and "parameters" in data:
        return True
    folder = _folder_name(file.rpartition(os.sep)[0])
    if folder in ("", ".", ".."):  # named through the working folder: its absolute path says
        folder = os.path.basename(os.path.dirname(os.path.abspath(file)))
    return folder == TEMPLATES_FOLDER


@lru_cache(maxsize=4096)
def _folder_name(head: str) -> str:
    """The name of the folder of a file named ``head/NAME`` (once a folder: every document of a
    load asks, 1.4 µs a time when asked of ``os.path``)."""
    return os.path.basename(os.path.dirname(head + os.sep + "NAME"))


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
