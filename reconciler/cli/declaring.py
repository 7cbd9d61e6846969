"""A source of ``astra.yaml`` for ``astra plan -c`` and ``astra apply -c``, and what it declares
beside its runs (its secrets in age, its alerts), planned and applied as ``astra watch -c`` does.

* ``configured(options)``: the options of the source ``-c astra.yaml`` names (``--source NAME``,
  or the file's only source): its files or repository, prune and cluster; and its ``Declared``
  (``loop.declared.declared_of``). Without ``-c``, the options as given and nothing declared.
* ``declared_plan(made, s, declared)``: the plan with the secrets' and alerts' lines (the secrets
  decrypted with ``--age-identity``); a file that does not decrypt is a ``LoadFailed`` naming it,
  and nothing is applied. For a saved plan, its values decrypted again (a plan holds none).
* ``apply_declared``: set what the plan shows, before the runs are applied, and say so.

Must not touch: the runs' plan and apply (``planning``, ``applying``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .output import echo

__all__ = ["apply_declared", "configured", "declared_plan", "with_declared"]

_DONE = {"create": "created", "update": "updated", "delete": "deleted"}


def _refused(words: str) -> Exception:
    """Our error of ``words`` (``planning.failures`` says it in one line, exit 1)."""
    from ..plan import PlanError

    return PlanError(words)


def configured(options: Any, *, saved_plan: bool = False) -> tuple[Any, Any]:
    """The options of ``-c astra.yaml``'s source, and its ``Declared`` (see the module docstring);
    ``saved_plan``: apply's arguments name a saved plan, whose secrets ``-c`` decrypts again."""
    if saved_plan and options.config is not None:  # the plan file is no run spec
        options = dataclasses.replace(options, targets=())
    if options.config is None:
        if options.age_identity:
            raise _refused("--age-identity decrypts the secrets astra.yaml declares: give -c astra.yaml too")
        return options, None
    given = [*getattr(options, "files", ()), *getattr(options, "paths", ()), *getattr(options, "targets", ())]
    if given or options.git:
        raise _refused("give -c astra.yaml or the run specs (-f PATH, --git URL), not both")
    decl = _source_of(options.config, options.source)
    changed: dict[str, Any] = {
        "source": decl.name,
        "prune": options.prune or decl.prune,
        "allow_empty": options.allow_empty or decl.allow_empty,
        "server": decl.cluster or options.server,
    }
    if decl.repo:
        changed |= {"git": decl.repo, "ref": decl.ref, "path": decl.folder, "git_token_file": decl.token_file}
    else:
        changed["files"] = (decl.path,)
    made = dataclasses.replace(options, **changed)
    from ..loop.declared import declared_of

    return made, dataclasses.replace(declared_of(decl, options.age_identity), prune=made.prune)


def _source_of(config: str, name: str | None) -> Any:
    from ..runspec.astrafile import load_astra_file

    declared, problems = load_astra_file(config)
    if declared is None:
        for p in problems:
            echo(p.format(), err=True)
        raise _refused(
            f"{len(problems)} problem{'s' if len(problems) != 1 else ''} in {config}: nothing is planned"
        )
    names = [s.name for s in declared.sources]
    if name is None and len(names) == 1:
        return declared.sources[0]
    for s in declared.sources:
        if s.name == name:
            return s
    which = f"no source named {name} in {config}" if name else f"{config} declares {len(names)} sources"
    raise _refused(f"{which}: give --source NAME, one of {', '.join(names)}")


def _folder(s: Any, folder: str | None = None) -> str:
    """Where the source's files are on disk (``folder``, else a remote's checkout, or its folder)."""
    if folder is not None:
        return folder
    checkout = s.source.checkout
    paths = checkout.paths if checkout is not None else s.source.paths
    return paths[0] if paths else "."


def with_declared(made: Any, s: Any, declared: Any, folder: str | None = None) -> tuple[Any, Any]:
    """The plan with what the source declares beside its runs, and its ``Planned`` (the secrets'
    values, for the apply: never shown, never saved); ``None`` when the source declares nothing
    (a plan without ``-c`` imports nothing of the loop's)."""
    if declared is None or declared.empty:
        return made, None
    from ..git import SourceError
    from ..git.agesecrets import AgeSecretError

    try:
        planned = declared.plan(s.cluster, _folder(s, folder))
    except AgeSecretError as exc:  # as a watch's status says it: nothing is applied
        raise SourceError(f"LoadFailed: {exc}: nothing was planned, and nothing is applied") from None
    return dataclasses.replace(
        made, resources=planned.resources, resources_not_pruned=planned.not_pruned
    ), planned


def declared_plan(made: Any, s: Any, declared: Any, *, saved: bool, folder: str | None) -> tuple[Any, Any]:
    """``with_declared`` of a plan made now; of a saved one (``saved``, its files in ``folder``),
    the plan as it is and the values it sets (``saved_values``)."""
    if saved:
        return made, saved_values(made, s, declared, folder)
    return with_declared(made, s, declared)


def saved_values(saved: Any, s: Any, declared: Any, folder: str | None) -> Any:
    """The secrets' values a saved plan sets (a saved plan never holds one): decrypted again from
    ``-c astra.yaml --age-identity``, refused when what they would do is not what the plan says."""
    from ..loop.declared import Planned

    secrets = [r for r in saved.resources if r.kind == "secret"]
    if not secrets:
        return Planned()
    if declared is None:
        raise _refused(
            "this plan sets secrets, and a saved plan holds no secret's value: apply it with "
            "-c astra.yaml --age-identity FILE, as it was planned"
        )
    if folder is None:
        raise _refused(
            "this plan sets the secrets of a git source, and a saved plan holds no value: "
            "apply -c astra.yaml --age-identity FILE without the saved plan"
        )
    again, planned = with_declared(saved, s, declared, folder)
    if sorted((r.kind, r.name, r.action) for r in again.resources) != sorted(
        (r.kind, r.name, r.action) for r in saved.resources
    ):
        raise _refused("the secrets or alerts changed since the plan was made: plan again")
    return planned


def apply_declared(made: Any, cluster: Any, planned: Any) -> None:
    """Set the plan's secrets and alerts (before its runs: a run that reads a new secret does not
    wait for it), and say what was done: ``secret hf-token: updated``, ``alert failures: created``."""
    if not made.resources:  # nothing declared (``planned`` may be ``None``), or nothing to change
        return
    from ..loop.declared import Declared

    Declared(made.source).apply(cluster, made.resources, planned.values, planned.sealed)
    for r in sorted(made.resources, key=lambda r: (r.kind, r.name)):
        echo(f"{r.kind} {r.name}: {_DONE[r.action]}")
