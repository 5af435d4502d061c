"""Structural promises (decision 0015, DESIGN "The grown shape"): the layers of the three packages, their line
budgets and SC-008's module cap, a small public edge, nothing heavy at import time (DESIGN rule 5), and no eval on
data. Each rule is a test, so the kernel stays small enough to read while the batteries and the face grow."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import aeon_kernel
import aeon_kernel.kit

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("aeon_kernel", "aeon_plugins", "aeon_cli")
#: lines of Python per package (decision 0015); the kernel's is the promise, the others keep growth visible
LINE_BUDGET = {"aeon_kernel": 11_855, "aeon_plugins": 20_290, "aeon_cli": 8_920}
#: the wiring module stays wiring (the issue asked for about 350 lines): components.py builds the components, the
#: orchestrator runs them
ENGINE_BUDGET = 410
#: what neither ``import aeon_kernel`` nor an embedding on the scripted model may load
HEAVY = ("click", "rich", "jinja2", "yaml", "platformdirs", "httpx", "ssl", "asyncio")
#: what a plugin may import from the kernel: the public API, the helpers for plugin authors, every error
PLUGIN_FACING = ("aeon_kernel", "aeon_kernel.kit", "aeon_kernel.errors")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {
    _module_name(path): path
    for package in PACKAGES
    for path in (ROOT / package).rglob("*.py")
    if "plugin_template" not in path.parts
}


def _imports(path: Path) -> set[str]:
    """Every ``aeon_*`` module ``path`` imports anywhere: top level, in functions, under TYPE_CHECKING."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("aeon_"):
            module = node.module or ""
            for alias in node.names:
                found.add(f"{module}.{alias.name}" if f"{module}.{alias.name}" in MODULES else module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("aeon_")}
    return found


def import_graph(package: str) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports."""
    return {
        name: {m for m in _imports(path) if m.split(".")[0] == package} - {name}
        for name, path in MODULES.items()
        if name.split(".")[0] == package
    }


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


def _lines(path: Path) -> int:
    return path.read_text(encoding="utf-8").count("\n")


# --- sizes ---------------------------------------------------------------------------------------------------------


def test_every_module_is_under_800_lines() -> None:
    """SC-008 names the primary kernel module (now the run, aeon_kernel/runtime/run.py); no module is larger."""
    too_long = {name: _lines(path) for name, path in MODULES.items() if _lines(path) >= 800}
    assert too_long == {}


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_keeps_its_line_budget(package: str) -> None:
    total = sum(_lines(path) for name, path in MODULES.items() if name.split(".")[0] == package)
    assert total <= LINE_BUDGET[package], (
        f"{package} has {total} lines, over its budget of {LINE_BUDGET[package]}"
    )


def test_the_engine_is_wiring_only() -> None:
    assert _lines(ROOT / "aeon_kernel" / "engine.py") <= ENGINE_BUDGET


# --- layers --------------------------------------------------------------------------------------------------------


def test_the_kernel_imports_nothing_from_the_batteries_or_the_face() -> None:
    """The package rule: a kernel module names no module of aeon_plugins or aeon_cli, in any import (the default
    plugins are registered by their module path, as simonw/llm's DEFAULT_PLUGINS, never imported by name)."""
    offending = {
        name: sorted(m for m in _imports(path) if m.split(".")[0] in ("aeon_plugins", "aeon_cli"))
        for name, path in MODULES.items()
        if name.split(".")[0] == "aeon_kernel"
    }
    assert {name: found for name, found in offending.items() if found} == {}


def test_the_batteries_never_import_the_face() -> None:
    offending = {
        name: sorted(m for m in _imports(path) if m.split(".")[0] == "aeon_cli")
        for name, path in MODULES.items()
        if name.split(".")[0] == "aeon_plugins"
    }
    assert {name: found for name, found in offending.items() if found} == {}


def test_the_runtime_imports_no_wiring_and_no_step_contract() -> None:
    """runtime/ drives any scheduler: it knows neither the engine, the orchestrator, nor plan steps."""
    wiring = {"aeon_kernel.engine", "aeon_kernel.orchestrator", "aeon_kernel.components", "aeon_kernel.steps"}
    for name, path in MODULES.items():
        if name.startswith("aeon_kernel.runtime"):
            assert not wiring & _imports(path), name


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycles_within_a_package(package: str) -> None:
    """Counting every import, lazy and TYPE_CHECKING ones too (they are cycles a reader must hold in mind); the
    public modules import what they re-export only for type checkers, so they are left out."""
    graph = import_graph(package)
    for public in ("aeon_kernel", "aeon_kernel.kit"):
        graph.pop(public, None)
    assert cycles(graph) == []


def test_cycle_detection_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_kernel_modules_never_import_the_public_modules() -> None:
    """``from aeon_kernel import X`` inside the kernel would make every module depend on every other one."""
    for name, path in MODULES.items():
        if name.split(".")[0] != "aeon_kernel" or name in ("aeon_kernel", "aeon_kernel.kit"):
            continue
        if name.startswith("aeon_kernel.testing"):
            continue  # test support uses the public API, as plugin authors do
        assert not {"aeon_kernel", "aeon_kernel.kit"} & _imports(path), f"{name} imports a public module"


def test_plugins_use_only_the_plugin_facing_kernel_api() -> None:
    """Built-ins are written as a third-party plugin would be: kernel names come from ``aeon_kernel``,
    ``aeon_kernel.kit`` or ``aeon_kernel.errors`` only, and another plugin is used through its package's public
    names (``from aeon_plugins.planning import parse_plan``), never its modules."""
    for name, path in MODULES.items():
        if name.split(".")[0] != "aeon_plugins":
            continue
        package = ".".join(name.split(".")[:2])
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("aeon_"):
                continue
            module = node.module or ""
            if module.startswith("aeon_kernel"):
                assert module in PLUGIN_FACING or module.startswith("aeon_kernel.testing"), (
                    f"{name}: {module}"
                )
                public = set(aeon_kernel.__all__) | set(aeon_kernel.kit.__all__)
                if module in ("aeon_kernel", "aeon_kernel.kit"):
                    assert {a.name for a in node.names} <= public, f"{name} imports {module}: {node.names}"
            elif not (module == package or module.startswith(f"{package}.")):
                other = importlib.import_module(module)
                assert module.count(".") == 1, f"{name} reaches into another plugin's module {module}"
                assert {a.name for a in node.names} <= set(getattr(other, "__all__", ())), f"{name}: {module}"


# --- the public edge -----------------------------------------------------------------------------------------------


def test_the_public_api_is_small_and_each_name_resolves() -> None:
    assert 50 <= len(aeon_kernel.__all__) <= 70, len(aeon_kernel.__all__)
    for module in (aeon_kernel, aeon_kernel.kit):
        for name in module.__all__:
            assert getattr(module, name) is not None
    with pytest.raises(AttributeError):
        aeon_kernel.ExecutionError  # noqa: B018 - nothing raised it; it is gone
    assert not set(aeon_kernel.__all__) & set(aeon_kernel.kit.__all__), "a name has one home"


def test_the_lazy_tables_are_generated_from_the_type_checking_imports() -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "exports.py"), "--check"], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr


# --- nothing heavy at import time ----------------------------------------------------------------------------------


def _loaded_after(code: str) -> list[str]:
    probe = f"import sys, json\n{code}\nprint(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    loaded: list[str] = json.loads(out.splitlines()[-1])
    return loaded


def test_importing_the_kernel_loads_nothing_heavy() -> None:
    assert _loaded_after("import aeon_kernel\nfrom aeon_kernel import Engine, FunctionTool, hookimpl") == []


def test_an_embedding_on_the_scripted_model_loads_nothing_heavy() -> None:
    embedding = (
        "from aeon_kernel import Engine\n"
        "from aeon_kernel.config import AeonConfig\n"
        "plan = {'goal': 'g', 'steps': [{'step_id': '1', 'description': 'd', 'tool': 'calculator', "
        "'arguments': {'expression': '5 + 10'}}]}\n"
        "with Engine(AeonConfig().with_choice('llm', 'scripted', responses=[plan, {'answer': '15'}])) as e:\n"
        "    assert e.run('add 5 and 10')['status'] == 'completed'\n"
    )
    assert _loaded_after(embedding) == []


def test_no_eval_exec_or_pickle_anywhere_in_the_packages() -> None:
    forbidden = {"eval", "exec", "compile", "__import__"}
    for path in MODULES.values():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in forbidden, f"{path.name}:{node.lineno} calls {node.func.id}"
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                assert not any(n.split(".")[0] in {"pickle", "marshal", "shelve"} for n in names), path.name
