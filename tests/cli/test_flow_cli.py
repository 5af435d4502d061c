"""``aeon flow validate | graph | run | resume`` (docs/flows.md), in process with click's runner.

Exit status of ``run``: 0 the task ended with success or partial, 1 with failure, 2 the flow could not start (bad
input JSON, bad manifests, bad options), 3 the TTL expired. None of these flows has an agent node, so no model is
loaded: the configured one could not be.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from aeon_cli.main import cli
from tests.support.builders import answer, llm_step, plan

#: every role, two start nodes, a decision, a fork of each kind and a merge
FLOW_YAML = """\
name: every-role
description: a flow with every role
start: intake
nodes:
  - {id: intake, role: start, impl: pick, options: {keys: [text, kind]}}
  - {id: direct, role: start, impl: assign, options: {values: {kind: idea, via: direct}}}
  - {id: tidy, role: linear, impl: assign, options: {values: {lang: en}}}
  - {id: which, role: decision, impl: route_by, options: {key: kind, routes: {bug: try, idea: parts}}}
  - {id: try, role: branch}
  - {id: fix-a, role: linear, impl: assign, options: {values: {fix: a}}}
  - {id: fix.b, role: linear, impl: assign, options: {values: {fix: b}}}
  - {id: parts, role: split}
  - {id: spec, role: linear, impl: assign, options: {values: {part: spec}}}
  - {id: tests, role: linear, impl: assign, options: {values: {part: tests}}}
  - {id: join, role: merge, impl: collect, strategy: collect}
  - {id: done, role: exit}
  - {id: rejected, role: exit, always_fail: true}
edges:
  - [intake, tidy]
  - [direct, done]
  - [tidy, which]
  - [which, try]
  - [which, parts]
  - [try, fix-a]
  - [try, fix.b]
  - [fix-a, done]
  - [fix.b, rejected]
  - [parts, spec]
  - [parts, tests]
  - [spec, join]
  - [tests, join]
  - [join, done]
"""
EDGES = re.findall(r"  - \[(\S+), (\S+)\]", FLOW_YAML)
NODES = re.findall(r"\{id: (\S+),", FLOW_YAML)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The working directory; its aeon.toml names a model that cannot be loaded."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AEON_CONFIG", raising=False)
    (tmp_path / "aeon.toml").write_text('[llm]\nuse = "scripted"\nresponses = "no-such-file.json"\n')
    return tmp_path


def make_flow(root: Path, text: str = FLOW_YAML, files: dict[str, str] | None = None) -> Path:
    directory = root / "flow"
    directory.mkdir()
    (directory / "flow.yaml").write_text(text)
    for path, content in (files or {}).items():
        target = directory / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    return directory


def aeon(*args: str) -> Result:
    result = CliRunner().invoke(cli, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return result


def run_json(*args: str, code: int = 0) -> dict[str, Any]:
    result = aeon("flow", "run", *args, "--json")
    assert result.exit_code == code, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def nodes_of(data: dict[str, Any]) -> list[str]:
    return [f"{stage['task']}/{stage['node']}" for stage in data["history"]]


# --- validate and graph -----------------------------------------------------------------------------------------


def test_validate_a_good_flow(home: Path) -> None:
    flow = make_flow(home)
    result = aeon("flow", "validate", str(flow))
    assert result.exit_code == 0, result.output
    assert f"flow 'every-role': {len(NODES)} nodes, {len(EDGES)} edges: no problems" in result.stdout
    result = aeon("flow", "validate", str(flow), "--json")
    assert result.exit_code == 0 and json.loads(result.stdout) == []


def test_validate_a_bad_flow_exits_1_with_every_problem(home: Path) -> None:
    flow = make_flow(
        home, FLOW_YAML.replace("impl: collect", "impl: gather").replace("[join, done]", "[join, nope]")
    )
    result = aeon("flow", "validate", str(flow), "--json")
    assert result.exit_code == 1
    messages = [problem["message"] for problem in json.loads(result.stdout)]
    assert any("'gather'" in m for m in messages) and any("'nope'" in m for m in messages)
    result = aeon("flow", "validate", str(flow))
    assert result.exit_code == 1 and f"has {len(messages)} problems" in result.stderr


def mermaid_graph(text: str) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """The nodes (Mermaid id -> node id, from the label) and edges (node ids) a Mermaid flowchart draws."""
    assert text.startswith("flowchart TD\n")
    declared = re.findall(r'^    (\w+)\W{1,2}"([^"<]+)<br/>', text, re.M)
    ids = dict(declared)
    assert len(ids) == len(declared), "a Mermaid id is declared twice"
    edges = [(ids[a], ids[b]) for a, b in re.findall(r'^    (\w+) -->(?:\|"[^"]*"\|)? (\w+)$', text, re.M)]
    return ids, edges


def test_graph_mermaid_mentions_every_node_and_edge(home: Path) -> None:
    result = aeon("flow", "graph", str(make_flow(home)), "--format", "mermaid")
    assert result.exit_code == 0, result.output
    ids, edges = mermaid_graph(result.stdout)
    assert sorted(ids.values()) == sorted(NODES)
    assert edges == EDGES
    assert result.stdout.count("-->") == len(EDGES)
    # a decision's edges say what they are taken on (issue 30): the output key naming the next node
    labels = re.findall(r'^    \w+ -->\|"([^"]*)"\| \w+$', result.stdout, re.M)
    assert labels == ["route = try", "route = parts"]
    assert aeon("flow", "graph", str(home / "flow")).stdout == result.stdout  # mermaid is the default


def test_graph_dot_mentions_every_node_and_edge(home: Path) -> None:
    result = aeon("flow", "graph", str(make_flow(home)), "--format", "dot")
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert text.startswith('digraph "every-role" {') and text.rstrip().endswith("}")
    for node in NODES:
        assert re.search(rf'^    "{re.escape(node)}" \[shape=\w+, label=', text, re.M), node
    for source, target in EDGES:
        label = (
            f' [label="route = {target}"]' if source == "which" else ""
        )  # a decision's edges: what they take
        assert f'    "{source}" -> "{target}"{label};\n' in text, (source, target)
    assert text.count("->") == len(EDGES)
    assert 'label="join\\nmerge"' in text


def test_graph_mermaid_keeps_distinct_nodes_distinct(home: Path) -> None:
    text = """\
name: lookalikes
nodes:
  - {id: in, role: start}
  - {id: pick, role: branch}
  - {id: a-b, role: linear}
  - {id: a_b, role: linear}
  - {id: out, role: exit}
edges: [[in, pick], [pick, a-b], [pick, a_b], [a-b, out], [a_b, out]]
"""
    result = aeon("flow", "graph", str(make_flow(home, text)))
    assert result.exit_code == 0, result.output
    ids, edges = mermaid_graph(result.stdout)
    assert sorted(ids.values()) == ["a-b", "a_b", "in", "out", "pick"]
    assert sorted(edges) == sorted(
        [("in", "pick"), ("pick", "a-b"), ("pick", "a_b"), ("a-b", "out"), ("a_b", "out")]
    )


def test_graph_of_a_bad_flow_exits_2(home: Path) -> None:
    result = aeon("flow", "graph", str(home / "nowhere"))
    assert result.exit_code == 2 and "is not a directory" in result.stderr


# --- run: exit codes ------------------------------------------------------------------------------------------


def test_run_success_exits_0_without_loading_a_model(home: Path) -> None:
    flow = make_flow(home)
    data = run_json(str(flow), "--input", json.dumps({"text": "crash", "kind": "idea", "x": 1}))
    assert data["status"] == "success" and data["run_status"] == "completed"
    assert nodes_of(data) == [
        "t1/intake",
        "t1/tidy",
        "t1/which",
        "t1/parts",
        "t1.1/spec",
        "t1.2/tests",
        "t1/join",
        "t1/done",
    ]
    assert data["output"] == {
        "items": [
            {"text": "crash", "kind": "idea", "lang": "en", "route": "parts", "part": "spec"},
            {"text": "crash", "kind": "idea", "lang": "en", "route": "parts", "part": "tests"},
        ]
    }
    assert data["flow"]["name"] == "every-role" and set(data["flow"]["hashes"]) == {"flow.yaml"}
    assert data["history_ref"]["run_id"] == data["run_id"]


def test_run_human_output(home: Path) -> None:
    result = aeon("flow", "run", str(make_flow(home)), "--input", '{"text": "t", "kind": "idea"}')
    assert result.exit_code == 0, result.output
    assert "✓ [1] t1/intake (start) → tidy" in result.stdout
    assert "✓ [4] t1/parts (split) → spec, tests" in result.stdout
    assert "success: the task ended with success at exit 'done'" in result.stdout
    assert re.search(r"^run [0-9a-f]{32}$", result.stdout, re.M)


def test_run_partial_exits_0(home: Path) -> None:
    """A failing node with continue_on_failure: the task goes on, partial (docs/flows.md "Stages and statuses")."""
    text = """\
name: partial
nodes:
  - {id: in, role: start}
  - {id: strict, role: linear, output_schema: needs_id, continue_on_failure: true}
  - {id: out, role: exit}
edges: [[in, strict], [strict, out]]
"""
    schema = json.dumps({"type": "object", "required": ["id"]})
    data = run_json(str(make_flow(home, text, {"schemas/needs_id.json": schema})), "--input", "{}")
    assert data["status"] == "partial" and data["output"] == {}
    strict = data["history"][1]
    assert strict["status"] == "failure" and "does not match schema 'needs_id'" in strict["error"]
    assert strict["task_status"] == "partial"


def test_run_failure_exits_1(home: Path) -> None:
    flow = make_flow(home)
    # a bug goes to the branch: fix.b's clone reaches the always_fail exit, fix-a's the good one (it wins)
    data = run_json(str(flow), "--input", '{"text": "t", "kind": "bug"}')
    assert data["status"] == "success"
    assert {t["id"]: t["status"] for t in data["tasks"]} == {
        "t1": "success",
        "t1.1": "success",
        "t1.2": "failure",
    }
    # a kind no route names: the decision fails, and so does the task
    data = run_json(str(flow), "--input", '{"text": "t", "kind": "other"}', code=1)
    assert data["status"] == "failure" and data["run_status"] == "failed"
    assert "decision 'which' chose None" in data["history"][-1]["error"]
    assert "failure at node 'which'" in data["message"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--input", "{not json"], "the input is not JSON"),
        (["--input", "NaN"], "the flow's input must be JSON"),
        ([], "exactly one of --input JSON and --input-file FILE"),
        (["--input", "{}", "--input-file", "aeon.toml"], "exactly one of"),
        (["--input", "{}", "--start", "tidy"], "'tidy' is not a start node"),
    ],
)
def test_run_that_cannot_start_exits_2(home: Path, args: list[str], said: str) -> None:
    result = aeon("flow", "run", str(make_flow(home)), *args)
    assert result.exit_code == 2, result.output
    assert said in result.stderr


def test_run_of_a_bad_flow_exits_2(home: Path) -> None:
    flow = make_flow(home, FLOW_YAML.replace("[tidy, which]", "[tidy, nowhere]"))
    result = aeon("flow", "run", str(flow), "--input", "{}")
    assert result.exit_code == 2
    assert "to names no node: 'nowhere'" in result.stderr and result.stdout == ""


def test_run_ttl_expired_exits_3(home: Path) -> None:
    data = run_json(str(make_flow(home)), "--input", '{"text": "t", "kind": "idea"}', "--ttl", "1", code=3)
    assert data["run_status"] == "ttl_expired"
    assert nodes_of(data) == ["t1/intake"]
    assert "TTL expired" in data["message"]


def test_run_with_input_file_and_start(home: Path) -> None:
    flow = make_flow(home)
    (home / "input.json").write_text(json.dumps({"text": "from a file", "kind": "bug"}))
    data = run_json(str(flow), "--input-file", "input.json")
    assert data["history"][0]["input"] == {"text": "from a file", "kind": "bug"}
    data = run_json(str(flow), "--input-file", "input.json", "--start", "direct")
    assert nodes_of(data) == ["t1/direct", "t1/done"]
    assert data["output"] == {"text": "from a file", "kind": "idea", "via": "direct"}
    assert data["status"] == "success"
    result = aeon("flow", "run", str(flow), "--input-file", "missing.json")
    assert result.exit_code == 2 and "missing.json" in result.output


def test_an_input_nested_too_deeply_is_a_clear_error(home: Path) -> None:
    """100,000 nested arrays in --input or --input-file: a usage error (exit 2), not a RecursionError traceback."""
    flow, deep = make_flow(home), "[" * 100_000 + "]" * 100_000
    (home / "deep.json").write_text(deep)
    for given in (("--input", deep), ("--input-file", "deep.json")):
        result = aeon("flow", "run", str(flow), *given)
        assert result.exit_code == 2 and "nests too deeply" in result.output, result.output


def test_run_log_writes_the_stage_records(home: Path) -> None:
    flow = make_flow(home)
    data = run_json(str(flow), "--input", '{"text": "t", "kind": "idea"}', "--log", "run.jsonl")
    lines = [json.loads(line) for line in (home / "run.jsonl").read_text().splitlines()]
    manifest, *cycles = lines
    assert manifest["manifest"]["run_id"] == data["run_id"]
    assert manifest["manifest"]["flow"]["name"] == "every-role"
    assert all("stages" in cycle for cycle in cycles)
    logged = [stage for cycle in cycles for stage in cycle["stages"]]
    assert logged == data["history"]
    assert [cycle["step_number"] for cycle in cycles] == list(range(1, len(cycles) + 1))


def test_flow_aeon_toml_is_used(home: Path) -> None:
    """DIR/aeon.toml is the flow's configuration: here, its state store."""
    flow = make_flow(home, files={"aeon.toml": '[state]\nuse = "sqlite"\npath = "flow-state.db"\n'})
    data = run_json(str(flow), "--input", '{"text": "t", "kind": "idea"}')
    assert data["history_ref"]["state_store"] == "flow-state.db" and (home / "flow-state.db").exists()


# --- resume ---------------------------------------------------------------------------------------------------


def test_resume_of_a_plain_run_says_it_is_not_a_flow_run(home: Path) -> None:
    (home / "responses.json").write_text(json.dumps([plan(llm_step("1")), answer("done")]))
    (home / "aeon.toml").write_text(
        '[llm]\nuse = "scripted"\nresponses = "responses.json"\n[state]\nuse = "sqlite"\npath = "state.db"\n'
    )
    plain = aeon("run", "say done", "--json")
    assert plain.exit_code == 0, plain.output
    run_id = json.loads(plain.stdout)["run_id"]
    result = aeon("flow", "resume", run_id)
    assert result.exit_code == 2
    assert f"run {run_id!r} is not a flow run; resume it with `aeon resume {run_id}`" in result.stderr


def test_resume_errors(home: Path) -> None:
    result = aeon("flow", "resume", "abc", "--no-log")
    assert result.exit_code == 2 and "needs a state store" in result.stderr
    result = aeon("flow", "resume", "abc")  # the data directory's store, where runs are recorded by default
    assert result.exit_code == 2 and "no run 'abc' in" in result.stderr and "aeon-data" in result.stderr
    (home / "aeon.toml").write_text('[state]\nuse = "sqlite"\npath = "state.db"\n')
    result = aeon("flow", "resume", "abc")
    assert result.exit_code == 2 and "no run 'abc'" in result.stderr
    flow = make_flow(home)
    data = run_json(str(flow), "--input", '{"text": "t", "kind": "idea"}', "--config", "aeon.toml")
    result = aeon("flow", "resume", data["run_id"])
    assert result.exit_code == 2 and "already finished" in result.stderr


def test_a_ttl_expired_flow_run_says_how_to_finish_and_does_it(home: Path) -> None:
    """A TTL-expired run says both ways on (issue 27): resumed with more cycles (`--ttl N`; without it the store
    refuses, saying so), or run again with a larger TTL; both work."""
    (home / "aeon.toml").write_text('[state]\nuse = "sqlite"\npath = "state.db"\n')
    text = FLOW_YAML.replace("start: intake\n", "start: intake\nttl: 2\n")
    flow = make_flow(home, text)
    expired = run_json(str(flow), "--input", '{"text": "t", "kind": "idea"}', code=3)
    assert "--ttl" in expired["message"] and "aeon flow resume RUN_ID --ttl N" in expired["message"]
    refused = aeon("flow", "resume", expired["run_id"], "--json")
    assert refused.exit_code == 2 and "--ttl" in refused.stderr
    continued = aeon("flow", "resume", expired["run_id"], "--ttl", "20", "--json")
    assert continued.exit_code == 0 and json.loads(continued.stdout)["status"] == "success"
    again = run_json(str(flow), "--input", '{"text": "t", "kind": "idea"}', "--ttl", "20", code=0)
    assert again["status"] == "success"


def test_validate_reports_options_the_implementation_refuses(home: Path) -> None:
    flow = make_flow(
        home, FLOW_YAML.replace("options: {keys: [text, kind]}", "options: {keys: [text], colour: 1}")
    )
    assert aeon("flow", "run", str(flow), "--input", "{}").exit_code == 2
    result = aeon("flow", "validate", str(flow), "--json")
    assert result.exit_code == 1, result.output
    assert "colour" in result.stdout


def test_a_flow_run_is_recorded_by_default_and_not_with_no_log(home: Path, data_directory: Path) -> None:
    """Like ``aeon run`` (FR-037): state store and log in the user data directory, said at the end; --no-log
    keeps nothing."""
    flow = make_flow(home)
    kept = run_json(str(flow), "--input", '{"text": "t", "kind": "idea"}')
    listed = [run["run_id"] for run in json.loads(aeon("runs", "--json").stdout)]
    assert listed == [kept["run_id"]]
    assert kept["run_id"] in (data_directory / "runs.jsonl").read_text(encoding="utf-8")
    quiet = run_json(str(flow), "--input", '{"text": "t", "kind": "idea"}', "--no-log")
    assert [run["run_id"] for run in json.loads(aeon("runs", "--json").stdout)] == [kept["run_id"]]
    assert quiet["run_id"] not in (data_directory / "runs.jsonl").read_text(encoding="utf-8")
