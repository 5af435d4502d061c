"""Structural promises: SC-008's size cap, nothing heavy at import time (DESIGN rule 5), no eval on data."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_primary_kernel_module_is_under_800_lines() -> None:
    """SC-008, counted as physical lines of aeon_kernel/orchestrator.py (docstrings and blank lines included)."""
    lines = (ROOT / "aeon_kernel" / "orchestrator.py").read_text(encoding="utf-8").count("\n")
    assert lines < 800, f"orchestrator.py has {lines} lines"


def test_importing_the_kernel_loads_no_plugin_cli_http_or_model_runtime() -> None:
    probe = (
        "import sys, json, aeon_kernel; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'click', 'rich', 'httpx', 'llama_cpp', 'aeon_plugins', 'tenacity', 'json_repair'})))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []


def test_no_eval_exec_or_pickle_anywhere_in_the_packages() -> None:
    forbidden = {"eval", "exec", "compile", "__import__"}
    for path in [*ROOT.joinpath("aeon_kernel").rglob("*.py"), *ROOT.joinpath("aeon_plugins").rglob("*.py")]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in forbidden, f"{path.name}:{node.lineno} calls {node.func.id}"
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                assert not any(n.split(".")[0] in {"pickle", "marshal", "shelve"} for n in names), path.name


def test_builtin_plugins_use_only_the_public_kernel_api() -> None:
    """Built-ins are written exactly as a third-party plugin would be (DESIGN: aeon_plugins/)."""
    allowed_private = {
        "aeon_kernel.contracts",
        "aeon_kernel.models",
        "aeon_kernel.output",
        "aeon_kernel.schemas",
        "aeon_kernel.state_store",
    }
    for path in ROOT.joinpath("aeon_plugins").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("aeon_kernel."):
                assert node.module in allowed_private, f"{path.name} imports {node.module}"
                assert node.module not in {"aeon_kernel.orchestrator", "aeon_kernel.engine"}
