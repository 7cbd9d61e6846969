"""The quick path of a warm ``astra plan``: the answer of the last plan, replayed when nothing it
depended on has moved (as ``git status`` trusts its index).

A full plan of files that did not change still costs its imports, the load cache, two listings
decoded and a plan built: 5x reading and hashing every file. What decides its answer is known,
though, and each part can be checked for having moved without being read again:

* **the files**: the same spec files found (``runspec.files.find_files``, the load's own rule),
  each with the stat the load trusted (``hashes.StatHashes``: device, inode, size, modification
  and change times in nanoseconds; a file changed within ``hashes.RACY_NS`` of being hashed is
  not remembered there, so it is never recorded here: git's racy-clean rule). The change time
  cannot be set back, so a file written again does not match. No template file on the search
  path (``template_files.folders_for``), none used;
* **the revision**: no ``.git`` above the folders, as when recorded; or, for folders in a git
  working tree, whose plan says its branch, commit and ``dirty`` (which move without the spec
  files' stats), the same repository with the same stat of each file that decided those
  (``cli.quickgit``: ``HEAD``, the branch, the index, every entry under the folders, the ignore
  and configuration files), checked with no git process;
* **the server**: the plan read exactly two things, both tagged: the source's inventory
  (``GET /sources/{name}/runs?view=digest``, whose ETag moves with every write and lock) and
  the run summaries (``GET /runs?view=summary``, whose ETag is the engine's generation, which
  moves with every change to any run, and a nonce of the server process, so that a server
  started again never repeats one). Any other call (a run read whole, workers, a retry) and
  nothing is recorded (``clusters.http.JOURNAL`` notes the calls, of the read-ahead too);
* **everything else**: the command line, the working folder, the environment that shapes a plan
  (``ASTRA_*``, colour, home), whether stdout is a terminal, and astra's own code (the newest
  modification time of its modules): all in the entry's key.

Only a plan that printed text with no change, no warning and exit code 0, from plain arguments
(no ``--template``, ``--set``, git options, ``--replace``, ``--state``, ``--out``, ``-o``) and
an ``http://`` server reached directly (no ``GIT_DIR``, no HTTP proxy in the environment), is
recorded (``HOME/cache/quickplan/KEY``). At the start of such a plan (``answer``), before any
heavy import, the files are found and stat'ed again and both GETs are made with
``If-None-Match`` (plain HTTP/1.1 on a socket: ``reconciler.plainhttp``; the same
``Authorization``); only when everything matches and both answer 304 is the recorded text
printed with its exit code. Any difference, error or other answer: the full plan runs as if this
did not exist, and records again. Nothing is ever written to the server from here.
``ASTRA_QUICK_PLAN=0`` turns it off.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import sys
import time
from typing import Any

from . import quickgit

__all__ = ["OFF", "answer", "before_plan", "noted", "record"]

#: ``ASTRA_QUICK_PLAN=0``: every plan is a full one (and none is recorded).
OFF = "ASTRA_QUICK_PLAN"
_VERSION = 2
#: Options that make a plan this path does not answer (or that it would not print as text).
_BARRED = ("template", "sets", "git", "ref", "path", "git_token_file", "revision", "replace", "state", "out")
#: The environment, besides ``ASTRA_*``, that may change what a plan prints (``XDG_CONFIG_HOME``:
#: where git's own configuration is; the names a detached ``HEAD``'s branch is read from,
#: ``sources.worktree._CI_REFS``).
_ENVIRON = (
    "NO_COLOR",
    "FORCE_COLOR",
    "TERM",
    "HOME",
    "XDG_STATE_HOME",
    "XDG_CONFIG_HOME",
    "PYTHONIOENCODING",
    "PYTHONUTF8",
    "GITHUB_HEAD_REF",
    "GITHUB_REF_NAME",
    "CI_COMMIT_REF_NAME",
)
_TIMEOUT = 5.0

#: Set by ``answer`` when this plan may be recorded: its key and options, then what it loaded.
_armed: dict[str, Any] | None = None


def answer(args: list[str], given: dict[str, Any]) -> int | None:
    """The exit code, the recorded plan printed, when nothing it depended on moved; else ``None``
    (the caller runs the full plan, which this arms to be recorded when it may be)."""
    global _armed
    _armed = None
    if os.environ.get(OFF) == "0" or not _plain(given):
        return None
    try:
        key = _key(args)
        _armed = {"key": key, "given": given}
        with open(_entry_path(key), "rb") as f:
            entry = marshal.load(f)
        if not isinstance(entry, dict) or entry.get("version") != _VERSION:
            return None
        paths = _paths(given)
        git = entry["git"]
        if quickgit.repository(paths) != (git and git["dir"]):
            return None
        if git:  # every entry under the folders as it was: the same files, with the same stats
            if not quickgit.unchanged(git, paths) or _templates(paths, [f for f, _ in entry["files"]]):
                return None
        elif _files_now(paths) != entry["files"]:  # both sorted by name
            return None
        if not _unchanged_server(entry["reads"], given.get("token")):
            return None
    except Exception:  # none recorded, unreadable, or anything else: the full plan answers
        return None
    sys.stdout.write(entry["text"])
    return int(entry["code"])


def before_plan() -> None:
    """Before the full plan reads anything: note its calls (``clusters.http.JOURNAL``)."""
    if _armed is not None:
        from ..clusters import http

        http.JOURNAL = []
        _armed["since"] = time.time_ns()


def noted(loaded: Any, cache: Any) -> None:
    """What the full plan loaded, and the load cache (its stat memo) it used."""
    if _armed is not None:
        _armed["loaded"], _armed["cache"] = loaded, cache


def record(text: str, code: int, made: Any) -> None:
    """Keep the plan that printed ``text`` and ends with ``code``, when it may be answered again
    (see the module docstring); anything else, and nothing is kept."""
    global _armed
    armed, _armed = _armed, None
    from ..clusters import http

    journal, http.JOURNAL = http.JOURNAL, None
    if (
        armed is None
        or "loaded" not in armed
        or code != 0
        or made.has_changes
        or made.held
        or journal is None
    ):
        return
    loaded, cache = armed["loaded"], armed["cache"]
    if not loaded.ok or loaded.templates or loaded.templated or loaded.base_errors:
        return
    if cache is None or cache.folder is None:
        return
    reads = _tagged_reads(journal)
    if reads is None:
        return
    seen = cache.hashes.held_stats(loaded.files)
    if seen is None:  # a file changed too recently to be trusted, or not hashed
        return
    paths = _paths(armed["given"])
    files = sorted(seen)  # the files the load found (its base errors: none), not walked again
    if not paths or _templates(paths, files):
        return
    git = None
    if (made.revision or {}).get("top") is not None:  # a working tree's: what its revision says
        git = quickgit.recorded(paths, made.revision, armed["since"], seen)
        if git is None:
            return
    else:
        try:
            if quickgit.repository(paths) is not None:
                return
        except (OSError, ValueError):
            return
    entry = {
        "version": _VERSION,
        "files": [(f, seen[f]) for f in files],
        "git": git,
        "reads": reads,
        "text": text,
        "code": code,
    }
    from pathlib import Path

    from ..atomic import write_atomically

    write_atomically(Path(_entry_path(armed["key"])), marshal.dumps(entry))  # not written: not kept


def _plain(given: dict[str, Any]) -> bool:
    from ..plainhttp import plain

    return (
        not any(given.get(k) for k in _BARRED)
        and given.get("output", "text") == "text"
        and plain(str(given.get("server") or ""))  # http://, and no proxy: httpx would go through it
        and not (os.environ.get("GIT_DIR") or os.environ.get("GIT_WORK_TREE"))  # a repository elsewhere
    )


def _paths(given: dict[str, Any]) -> list[str]:
    return [str(p) for p in (*(given.get("files") or ()), *(given.get("paths") or ()))]


def _key(args: list[str]) -> str:
    from .. import __file__ as package

    environ = sorted((k, v) for k, v in os.environ.items() if k.startswith("ASTRA_") or k in _ENVIRON)
    code = _newest_module(os.path.dirname(package))
    text = repr((_VERSION, os.getcwd(), args, environ, sys.stdout.isatty(), package, code))
    return hashlib.sha256(text.encode()).hexdigest()


def _newest_module(folder: str) -> tuple[int, int]:
    """The newest modification time of astra's modules, and how many there are: an edited or
    upgraded astra may print another plan."""
    newest, count = 0, 0
    for entry in os.scandir(folder):
        if entry.is_dir(follow_symlinks=False) and entry.name != "__pycache__":
            n, c = _newest_module(entry.path)
            newest, count = max(newest, n), count + c
        elif entry.name.endswith(".py"):
            newest, count = max(newest, entry.stat().st_mtime_ns), count + 1
    return newest, count


def _entry_path(key: str) -> str:
    from ..home import astra_home

    return os.path.join(astra_home(), "cache", "quickplan", key[:32])


def _found(paths: list[str]) -> list[str] | None:
    """The spec files of ``paths`` (``None``: a path is missing, or a template may be used)."""
    from ..runspec.files import find_files

    files, errors = find_files(paths)
    if errors or not paths or _templates(paths, files):
        return None
    return files


def _templates(paths: list[str], files: list[str]) -> bool:
    """Whether a template file is on the search path of ``files`` (``template_files.folders_for``)."""
    from ..runspec.files import SPEC_SUFFIXES
    from ..template_files import folders_for

    for templates in folders_for(paths, {f.rpartition(os.sep)[0] for f in files}):
        try:
            names = os.listdir(templates)
        except OSError:
            continue
        if any(os.path.splitext(n)[1] in SPEC_SUFFIXES and not n.startswith(".") for n in names):
            return True
    return False


def _files_now(paths: list[str]) -> list[tuple[str, str]] | None:
    """Each spec file of ``paths`` with its stat now (``hashes.stat_key``), sorted by name, as
    ``record`` keeps them."""
    from ..hashes import stat_key

    files = _found(paths)
    if files is None:
        return None
    return sorted((f, stat_key(os.stat(f))) for f in files)


def _tagged_reads(journal: list[tuple[str, str, int, str | None]]) -> list[tuple[str, str]] | None:
    """The plan's two reads, ``(url, etag)``, when it made exactly those and both were tagged."""
    if len(journal) != 2:
        return None
    reads = []
    for method, url, status, tag in journal:
        if method != "GET" or status != 200 or not tag or not url.startswith("http://") or "@" in url:
            return None
        reads.append((url, tag))
    kinds = sorted(url.rpartition("?")[2] for url, _ in reads)
    if kinds != ["view=digest", "view=summary"]:
        return None
    return reads


def _unchanged_server(reads: list[tuple[str, str]], token: str | None) -> bool:
    """Whether each read answers 304 to its tag, with the full plan's ``Authorization``
    (``reconciler.plainhttp``: ``http.client`` costs 17 ms of imports, httpx 40)."""
    from .. import plainhttp

    try:
        for url, tag in reads:
            headers = {"If-None-Match": tag}
            if token:
                headers["Authorization"] = f"Bearer {token}"
            answer = plainhttp.get(url, headers, _TIMEOUT)
            if answer is None or answer.status_code != 304:
                return False
        return True
    except (OSError, ValueError, UnicodeError):  # refused, reset, timed out: the full plan says what
        return False
