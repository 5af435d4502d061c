"""The example flows of ``examples/flows/``: each one is valid as shipped, and (marked ``model``) runs on the
embedded model from the README's command, reaching an exit with every stage recorded."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from aeon_kernel import Engine
from aeon_kernel.flow.checks import Known
from aeon_kernel.flow.engine import node_functions
from aeon_kernel.flow.graph import mermaid
from aeon_kernel.flow.loader import load_flow
from aeon_kernel.schemas import schema_errors

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(path.parent for path in (ROOT / "examples" / "flows").glob("*/flow.yaml"))


def readme_inputs() -> dict[str, str]:
    """The input the README runs each example with, by example name."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.findall(r"aeon flow run examples/flows/([\w-]+) --input '(.+?)'", text)
    return dict(found)


def test_there_are_two_examples_each_in_the_readme() -> None:
    assert [path.name for path in EXAMPLES] == ["review-sentiment", "ticket-triage"]
    assert set(readme_inputs()) == {path.name for path in EXAMPLES}


@pytest.mark.parametrize("directory", EXAMPLES, ids=lambda path: path.name)
def test_an_example_is_valid_and_takes_the_readme_s_input(directory: Path) -> None:
    import json

    with Engine() as engine:
        registries = engine.registries
        flow = load_flow(
            directory,
            Known(
                nodes=registries["nodes"].names(),
                tools=registries["tools"].names(),
                policies=registries["retrieval_policies"].names(),
                memory_backends=registries["memory_backends"].names(),
            ),
        )
        node_functions(registries, flow)
    assert any(node.kind == "agent" for node in flow.spec.nodes)  # the examples show the model at work
    start = flow.nodes[flow.default_start]
    value: Any = json.loads(readme_inputs()[directory.name])
    if start.input_schema:
        assert schema_errors(flow.schemas[start.input_schema], value) == []
    assert all(node.id in mermaid(flow) for node in flow.spec.nodes)


@pytest.mark.model
@pytest.mark.parametrize("directory", EXAMPLES, ids=lambda path: path.name)
def test_an_example_runs_on_the_embedded_model(directory: Path) -> None:
    import json

    value = json.loads(readme_inputs()[directory.name])
    with Engine.from_config_dir(directory) as engine:
        result = engine.run(value)
    assert result.run.status != "ttl_expired", result.message
    assert result.history and result.history[0]["node"] == engine.flow.default_start
    ended = [task for task in result.tasks if task["exit"]]
    assert ended, result.tasks  # some task reached an exit
    assert result.status in ("success", "partial"), (result.message, result.history)
