"""``normalize`` lives in the spec layer (``reconciler.runspec.normalize``), where the control plane
can use it too; this name stays for the plan's callers."""

from __future__ import annotations

from ..runspec.normalize import digest, normalize, spec_digest

__all__ = ["digest", "normalize", "spec_digest"]
