"""What ``astra validate`` pays before it validates: start-up time and ``-X importtime``."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["NOT_NEEDED", "Import", "chain", "not_needed", "parse_importtime", "top_level"]

#: Packages the validate path must not import (what each is for, when it is needed).
NOT_NEEDED = {
    "pydantic": "the models (plan, apply, the API)",
    "pydantic_core": "the models (plan, apply, the API)",
    "typer": "command-line parsing (every command but the validate fast path)",
    "click": "command-line parsing",
    "rich": "pretty output",
    "ruamel": "positions, only for documents that fail",
    "jsonschema": "the pure-Python validator (jsonschema-rs does the work)",
    "yaml": "PyYAML (yaml-rs does the work)",
    "deepdiff": "diffs (plan)",
}


@dataclass(frozen=True)
class Import:
    self_us: int
    cumulative_us: int
    level: int
    name: str

    @property
    def package(self) -> str:
        return self.name.split(".", 1)[0]


def parse_importtime(stderr: str) -> list[Import]:
    """The lines of ``-X importtime``, in order (a module's imports come before it)."""
    out = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "[us]" in line:
            continue
        self_us, cumulative, name = line[len("import time:") :].split("|", 2)
        stripped = name.lstrip(" ")
        out.append(Import(int(self_us), int(cumulative), (len(name) - len(stripped) - 1) // 2, stripped))
    return out


def top_level(imports: list[Import], n: int = 10) -> list[Import]:
    """The imports nobody above imported (what the program asked for), costliest first."""
    return sorted((i for i in imports if i.level == 0), key=lambda i: -i.cumulative_us)[:n]


def chain(imports: list[Import], index: int) -> list[str]:
    """Who imported ``imports[index]``: from the top-level import down to it."""
    names, level = [imports[index].name], imports[index].level
    for later in imports[index + 1 :]:
        if level == 0:
            break
        if later.level < level:
            names.append(later.name)
            level = later.level
    return names[::-1]


def not_needed(imports: list[Import]) -> list[dict]:
    """Each unneeded package imported: its own import time (all its modules) and first chain."""
    found = []
    for package, why in NOT_NEEDED.items():
        mine = [k for k, i in enumerate(imports) if i.package == package]
        if not mine:
            continue
        # the chain of the package's outermost module: where the program first reached it
        first = min(mine, key=lambda k: (imports[k].level, k))
        found.append(
            {
                "package": package,
                "needed_for": why,
                "self_ms": round(sum(imports[k].self_us for k in mine) / 1000, 1),
                "modules": len(mine),
                "chain": chain(imports, first),
            }
        )
    return found
