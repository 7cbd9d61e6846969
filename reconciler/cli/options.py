"""The options that say which cluster a command talks to, in typer's form, for every command.

``ServerOpt``: any cluster astra drives (an Astraeus API over http(s), ``slurm://``, or the local
one: also ``astra drive``'s); ``ApiServerOpt``: an Astraeus API only (the seeds' CLI, the
console, ``server env``, the seeds' ``sbatch``), whose help says so; ``TokenOpt``: the API's
bearer token; ``ListOutput``: ``-o table|json|yaml`` of every listing (``listing``). The
cluster's options read their environment variable (CONTRACT §6: ``ASTRA_SERVER``,
``ASTRA_TOKEN``). Each is declared once, in ``reconciler.cli.flags`` (``SERVER``, ``API_SERVER``,
``TOKEN``, ``LIST_OUTPUT``).

Must not touch: connecting (``connect``), what a command does with them.
"""

from __future__ import annotations

from typing import Annotated

from .flags import API_SERVER, LIST_OUTPUT, SERVER, TOKEN, typer_info
from .listing import ListFormat

__all__ = ["ApiServerOpt", "ListOutput", "ServerOpt", "TokenOpt"]

ServerOpt = Annotated[str | None, typer_info(SERVER)]
ApiServerOpt = Annotated[str | None, typer_info(API_SERVER)]
TokenOpt = Annotated[str | None, typer_info(TOKEN)]
ListOutput = Annotated[ListFormat, typer_info(LIST_OUTPUT)]
