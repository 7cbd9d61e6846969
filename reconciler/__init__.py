"""astra: a declarative, GitOps-style reconciler for runs on an Astraeus GPU cluster.

The package's public surface is re-exported from its parts; ``reconciler.runspec`` is the root
every other part reads.
"""

__all__ = ["__version__"]
__version__ = "0.1.0"
