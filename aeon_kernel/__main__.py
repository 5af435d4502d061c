"""``python -m aeon_kernel`` is the ``aeon`` command."""

from aeon_kernel.cli.main import main

main()
