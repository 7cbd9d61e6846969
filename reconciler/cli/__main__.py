"""``python -m reconciler.cli``: the same as the ``astra`` command."""

from . import main

main()
