"""Aeon's built-in plugins.

Each module is registered through the ``aeon`` entry-point group in ``pyproject.toml`` and uses only the public
``aeon_kernel`` API, exactly as a third-party plugin would. Nothing is imported here on purpose: importing
``aeon_plugins`` must not load any plugin.
"""
