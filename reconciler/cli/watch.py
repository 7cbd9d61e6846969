"""``astra watch``, ``astra status`` and ``astra force-unlock``: thin commands over ``reconciler.loop``
and ``reconciler.state``."""

from __future__ import annotations

from . import flags
from .applying import force_unlock_command
from .sources import status_command

__all__ = ["force_unlock", "status", "watch"]


def _watch(options: flags.WatchOptions) -> int:
    from .watching import watch_command

    return watch_command(
        list(options.paths),
        interval=options.interval,
        template=options.template,
        sets=list(options.sets),
        prune=options.prune,
        allow_empty=options.allow_empty,
        once=options.once,
        source=options.source,
        state=options.state,
        server=options.server,
        token=options.token,
        git=options.git,
        ref=options.ref,
        folder=options.path,
        git_token_file=options.git_token_file,
        config=options.config,
        webhook_secret_file=options.webhook_secret_file,
        age_identity=options.age_identity,
    )


watch = flags.typer_command(
    flags.WatchOptions,
    _watch,
    "watch",
    """Keep the cluster equal to the files: apply on every change, and resync every --interval.

    A change to one file re-plans only the runs that file holds. With --git URL, the remote's
    --ref is fetched at every resync and exactly the fetched commit's tree is applied; an
    unreachable remote leaves the runs alone (SourceFetchFailed) and is retried with backoff.
    With -c astra.yaml, every source it declares is reconciled, each on its own. A run that
    fails to apply is retried with its own backoff; files that do not load or validate stall
    the source until they change. 'astra status' shows each source's state. Stop with Ctrl-C.

    Examples:

        astra watch runs/

        astra watch --git https://github.com/acme/runs.git --ref main --path runs --interval 1m

        astra watch -c astra.yaml
    """,
)


#: ``astra status`` (its body: ``sources.status_command``)
status = flags.typer_command(flags.SourcesOptions, status_command, "status", status_command.__doc__ or "")


force_unlock = flags.typer_command(
    flags.UnlockOptions,
    force_unlock_command,
    "force_unlock",
    force_unlock_command.__doc__ or "",
)
