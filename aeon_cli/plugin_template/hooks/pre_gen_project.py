"""Checks the plugin name before cookiecutter writes anything; ``aeon plugin new`` applies the same rule.

The name must be lower-case letters, digits and single hyphens, starting with a letter: the distribution is
``aeon-<name>`` and the module ``aeon_<name>`` (hyphens become underscores).
"""

import re
import sys

NAME = {{ cookiecutter.project_name|tojson }}
KINDS = ("tool", "llm", "memory", "sink")
KIND = {{ cookiecutter.kind|tojson }}

if not re.fullmatch(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*", NAME) or len(NAME) > 40:
    sys.exit(
        f"ERROR: invalid plugin name {NAME!r}: use lower-case letters, digits and single hyphens, starting "
        "with a letter, at most 40 characters (for example 'word-tools')"
    )
if NAME.startswith("aeon-"):
    sys.exit(f"ERROR: give the name without the 'aeon-' prefix ({NAME[5:]!r}); the package is aeon-<name>")
if KIND not in KINDS:
    sys.exit(f"ERROR: kind must be one of {', '.join(KINDS)} (got {KIND!r})")
