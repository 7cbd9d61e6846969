"""The load step of plan, apply and watch: files → the desired runs of a source, or every problem.

The parts, each behind its own seam (the fast paths give what the plain path gives, and say at
debug level why they fall back to it):

* ``source``: ``load_source`` and ``refresh``, the step itself (``default_cache``);
* ``loaded``: what a load gives, ``Loaded`` and ``LoadedFile`` (plain data);
* ``cache``: the load cache, ``FileCache`` (a warm load reads no file: digests only);
* ``parallel``: a cold load of many files on every core;
* ``fresh``: loading files in this process (the plain path);
* ``reread``: the documents of cached runs that a plan must compare, read again from their
  files once the plan knows which (``documents(loaded, names)``).

Must not touch: clusters, the source's state, the plan (which reads what this gives).
"""

from __future__ import annotations

from .cache import CACHE_VERSION, FileCache
from .loaded import Loaded, LoadedFile
from .reread import documents
from .source import default_cache, load_source, refresh

__all__ = [
    "CACHE_VERSION",
    "FileCache",
    "Loaded",
    "LoadedFile",
    "default_cache",
    "documents",
    "load_source",
    "refresh",
]
