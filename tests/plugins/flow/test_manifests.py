"""Bad flow manifests (docs/flows.md "Load-time checks"): every problem a :class:`FlowError` naming its file, line,
key and node — all of them at once — and ``aeon flow validate DIR`` exiting 1 with the same list, never a
traceback. Hostile files (huge, deeply nested, billion laughs, not UTF-8) are refused quickly.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from aeon_cli.main import cli
from aeon_kernel import Engine
from aeon_plugins.flow.loader import FlowError
from aeon_plugins.flow.yamlfile import Problem

GOOD = """\
name: good
nodes:
  - {id: in, role: start, impl: pick, options: {keys: [text]}}
  - {id: mid, role: linear}
  - {id: out, role: exit}
edges:
  - [in, mid]
  - [mid, out]
"""


@pytest.fixture(autouse=True)
def _no_ambient_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AEON_CONFIG", raising=False)


def make(root: Path, files: dict[str, str | bytes], name: str = "flow") -> Path:
    directory = root / name
    directory.mkdir()
    for path, content in files.items():
        target = directory / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    return directory


def line_of(text: str, fragment: str) -> int:
    """The 1-based line of the only line of ``text`` containing ``fragment``."""
    found = [i for i, line in enumerate(text.splitlines(), start=1) if fragment in line]
    assert len(found) == 1, (fragment, found)
    return found[0]


def load_problems(directory: Path) -> list[Problem]:
    """The problems ``Engine.from_config_dir`` reports (it must raise FlowError, before building anything)."""
    with pytest.raises(FlowError) as caught:
        Engine.from_config_dir(directory)
    error = caught.value
    assert error.problems, "a FlowError lists its problems"
    text = str(error)
    for problem in error.problems:
        assert str(problem) in text
    assert f"has {len(error.problems)} problem" in text
    return error.problems


def validate(directory: Path, *options: str) -> Any:
    result = CliRunner().invoke(cli, ["flow", "validate", str(directory), *options])
    assert isinstance(result.exception, SystemExit) or result.exception is None, result.exception
    assert "Traceback" not in result.output
    return result


def check(directory: Path) -> list[dict[str, Any]]:
    """Load errors and ``aeon flow validate`` agree: exit 1, the same problems in text and in ``--json``."""
    problems = load_problems(directory)
    as_json = validate(directory, "--json")
    assert as_json.exit_code == 1, as_json.output
    listed: list[dict[str, Any]] = json.loads(as_json.stdout)
    assert listed == [problem.to_dict() for problem in problems]
    as_text = validate(directory)
    assert as_text.exit_code == 1
    for problem in problems:
        assert str(problem) in as_text.stderr
    assert as_text.stdout == ""
    return listed


def only(listed: list[dict[str, Any]]) -> dict[str, Any]:
    assert len(listed) == 1, listed
    return listed[0]


# --- files that cannot be read ----------------------------------------------------------------------------------


def test_a_good_flow_validates(tmp_path: Path) -> None:
    directory = make(tmp_path, {"flow.yaml": GOOD})
    assert validate(directory, "--json").stdout.strip() == "[]"
    result = validate(directory)
    assert result.exit_code == 0 and "no problems" in result.stdout
    with Engine.from_config_dir(directory) as flow:
        assert flow.flow.name == "good"


def test_missing_directory(tmp_path: Path) -> None:
    problem = only(check(tmp_path / "nowhere"))
    assert problem["file"].endswith("nowhere") and "is not a directory" in problem["message"]


def test_missing_flow_yaml(tmp_path: Path) -> None:
    directory = make(tmp_path, {"context.yaml": "profiles: {}\n"})
    assert only(check(directory)) == {
        "file": "flow.yaml",
        "line": None,
        "key": None,
        "node": None,
        "message": "does not exist",
    }


def test_empty_flow_yaml(tmp_path: Path) -> None:
    problem = only(check(make(tmp_path, {"flow.yaml": "# nothing\n"})))
    assert problem["file"] == "flow.yaml" and problem["message"] == "is empty"


@pytest.mark.parametrize("text", ["- a\n- b\n", "just words\n"])
def test_flow_yaml_that_is_not_a_mapping(tmp_path: Path, text: str) -> None:
    problem = only(check(make(tmp_path, {"flow.yaml": text})))
    assert problem["file"] == "flow.yaml" and problem["line"] == 1
    assert "dictionary" in problem["message"]


def test_invalid_yaml_names_the_line(tmp_path: Path) -> None:
    text = "name: bad\nnodes:\n  - {id: in, role: start\n  - {id: out, role: exit}\n"
    problem = only(check(make(tmp_path, {"flow.yaml": text})))
    assert problem["file"] == "flow.yaml" and "is not valid YAML" in problem["message"]
    assert problem["line"] == 4  # where the parser found the unclosed mapping's end missing
    problem = only(check(make(tmp_path, {"flow.yaml": "name: [unclosed\n"}, name="eof")))
    assert "is not valid YAML" in problem["message"] and problem["line"] == 2


def test_a_ten_megabyte_flow_yaml_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    directory = make(tmp_path, {"flow.yaml": "name: big\n" + "# padding\n" * 1_000_000})
    began = time.perf_counter()
    problem = only(check(directory))
    assert time.perf_counter() - began < 30  # about 1 s; expanding it would take minutes
    assert problem["file"] == "flow.yaml"
    assert "10,000,010 bytes" in problem["message"] and "1,000,000" in problem["message"]


def test_ten_thousand_levels_of_nesting(tmp_path: Path) -> None:
    directory = make(tmp_path, {"flow.yaml": "name: deep\nnodes: " + "[" * 10_000 + "]" * 10_000 + "\n"})
    result = validate(directory, "--json")  # one parse only: it is the slowest case
    assert result.exit_code == 1, result.output
    problem = only(json.loads(result.stdout))
    assert problem["file"] == "flow.yaml" and "nested" in problem["message"]


def test_nesting_deeper_than_the_limit_names_where(tmp_path: Path) -> None:
    directory = make(tmp_path, {"flow.yaml": "name: deep\nnodes: " + "[" * 100 + "]" * 100 + "\n"})
    problem = only(check(directory))
    assert "nested deeper than 64 levels" in problem["message"] and problem["key"].startswith("nodes[0][0]")
    assert problem["line"] == 2


def test_billion_laughs_is_refused(tmp_path: Path) -> None:
    text = 'name: lol\na: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    for this, previous in zip("bcdefghi", "abcdefgh", strict=True):
        text += f"{this}: &{this} [{','.join([f'*{previous}'] * 9)}]\n"
    began = time.perf_counter()
    problem = only(check(make(tmp_path, {"flow.yaml": text})))
    assert time.perf_counter() - began < 30  # about 1 s; expanding it would take minutes
    assert problem["file"] == "flow.yaml" and "aliases expanded" in problem["message"]


def test_non_utf8_bytes(tmp_path: Path) -> None:
    directory = make(tmp_path, {"flow.yaml": b"name: caf\xe9\nnodes: []\n"})
    problem = only(check(directory))
    assert problem["file"] == "flow.yaml" and "is not UTF-8" in problem["message"]
    assert "byte 9" in problem["message"]


def test_python_tags_build_no_objects(tmp_path: Path) -> None:
    text = GOOD.replace("name: good", "name: !!python/name:os.system")
    problem = only(check(make(tmp_path, {"flow.yaml": text})))
    assert "is not valid YAML" in problem["message"] and problem["line"] == 1
    text = GOOD.replace("name: good", "name: !!python/object/apply:os.system ['touch pwned']")
    problem = only(check(make(tmp_path, {"flow.yaml": text}, name="apply")))
    assert problem["key"] == "name" and problem["line"] == 1  # a list, not a call: never run
    assert not (tmp_path / "pwned").exists()


# --- shape: types and keys --------------------------------------------------------------------------------------


def test_wrong_types_are_all_listed_at_their_lines(tmp_path: Path) -> None:
    text = """\
name: typed
parallelism: many
ttl: 0
nodes:
  - {id: in, role: start}
  - {id: a, role: linear, continue_on_failure: sometimes}
  - {id: c, role: sideways}
  - {id: out, role: exit, tools: 5}
edges:
  - [in, a]
  - [a, out, c]
"""
    listed = check(make(tmp_path, {"flow.yaml": text}))
    by_key = {problem["key"]: problem for problem in listed}
    assert set(by_key) == {
        "parallelism",
        "ttl",
        "nodes[1].continue_on_failure",
        "nodes[2].role",
        "nodes[3].tools",
        "edges[1]",
    }
    expected_lines = {
        "parallelism": line_of(text, "parallelism"),
        "ttl": line_of(text, "ttl"),
        "nodes[1].continue_on_failure": line_of(text, "sometimes"),
        "nodes[2].role": line_of(text, "sideways"),
        "nodes[3].tools": line_of(text, "tools: 5"),
        "edges[1]": line_of(text, "[a, out, c]"),
    }
    assert {key: problem["line"] for key, problem in by_key.items()} == expected_lines
    assert by_key["nodes[2].role"]["node"] == "c" and "'linear'" in by_key["nodes[2].role"]["message"]
    assert by_key["nodes[3].tools"]["node"] == "out"
    assert "got 3 items" in by_key["edges[1]"]["message"]


def test_unknown_keys_name_the_key_the_node_and_the_line(tmp_path: Path) -> None:
    text = GOOD.replace("name: good\n", "name: good\ncolour: blue\n").replace(
        "  - {id: mid, role: linear}\n", "  - id: mid\n    role: linear\n    retries: 3\n"
    )
    directory = make(
        tmp_path, {"flow.yaml": text, "context.yaml": "profiles:\n  p: {layers: [task], size: 3}\n"}
    )
    listed = check(directory)
    assert {(p["file"], p["key"], p["node"], p["line"]) for p in listed} == {
        ("flow.yaml", "colour", None, line_of(text, "colour")),
        ("flow.yaml", "nodes[1].retries", "mid", line_of(text, "retries")),
        ("context.yaml", "profiles.p.size", None, 2),
    }
    assert all("is not a known key" in p["message"] for p in listed)


def test_duplicate_keys_are_refused(tmp_path: Path) -> None:
    text = GOOD + "name: again\n"
    problem = only(check(make(tmp_path, {"flow.yaml": text})))
    assert (
        problem["file"] == "flow.yaml" and "appears twice" in problem["message"] and problem["key"] == "name"
    )
    assert problem["line"] == line_of(text, "again")


def test_duplicate_keys_fill_the_line_field(tmp_path: Path) -> None:
    text = GOOD.replace("  - {id: mid, role: linear}", "  - {id: mid, role: linear, id: twice}")
    problem = only(check(make(tmp_path, {"flow.yaml": text})))
    assert problem["line"] == line_of(text, "twice")


# --- references and the graph ----------------------------------------------------------------------------------


def test_unknown_names_are_each_reported_at_their_key(tmp_path: Path) -> None:
    text = """\
name: names
nodes:
  - {id: in, role: start}
  - id: mid
    role: linear
    impl: no.such.impl
    output_schema: nothing
    context: {profile: nobody}
  - {id: out, role: exit}
edges: [[in, mid], [mid, out]]
"""
    listed = check(make(tmp_path, {"flow.yaml": text}))
    assert len(listed) == 3, listed
    by_key = {p["key"]: p for p in listed}
    assert by_key["nodes[1].impl"]["line"] == line_of(text, "no.such.impl")
    assert "no plugin registered" in by_key["nodes[1].impl"]["message"]
    assert "'pick'" in by_key["nodes[1].impl"]["message"]  # the names one could use
    assert by_key["nodes[1].output_schema"]["line"] == line_of(text, "nothing")
    assert by_key["nodes[1].context"]["line"] == line_of(text, "nobody")
    assert all(p["node"] == "mid" and p["file"] == "flow.yaml" for p in listed)


def test_an_unknown_tool(tmp_path: Path) -> None:
    text = GOOD.replace("{id: mid, role: linear}", "{id: mid, role: linear, tools: [hammer]}")
    directory = make(tmp_path, {"flow.yaml": text})
    # the engine checks tools once they are built (step 6), so its problem has no line; validate's has one
    loaded = only([p.to_dict() for p in load_problems(directory)])
    assert loaded["node"] == "mid" and "names tool 'hammer', which is not enabled" in loaded["message"]
    result = validate(directory, "--json")
    assert result.exit_code == 1
    validated = only(json.loads(result.stdout))
    assert validated["message"] == loaded["message"] and validated["node"] == "mid"
    assert validated["line"] == line_of(text, "hammer") and validated["key"] == "nodes[1].tools"


def test_three_independent_problems_in_one_file_are_all_listed(tmp_path: Path) -> None:
    text = """\
name: three
nodes:
  - {id: in, role: start, output_schema: missing}
  - {id: mid, role: linear, route_key: next}
  - {id: out, role: exit}
edges:
  - [in, mid]
  - [mid, out]
  - [mid, nowhere]
"""
    directory = make(tmp_path, {"flow.yaml": text})
    listed = check(directory)
    messages = [p["message"] for p in listed]
    assert len(listed) == 3, messages
    assert any("names schema 'missing'" in m for m in messages)
    assert any("only decision nodes take route_key" in m for m in messages)
    assert any("to names no node: 'nowhere'" in m for m in messages)
    result = validate(directory)
    assert "has 3 problems" in result.stderr
    assert result.stderr.count("\n  - ") == 3


def test_a_cycle_is_printed(tmp_path: Path) -> None:
    text = """\
name: loop
nodes:
  - {id: in, role: start}
  - {id: a, role: linear}
  - {id: b, role: linear}
  - {id: c, role: decision}
  - {id: out, role: exit}
edges:
  - [in, a]
  - [a, b]
  - {from: b, to: c}
  - [c, a]
  - [c, out]
"""
    listed = check(make(tmp_path, {"flow.yaml": text}))
    cycle = [p for p in listed if "cycle" in p["message"]]
    assert len(cycle) == 1, listed
    assert "a -> b -> c -> a" in cycle[0]["message"]
    assert cycle[0]["node"] == "a" and cycle[0]["line"] == line_of(text, "{id: a,")
    result = validate(tmp_path / "flow")
    assert "a -> b -> c -> a" in result.stderr


def test_graph_rules(tmp_path: Path) -> None:
    text = """\
name: rules
nodes:
  - {id: in, role: start, kind: agent, instruction: go}
  - {id: think, role: linear, kind: agent}
  - {id: in, role: linear}
  - {id: lonely, role: linear}
  - {id: out, role: exit, impl: pick, always_fail: true}
edges:
  - [in, think]
  - [think, out]
  - [think, out]
  - [out, out]
"""
    listed = check(make(tmp_path, {"flow.yaml": text}))
    text_of = "\n".join(f"{p['key']} {p['node']} {p['message']}" for p in listed)
    for expected in (
        "nodes[2].id in is used by two nodes",
        "nodes[0].kind in start nodes are deterministic",
        "nodes[1].instruction think an agent node needs an instruction",
        "nodes[4].impl out exit nodes are read-only",
        "edges[2] think is declared twice",
        "edges[3] out loops from 'out' to itself",
        "nodes[3] lonely cannot be reached from any start node",
    ):
        assert expected in text_of, (expected, text_of)


def test_bad_schema_files(tmp_path: Path) -> None:
    directory = make(
        tmp_path,
        {
            "flow.yaml": GOOD,
            "schemas/nonsense.json": json.dumps({"type": "nonsense"}),
            "schemas/torn.json": '{"type": ',
            "schemas/list.json": "[1, 2]",
            "schemas/fine.yaml": "type: object\n",
        },
    )
    listed = check(directory)
    assert [(p["file"], p["message"].split(":")[0]) for p in listed] == [
        ("schemas/list.json", "must hold a JSON Schema object"),
        ("schemas/nonsense.json", "is not a valid JSON Schema"),
        ("schemas/torn.json", "is not valid JSON"),
    ]


def test_a_node_naming_an_invalid_schema_is_not_told_the_file_is_missing(tmp_path: Path) -> None:
    text = GOOD.replace("{id: mid, role: linear}", "{id: mid, role: linear, output_schema: nonsense}")
    directory = make(tmp_path, {"flow.yaml": text, "schemas/nonsense.json": json.dumps({"type": "nonsense"})})
    listed = check(directory)
    assert not any("there is no schemas/nonsense.json" in p["message"] for p in listed), listed


def test_context_and_memory_files(tmp_path: Path) -> None:
    text = GOOD.replace("{id: mid, role: linear}", "{id: mid, role: linear, context: {profile: p}}")
    directory = make(
        tmp_path,
        {
            "flow.yaml": text,
            "context.yaml": "profiles:\n  p: {policy: psychic, layers: [task]}\n",
            "memory.yaml": "layers:\n  task: {use: floppy}\n",
        },
    )
    listed = check(directory)
    assert len(listed) == 2, listed
    memory = next(p for p in listed if p["file"] == "memory.yaml")
    context = next(p for p in listed if p["file"] == "context.yaml")
    assert "'floppy'" in memory["message"] and "'sqlite'" in memory["message"]
    assert "'psychic'" in context["message"] and "'recency'" in context["message"]
    layers = make(tmp_path, {"flow.yaml": GOOD, "memory.yaml": "layers:\n  attic: {use: sqlite}\n"}, "attic")
    problem = only(check(layers))
    assert problem["file"] == "memory.yaml" and problem["line"] == 2 and "'task'" in problem["message"]


def test_context_and_memory_problems_have_lines(tmp_path: Path) -> None:
    directory = make(
        tmp_path,
        {
            "flow.yaml": GOOD,
            "context.yaml": "profiles:\n  p: {policy: psychic}\n",
            "memory.yaml": "layers:\n  task: {use: floppy}\n",
        },
    )
    listed = check(directory)
    assert {(p["file"], p["line"], p["key"]) for p in listed} == {
        ("context.yaml", 2, "profiles.p.policy"),
        ("memory.yaml", 2, "layers.task.use"),
    }


def test_shape_problems_do_not_hide_graph_problems(tmp_path: Path) -> None:
    text = """\
name: mixed
nodes:
  - {id: in, role: start, colour: red}
  - {id: a, role: linear, impl: no.such.impl}
  - {id: b, role: linear}
  - {id: out, role: exit}
edges: [[in, a], [a, b], [b, a], [b, out]]
"""
    messages = [p["message"] for p in check(make(tmp_path, {"flow.yaml": text}))]
    assert any("is not a known key" in m for m in messages)
    assert any("no plugin registered" in m for m in messages)
    assert any("a -> b -> a" in m for m in messages)


def test_options_a_node_implementation_refuses(tmp_path: Path) -> None:
    text = GOOD.replace("options: {keys: [text]}", "options: {keys: [text], colour: red}")
    with pytest.raises(FlowError) as caught:
        Engine.from_config_dir(make(tmp_path, {"flow.yaml": text}))
    problem = only([p.to_dict() for p in caught.value.problems])
    assert problem["node"] == "in" and problem["key"] == "nodes[0].options"
    assert "cannot take the options" in problem["message"] and "colour" in problem["message"]


# --- a flow.yaml that never ends ----------------------------------------------------------------------------------


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_a_flow_yaml_linked_to_dev_zero_is_refused(tmp_path: Path) -> None:
    directory = tmp_path / "zero"
    directory.mkdir()
    (directory / "flow.yaml").symlink_to("/dev/zero")
    script = (
        "import sys\n"
        "from aeon_plugins.flow.loader import FlowError, load_flow\n"
        "try:\n"
        f"    load_flow({str(directory)!r})\n"
        "except FlowError as exc:\n"
        "    print(exc)\n"
    )

    def limit() -> None:  # 400 MB of address space: the child fails fast instead of eating the machine
        resource.setrlimit(resource.RLIMIT_AS, (400_000_000, 400_000_000))

    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=30,
        preexec_fn=limit,  # only a resource limit, set before exec
    )
    assert proc.returncode == 0 and "flow.yaml" in proc.stdout, proc.stderr[-500:]


def test_refused_options_point_to_flow_yaml(tmp_path: Path) -> None:
    text = GOOD.replace("options: {keys: [text]}", "options: {keys: [text], colour: red}")
    with pytest.raises(FlowError) as caught:
        Engine.from_config_dir(make(tmp_path, {"flow.yaml": text}))
    problem = only([p.to_dict() for p in caught.value.problems])
    assert "aeon.toml" not in problem["message"]
    assert problem["line"] == line_of(text, "colour")


# --- one typo, one problem, at its line (issue 30 item 7) -------------------------------------------------------

TRIAGE = Path(__file__).resolve().parents[3] / "examples" / "flows" / "ticket-triage"

TYPOS = {
    # what is misspelt: (the text, the typo, the line's fragment, the key, what the message says)
    "a node's id": ("id: classify", "id: classfy", "id: classfy", "nodes[1].id", "name 'classify'"),
    "a role": (
        "id: facts\n    role: linear",
        "id: facts\n    role: lineer",
        "lineer",
        "nodes[3].role",
        "'linear'?",
    ),
    "an edge's target": ("[facts, join]", "[facts, jion]", "[facts, jion]", "edges[5]", "'join'?"),
    "an edge's source": ("[billing, facts]", "[biling, facts]", "[biling, facts]", "edges[3]", "'billing'?"),
    "a node's key": ("id: facts\n    role:", "id: facts\n    rol:", "rol:", "nodes[3].rol", "'role'?"),
    "the id key": ("  - id: facts\n", "  - ib: facts\n", "ib: facts", "nodes[3].ib", "'id'?"),
    "the start": ("start: intake", "start: intak", "start: intak", "start", "'intake'?"),
}


@pytest.mark.parametrize("what", sorted(TYPOS))
def test_one_typo_is_one_problem_at_its_line(tmp_path: Path, what: str) -> None:
    """Before, a misspelt node id gave 18 problems (edges naming no node, degrees, reachability), and a malformed
    node shifted the lines of the problems after it."""
    text, typo, fragment, key, hint = TYPOS[what]
    files = {
        path.relative_to(TRIAGE).as_posix(): path.read_text() for path in TRIAGE.rglob("*") if path.is_file()
    }
    assert text in files["flow.yaml"]
    files["flow.yaml"] = files["flow.yaml"].replace(text, typo, 1)
    problem = only(check(make(tmp_path, files)))
    assert problem["key"] == key and problem["line"] == line_of(files["flow.yaml"], fragment), problem
    assert "did you mean" in problem["message"] or "misspelt" in problem["message"]
    assert hint in problem["message"], problem


def test_problems_after_a_malformed_node_keep_their_lines(tmp_path: Path) -> None:
    text = """\
name: shifted
nodes:
  - {id: in, role: start}
  - {id: broken, role: linear, colour: red}
  - {id: fork, role: split}
  - {id: a, role: linear}
  - {id: out, role: exit}
edges: [[in, broken], [broken, fork], [fork, a], [a, out], [fork, out], [in, out]]
"""
    listed = check(make(tmp_path, {"flow.yaml": text}))
    by_key = {p["key"]: p for p in listed}
    assert set(by_key) == {"nodes[1].colour", "nodes[0].role"}, listed
    assert (
        by_key["nodes[0].role"]["line"] == line_of(text, "{id: in,")
        and by_key["nodes[0].role"]["node"] == "in"
    )


def test_the_flows_docs_yaml_examples_parse_and_their_flows_load(tmp_path: Path) -> None:
    """Every ```yaml block of docs/flows.md is YAML; each that is a whole flow's nodes and edges loads."""
    import re

    import yaml

    from aeon_plugins.flow.loader import load_flow

    docs = Path(__file__).resolve().parents[3] / "docs" / "flows.md"
    blocks = re.findall(r"```yaml\n(.*?)```", docs.read_text(encoding="utf-8"), re.DOTALL)
    flows = 0
    for i, block in enumerate(blocks):
        value = yaml.safe_load(block)
        if isinstance(value, dict) and {"nodes", "edges"} <= set(value) and "name" not in value:
            directory = tmp_path / f"doc{i}"
            (directory / "schemas").mkdir(parents=True)
            for name in re.findall(r"_schema: (\w+)", block):
                (directory / "schemas" / f"{name}.json").write_text('{"type": "object"}')
            (directory / "flow.yaml").write_text(f"name: doc{i}\n{block}")
            load_flow(directory)
            flows += 1
    assert flows >= 2, "the Maps and Loops examples are whole flows"
