"""Meta-tests (datasette's pattern): every hook is documented with its exact signature and has a test."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from aeon_kernel import hookspecs

ROOT = Path(__file__).resolve().parent.parent
HOOKS = sorted(name for name in dir(hookspecs) if name.startswith("aeon_"))


def signature(name: str) -> str:
    sig = inspect.signature(getattr(hookspecs, name))
    params = ", ".join(f"{p.name}: {p.annotation}" for p in sig.parameters.values())
    return f"{name}({params}) -> {sig.return_annotation}"


def test_there_are_hooks_for_every_component_kind_and_event() -> None:
    kinds = [
        "llm_adapters",
        "memory_backends",
        "tools",
        "validators",
        "supervisors",
        "convergence_engines",
        "telemetry_sinks",
    ]
    assert {f"aeon_register_{k}" for k in kinds} <= set(HOOKS)
    assert {"aeon_execute_step", "aeon_cycle_end", "aeon_step_status_changed"} <= set(HOOKS)


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
def test_hook_is_exercised_by_a_test(name: str) -> None:
    tests = [p for p in (ROOT / "tests").rglob("*.py") if p.name != Path(__file__).name]
    assert any(re.search(rf"\b{name}\b", p.read_text(encoding="utf-8")) for p in tests), (
        f"no test uses {name}"
    )
