"""The options that say which cluster a command talks to, declared once for every command.

``ServerOpt``: any cluster astra drives (an Astraeus API over http(s), ``slurm://``, or the local
one: also ``astra drive``'s); ``ApiServerOpt``: an Astraeus API only (the seeds' CLI, the
console, ``server env``, the seeds' ``sbatch``), whose help says so; ``TokenOpt``: the API's
bearer token. Each reads its environment variable (CONTRACT §6: ``ASTRA_SERVER``, ``ASTRA_TOKEN``).

Must not touch: connecting (``connect``), what a command does with them.
"""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["ApiServerOpt", "ServerOpt", "TokenOpt"]

ServerOpt = Annotated[
    str | None,
    typer.Option(
        "--server",
        envvar="ASTRA_SERVER",
        help="The cluster: http(s)://… an Astraeus API, slurm://[PARTITION] (default: the local one).",
    ),
]
ApiServerOpt = Annotated[
    str | None,
    typer.Option("--server", envvar="ASTRA_SERVER", help="The Astraeus API (default: the local one)."),
]
TokenOpt = Annotated[str | None, typer.Option("--token", envvar="ASTRA_TOKEN", help="The bearer token.")]
