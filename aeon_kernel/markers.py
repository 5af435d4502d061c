"""The pluggy markers of project ``"aeon"``, in a leaf module so that hook implementations inside the kernel (the
step executor, the tool invoker) and the hook specifications never import each other."""

from __future__ import annotations

from typing import Final

import pluggy

PROJECT: Final = "aeon"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)
