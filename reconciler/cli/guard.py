"""The CLI's last line of defence: what an exception that ends a command becomes (one line on
stderr and an exit code, never a traceback). Both ways into a command use it: the fast path of
``cli/__init__.py`` and typer's ``app.run``; click's own usage errors stay with ``app.run``."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["guarded"]


def guarded(call: Callable[[], int]) -> int:
    """``call()``'s exit code; an exception it raises said in one line, with its exit code."""
    from ..home import HomeError
    from .output import error
    from .planning import Exit

    try:
        return call()
    except Exit as exc:
        return exc.code
    except KeyboardInterrupt:
        error("interrupted")
        return 130
    except BrokenPipeError:
        return 1
    except OSError as exc:  # a file or folder the command needed: said in words, not as a class name
        from .output import os_error_words

        error(os_error_words(exc))
        return 1
    except HomeError as exc:
        error(str(exc))
        return 1
    except Exception as exc:  # the last line of defence: one line, never a traceback
        error(f"{type(exc).__name__}: {exc}")
        return 1
