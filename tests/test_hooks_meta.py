"""Meta-tests (datasette's pattern): every hook is documented with its exact signature and has its own test."""

from __future__ import annotations

import ast
import functools
import inspect
import re
from pathlib import Path

import pytest

from aeon_kernel import hookspecs
from aeon_kernel.kinds import KINDS

ROOT = Path(__file__).resolve().parent.parent
HOOKS = sorted(name for name in dir(hookspecs) if name.startswith("aeon_"))


def signature(name: str) -> str:
    sig = inspect.signature(getattr(hookspecs, name))
    params = ", ".join(f"{p.name}: {p.annotation}" for p in sig.parameters.values())
    return f"{name}({params}) -> {sig.return_annotation}"


@functools.cache
def hook_tests() -> dict[str, list[str]]:
    """Every ``test_hook_*`` function pytest collects under tests/, with where it is defined.

    Found by parsing (``ast``), not by searching text: a mention in a comment, a string or another test's body
    does not count, and neither does a function nested in another one or a file pytest does not collect.
    """
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if not (path.name.startswith("test_") or path.stem.endswith("_test")):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        functions = [node for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
        for cls in tree.body:
            if isinstance(cls, ast.ClassDef) and cls.name.startswith("Test"):
                functions += [n for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        for function in functions:
            if function.name.startswith("test_hook_"):
                where = f"{path.relative_to(ROOT)}:{function.lineno}"
                found.setdefault(function.name, []).append(where)
    return found


def test_there_are_hooks_for_every_component_kind_and_event() -> None:
    # One register hook per kind of the table, and no register hook the registries would never call.
    assert {kind.hook for kind in KINDS} == {name for name in HOOKS if name.startswith("aeon_register_")}
    assert {"aeon_execute_step", "aeon_invoke_tool", "aeon_cycle_end", "aeon_step_status_changed"} <= set(
        HOOKS
    )


@pytest.mark.parametrize("name", HOOKS)
def test_hook_is_documented_with_its_exact_signature(name: str) -> None:
    docs = (ROOT / "docs" / "hooks.md").read_text(encoding="utf-8")
    assert f"### `{signature(name)}`" in docs


def test_docs_list_no_hook_that_does_not_exist() -> None:
    docs = (ROOT / "docs" / "hooks.md").read_text(encoding="utf-8")
    assert sorted(set(re.findall(r"^### `(aeon_\w+)\(", docs, re.MULTILINE))) == HOOKS


@pytest.mark.parametrize("name", HOOKS)
def test_hook_has_a_docstring_in_pytest_style(name: str) -> None:
    doc = inspect.getdoc(getattr(hookspecs, name)) or ""
    params = inspect.signature(getattr(hookspecs, name)).parameters
    assert doc.splitlines()[0].endswith(".")
    for param in params:
        assert f":param {param}:" in doc


@pytest.mark.parametrize("name", HOOKS)
def test_hook_has_its_own_test(name: str) -> None:
    assert f"test_hook_{name}" in hook_tests(), (
        f"no test function named test_hook_{name} under tests/: write one that checks what {name} does"
    )


def test_every_hook_test_names_a_hook_that_exists() -> None:
    """A hook renamed or removed leaves no test behind that claims to cover it."""
    stale = {
        test: where
        for test, where in hook_tests().items()
        if test.startswith("test_hook_aeon_") and test.removeprefix("test_hook_") not in HOOKS
    }
    assert stale == {}
