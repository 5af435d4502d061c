"""A flow's call or stage that needs a person's approval (issue 29, decision 0021): the task waits, the run with
it, durably; the answer lets the stage run again, or fails it; the other tasks of the cycle are not lost."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from aeon_kernel import Engine, ValidationError
from aeon_kernel.config import AeonConfig, Choice
from aeon_kernel.kit import Approval

ROOT = Path(__file__).resolve().parents[3]
TOTAL = {
    "id": "total",
    "role": "linear",
    "impl": "call_tool",
    "tools": ["calculator"],
    "options": {"tool": "calculator", "arguments": {"expression": "{/price} * {/quantity}"}},
}
PUBLISH = {"id": "publish", "role": "linear", "impl": "template", "options": {"output": {"sent": "{/value}"}}}


def flow_dir(tmp_path: Path, *nodes: dict[str, Any]) -> Path:
    chain = [{"id": "in", "role": "start"}, *nodes, {"id": "out", "role": "exit"}]
    flow = {
        "name": "asking",
        "nodes": chain,
        "edges": [[a["id"], b["id"]] for a, b in itertools.pairwise(chain)],
    }
    directory = tmp_path / "flow"
    directory.mkdir(exist_ok=True)
    (directory / "flow.yaml").write_text(yaml.safe_dump(flow, sort_keys=False))
    return directory


def config(tmp_path: Path, rule: dict[str, Any]) -> AeonConfig:
    return AeonConfig(
        state=Choice("sqlite", {"path": str(tmp_path / "state.db")}),
        policies=(Choice("rules", {"ask": [rule]}),),
    ).with_choice("memory", "in_memory")


def test_a_call_that_asks_makes_the_flow_wait_then_runs_once_approved(tmp_path: Path) -> None:
    directory, chosen = flow_dir(tmp_path, TOTAL), config(tmp_path, {"name": "sums", "tool": "calculator"})
    with Engine.from_config_dir(directory, chosen) as flow:
        waiting = flow.run({"price": 2.5, "quantity": 4})
        assert (waiting.status, waiting.run.status) == ("waiting", "waiting")
        request = waiting.run.details["approval"]
        assert (request["tool"], request["arguments"], request["step_id"]) == (
            "calculator",
            {"expression": "2.5 * 4"},
            "t1/total",
        )
        with pytest.raises(ValidationError, match="cannot be edited"):
            flow.resume(waiting.run_id, approval=Approval(arguments={"expression": "1 + 1"}))
        done = flow.resume(waiting.run_id, approval=Approval(by="ann"))
    assert done.status == "success" and done.output == {"expression": "2.5 * 4", "value": 10}
    assert [r["node"] for r in done.history if r["status"] == "success"] == ["in", "total", "out"]


def test_a_stage_that_asks_runs_only_once_approved_and_a_refusal_fails_it(tmp_path: Path) -> None:
    directory = flow_dir(tmp_path, PUBLISH)
    chosen = config(tmp_path, {"name": "a-person-publishes", "node": "publish", "reason": "it goes out"})
    with Engine.from_config_dir(directory, chosen) as flow:
        first = flow.run({"value": "hello"})
        second = flow.run({"value": "bye"})
        assert first.status == second.status == "waiting"
        assert first.run.details["approval"]["message"].startswith("the stage publish of step t1/publish")
        assert first.run.details["approval"]["arguments"] == {"value": "hello"}  # what the stage would get
        approved = flow.resume(first.run_id, approval=Approval())
        refused = flow.resume(second.run_id, approval=Approval.deny("not this one"))
    assert approved.status == "success" and approved.output == {"sent": "hello"}
    assert refused.status == "failure"
    (failed,) = [r for r in refused.history if r["status"] == "failure"]
    assert failed["node"] == "publish" and "not approved (denied): not this one" in failed["error"]


def test_aeon_flow_run_exits_waiting_and_aeon_approve_finishes_it(tmp_path: Path) -> None:
    directory = flow_dir(tmp_path, TOTAL)
    (directory / "aeon.toml").write_text(
        '[state]\nuse = "sqlite"\npath = "state.db"\n[[policy.rules.ask]]\nname = "sums"\ntool = "calculator"\n'
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AEON_DATA_DIR": str(tmp_path / "data")}

    def aeon(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "aeon_cli", *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=directory, env=env)

    waiting = aeon("flow", "run", str(directory), "--input", '{"price": 3, "quantity": 5}', "--json")
    assert waiting.returncode == 4, waiting.stderr
    run_id = json.loads(waiting.stdout)["run_id"]
    assert f"aeon approve {run_id}" in waiting.stderr
    done = aeon("approve", run_id, "--config", str(directory / "aeon.toml"), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"] == {"expression": "3 * 5", "value": 15}


SPLIT = """\
name: both-ways
parallelism: 2
nodes:
  - {id: in, role: start}
  - {id: fork, role: split}
  - {id: sum, role: linear, impl: call_tool, tools: [calculator],
     options: {tool: calculator, arguments: {expression: "{/a} + {/b}"}}}
  - {id: tag, role: linear, impl: template, options: {output: {tagged: "{/a}"}}}
  - {id: join, role: merge, impl: collect}
  - {id: out, role: exit}
edges:
  - [in, fork]
  - [fork, sum]
  - [fork, tag]
  - [sum, join]
  - [tag, join]
  - [join, out]
"""


def test_the_other_stages_of_a_waiting_cycle_are_kept(tmp_path: Path) -> None:
    """Two branches run in one cycle; one's call asks. The other's stage is applied and not run again; the asking
    one runs once approved, and the merge gets both."""
    directory = tmp_path / "flow"
    directory.mkdir()
    (directory / "flow.yaml").write_text(SPLIT)
    with Engine.from_config_dir(directory, config(tmp_path, {"name": "sums", "tool": "calculator"})) as flow:
        waiting = flow.run({"a": 2, "b": 3})
        assert waiting.status == "waiting"
        done = flow.resume(waiting.run_id, approval=Approval())
    assert done.status == "success", done.message
    ran = [r["node"] for r in done.history if r["status"] == "success"]
    assert sorted(ran) == sorted(["in", "fork", "sum", "tag", "join", "out"])  # each stage once
    joined = next(r for r in done.history if r["node"] == "join")
    assert joined["output"] == {"items": [{"expression": "2 + 3", "value": 5}, {"tagged": 2}]}
