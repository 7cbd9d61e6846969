"""Git, through the git command line: the one place astra runs ``git``.

Why the CLI (measured on this project's 2-core machines, 10,000 specs, ``bench/git.py`` keeps the
figures): a cold clone is the same for the three (about 3 s: packing the objects), a warm fetch
of one changed file is 76 ms with git, 39 ms with pygit2 and 155 ms with dulwich, and writing
out a tree of 10,000 files is 1.0 s with git, 1.2 s with pygit2, 3.5 s with dulwich. Each is far
inside the budget of a pass, and only the CLI reads credentials from where users keep them
(the ssh agent and ``~/.ssh/config``, git's credential helpers, ``insteadOf`` rules) without
code of ours; it is a Debian package, not one more wheel.

``Git(git_dir)`` runs one command (``run``, ``lines``, ``cat_files``) with a fixed environment:
no prompt (``GIT_TERMINAL_PROMPT=0``; ssh in batch mode), no pager, no hooks run, the C
locale, a timeout. A token from ``--git-token-file`` is given to git through
``GIT_CONFIG_*`` variables (an ``http.extraHeader``), never on a command line (where ``ps``
shows it) and never in a message: ``redact`` takes credentials out of URLs in every text we
show.

Must not touch: the cache's layout (``remote``), the snapshot's files (``snapshot``).

Exceptions::

    SourceError         the source cannot be read (``reconciler.git``)
    └── GitError        a git command failed (its stderr, redacted, is the message)
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

__all__ = ["EMPTY_TREE", "Git", "GitError", "SourceError", "git_available", "redact"]

#: The id of git's empty tree (a diff against it lists every file).
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
#: Seconds a git command may take before it is stopped (a fetch of a large repo is the longest).
TIMEOUT = 600.0

_CREDENTIALS = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@")


class SourceError(Exception):
    """The source cannot be read: the message is the one line users see."""


class GitError(SourceError):
    """A git command failed."""


def redact(text: str) -> str:
    """``text`` with any ``user:password@`` of a URL taken out."""
    return _CREDENTIALS.sub(r"\g<scheme>", text)


def git_available() -> bool:
    from shutil import which

    return which("git") is not None


def _environment(token: str | None, extra: Mapping[str, str] | None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("GIT_") or k in ("GIT_SSH", "GIT_SSH_COMMAND", "GIT_ASKPASS")
    }
    env.update(
        {
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_PAGER": "cat",
            "LC_ALL": "C",
        }
    )
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
    pairs = [("core.hooksPath", os.devnull), ("gc.autoDetach", "false")]
    if token:
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        pairs.append(("http.extraHeader", f"Authorization: Basic {basic}"))
    env["GIT_CONFIG_COUNT"] = str(len(pairs))
    for i, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
    env.update(extra or {})
    return env


class Git:
    """git commands against one repository (``git_dir``: a bare repo, or a work tree's ``.git``)."""

    def __init__(
        self, git_dir: str | os.PathLike[str] | None, *, token: str | None = None, cwd: str | None = None
    ):
        self.git_dir = None if git_dir is None else Path(git_dir)
        self.cwd = cwd
        self._token = token

    def _argv(self, args: Sequence[str]) -> list[str]:
        head = ["git"] if self.git_dir is None else ["git", f"--git-dir={self.git_dir}"]
        return [*head, *args]

    def run(
        self,
        *args: str,
        input: bytes | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = TIMEOUT,
        check: bool = True,
    ) -> bytes:
        """Run one git command; its standard output (``GitError`` when it fails and ``check``)."""
        try:
            done = subprocess.run(
                self._argv(args),
                input=input,
                capture_output=True,
                env=_environment(self._token, env),
                cwd=self.cwd,
                timeout=timeout,
                check=False,
            )
        except FileNotFoundError as exc:
            raise GitError("git is not installed: astra reads git sources with the git command") from exc
        except subprocess.TimeoutExpired as exc:
            raise GitError(f"git {args[0]} took more than {timeout:.0f} s: stopped") from exc
        except OSError as exc:
            raise GitError(f"cannot run git: {exc}") from exc
        if check and done.returncode != 0:
            said = redact(done.stderr.decode("utf-8", "replace")).strip().splitlines()
            words = (
                "; ".join(line.strip() for line in said if line.strip())[:500] or f"exit {done.returncode}"
            )
            raise GitError(f"git {args[0]} failed: {words}")
        return done.stdout

    def ok(self, *args: str) -> bool:
        """Whether the command exits 0 (its output ignored)."""
        try:
            subprocess.run(
                self._argv(args),
                capture_output=True,
                env=_environment(self._token, None),
                cwd=self.cwd,
                timeout=TIMEOUT,
                check=True,
            )
        except (OSError, subprocess.SubprocessError):
            return False
        return True

    def text(self, *args: str) -> str:
        return self.run(*args).decode("utf-8", "replace").strip()

    def cat_files(self, shas: Sequence[str]) -> Iterator[tuple[str, bytes]]:
        """Each blob's bytes, in the order given (one ``git cat-file --batch`` for all)."""
        if not shas:
            return
        out = self.run("cat-file", "--batch", input=("\n".join(shas) + "\n").encode())
        at = 0
        for sha in shas:
            end = out.index(b"\n", at)
            header = out[at:end].split()
            if len(header) != 3:
                raise GitError(f"git cat-file: no object {sha}")
            size = int(header[2])
            yield sha, out[end + 1 : end + 1 + size]
            at = end + 1 + size + 1
