"""The options that say which cluster a command talks to, in typer's form, for every command.

``ServerOpt``: any cluster astra drives (an Astraeus API over http(s), ``slurm://``, or the local
one: also ``astra drive``'s); ``ApiServerOpt``: an Astraeus API only (the seeds' CLI, the
console, ``server env``, the seeds' ``sbatch``), whose help says so; ``TokenOpt``: the API's
bearer token. Each reads its environment variable (CONTRACT §6: ``ASTRA_SERVER``, ``ASTRA_TOKEN``).
The first and the last are declared once, in ``reconciler.cli.flags`` (``SERVER``, ``TOKEN``).

Must not touch: connecting (``connect``), what a command does with them.
"""

from __future__ import annotations

from typing import Annotated

import typer

from .flags import SERVER, TOKEN, typer_info

__all__ = ["ApiServerOpt", "ServerOpt", "TokenOpt"]

ServerOpt = Annotated[str | None, typer_info(SERVER)]
ApiServerOpt = Annotated[
    str | None,
    typer.Option("--server", envvar=SERVER.env, help="The Astraeus API (default: the local one)."),
]
TokenOpt = Annotated[str | None, typer_info(TOKEN)]
