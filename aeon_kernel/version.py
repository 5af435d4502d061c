"""The version of aeon-core, in a module of its own so that kernel modules never import the package upward."""

from __future__ import annotations

from typing import Final

__version__: Final = "0.1.0"
