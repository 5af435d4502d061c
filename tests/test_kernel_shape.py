"""Structural promises: SC-008's size cap, the layering of the packages, a public API edge, nothing heavy at
import time (DESIGN rule 5), and no eval on data."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import aeon_kernel

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ROOT / "aeon_kernel"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


KERNEL_MODULES = {
    _module_name(path): path for path in KERNEL.rglob("*.py") if "plugin_template" not in path.parts
}


def _imports(path: Path) -> set[str]:
    """Every aeon_kernel module ``path`` imports anywhere: top level, in functions, under TYPE_CHECKING."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").startswith("aeon_kernel")
        ):
            module = node.module or ""
            for alias in node.names:
                found.add(f"{module}.{alias.name}" if f"{module}.{alias.name}" in KERNEL_MODULES else module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("aeon_kernel")}
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the kernel modules it imports; the package itself imports what it re-exports, lazily."""
    graph = {name: _imports(path) - {name} for name, path in KERNEL_MODULES.items()}
    graph["aeon_kernel"] = set(aeon_kernel._MODULES)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_kernel_module_is_under_800_lines() -> None:
    """SC-008 names the primary kernel module (now the run, aeon_kernel/runtime/run.py); no module is larger."""
    for name, path in KERNEL_MODULES.items():
        lines = path.read_text(encoding="utf-8").count("\n")
        assert lines < 800, f"{name} has {lines} lines"


def test_the_kernel_has_no_import_cycles() -> None:
    """Counting every import, lazy and TYPE_CHECKING ones too (they are cycles a reader must hold in mind)."""
    assert cycles(import_graph()) == []


def test_cycle_detection_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_runtime_imports_no_plan_code_and_nothing_imports_the_cli() -> None:
    """DESIGN: runtime/ knows no plan, pass or flow; the CLI face is never on an embedder's import path."""
    graph = import_graph()
    for name, imported in graph.items():
        if name.startswith("aeon_kernel.runtime"):
            assert not {
                m for m in imported if m.startswith(("aeon_kernel.plan", "aeon_kernel.orchestrator"))
            }, name
        if not name.startswith(("aeon_cli", "aeon_cli.__main__")):
            assert not {m for m in imported if m.startswith("aeon_cli")}, name


def test_kernel_modules_never_import_the_package_upward() -> None:
    """``from aeon_kernel import X`` inside the kernel would make every module depend on every other one."""
    for name, path in KERNEL_MODULES.items():
        if name == "aeon_kernel" or name.startswith("aeon_kernel.testing"):
            continue  # the package itself; test support uses the public API, as plugin authors do
        assert "aeon_kernel" not in _imports(path), f"{name} imports the aeon_kernel package"


def test_the_public_api_is_the_export_table() -> None:
    exported = {name for names in aeon_kernel._MODULES.values() for name in names}
    assert sorted(aeon_kernel.__all__) == sorted({*exported, "__version__"})
    for name in aeon_kernel.__all__:
        assert getattr(aeon_kernel, name) is not None
    with pytest.raises(AttributeError):
        aeon_kernel.ExecutionError  # noqa: B018 - nothing raised it; it is gone


def test_importing_the_kernel_loads_no_plugin_cli_http_or_model_runtime() -> None:
    probe = (
        "import sys, json, aeon_kernel; "
        "from aeon_kernel import Engine, FunctionTool, hookimpl; "
        "from aeon_kernel.config import AeonConfig; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'click', 'rich', 'jinja2', 'httpx', 'llama_cpp', 'aeon_plugins', 'tenacity', 'json_repair', 'jsonschema'} "
        "or m.startswith('aeon_cli'))))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []


def test_no_eval_exec_or_pickle_anywhere_in_the_packages() -> None:
    forbidden = {"eval", "exec", "compile", "__import__"}
    for path in [*ROOT.joinpath("aeon_kernel").rglob("*.py"), *ROOT.joinpath("aeon_plugins").rglob("*.py")]:
        if "plugin_template" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in forbidden, f"{path.name}:{node.lineno} calls {node.func.id}"
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                assert not any(n.split(".")[0] in {"pickle", "marshal", "shelve"} for n in names), path.name


def test_builtin_plugins_use_only_the_public_kernel_api() -> None:
    """Built-ins are written exactly as a third-party plugin would be: ``from aeon_kernel import ...`` only."""
    for path in ROOT.joinpath("aeon_plugins").rglob("*.py"):
        source = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("aeon_kernel"):
                assert node.module == "aeon_kernel", f"{path.name} imports {node.module}"
                for alias in node.names:
                    assert alias.name in aeon_kernel.__all__, f"{path.name} imports {alias.name}"
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("aeon_plugins."):
                pytest.fail(
                    f"{path.name} imports another plugin's module {node.module}: share through the kernel"
                )
        assert not re.search(r"\baeon_kernel\.\w+\.", source.split('"""', 2)[-1]), path.name
