"""``python -m reconciler.runspec``: write the generated schemas (``task schema``)."""

from __future__ import annotations

import sys
from pathlib import Path

from .astrafile import astra_schema
from .schema import dumps, run_schema, template_schema


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path.cwd()
    package = Path(__file__).parent
    for kind, make in (("run", run_schema), ("template", template_schema), ("astra", astra_schema)):
        text = dumps(make())
        for target in (root / "schema" / f"{kind}.schema.json", package / f"{kind}.schema.json"):
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
