"""The CLI's last line of defence: what an exception that ends a command becomes (one line on
stderr and an exit code, never a traceback). Both ways into a command use it: the fast path of
``cli/__init__.py`` and typer's ``app.run``; click's own usage errors stay with ``app.run``."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["guarded"]


def guarded(call: Callable[[], int]) -> int:
    """``call()``'s exit code; an exception it raises said in one line, with its exit code. The
    classes it tells apart are imported only once something was raised (``reconciler.home`` and
    ``cli.planning`` cost ``astra validate`` 12 ms of start-up)."""
    try:
        return call()
    except KeyboardInterrupt:
        from .output import error

        error("interrupted")
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:  # every exception is said in one line, never as a traceback
        return _said(exc)


def _said(exc: Exception) -> int:
    """What ``guarded`` makes of an exception: our ``Exit`` is its code; an ``OSError`` (a file or
    folder the command needed) and a ``HomeError`` are said in words; anything else by its class
    name and message (the last line of defence)."""
    from ..home import HomeError
    from .output import error, os_error_words
    from .planning import Exit

    if isinstance(exc, Exit):
        return exc.code
    if isinstance(exc, OSError):
        error(os_error_words(exc))
    elif isinstance(exc, HomeError):
        error(str(exc))
    else:
        error(f"{type(exc).__name__}: {exc}")
    return 1
