"""Field paths: an immutable address of a value inside a document.

Built step by step (``FieldPath.root().child("spec", "array").child("size")``, ``.index(0)``,
``.key("team")``), never by concatenating strings. ``str(path)`` is the dotted form users read:
``spec.task_groups[0].name``; ``.pointer`` is the JSON Pointer (RFC 6901) the schema tools use.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FieldPath"]

Step = str | int


@dataclass(frozen=True, slots=True)
class FieldPath:
    steps: tuple[Step, ...] = ()

    @classmethod
    def root(cls) -> FieldPath:
        return cls(())

    @classmethod
    def of(cls, steps: list[Step] | tuple[Step, ...]) -> FieldPath:
        return cls(tuple(steps))

    def child(self, *names: str) -> FieldPath:
        return FieldPath((*self.steps, *names))

    def key(self, name: str) -> FieldPath:
        return FieldPath((*self.steps, name))

    def index(self, i: int) -> FieldPath:
        return FieldPath((*self.steps, i))

    @property
    def parent(self) -> FieldPath:
        return FieldPath(self.steps[:-1])

    @property
    def last(self) -> Step | None:
        return self.steps[-1] if self.steps else None

    @property
    def pointer(self) -> str:
        return "".join("/" + str(s).replace("~", "~0").replace("/", "~1") for s in self.steps)

    def __str__(self) -> str:
        out: list[str] = []
        for step in self.steps:
            if isinstance(step, int):
                out.append(f"[{step}]")
            else:
                out.append(("." if out else "") + step)
        return "".join(out)

    def __lt__(self, other: FieldPath) -> bool:
        return tuple(map(_sort_key, self.steps)) < tuple(map(_sort_key, other.steps))


def _sort_key(step: Step) -> tuple[int, int, str]:
    return (0, step, "") if isinstance(step, int) else (1, 0, step)
