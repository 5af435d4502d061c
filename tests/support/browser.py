"""Debian's Chromium, driven by Playwright, for the inspector's browser tests (test_inspect*.py,
test_step_through.py): where it is, and the mark that skips a test without it — except where CI sets
``AEON_REQUIRE_BROWSER``, and a missing browser fails instead."""

from __future__ import annotations

import os
import shutil
from importlib.util import find_spec

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_browser = pytest.mark.skipif(
    (CHROMIUM is None or find_spec("playwright") is None) and not os.environ.get("AEON_REQUIRE_BROWSER"),
    reason="needs Debian's chromium and playwright (scripts/setup.sh --dev installs them: apt-get install "
    "chromium; pip install -e '.[dev]')",
)
