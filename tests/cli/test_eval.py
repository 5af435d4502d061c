"""``aeon eval SUITE_DIR`` (spec 004 §10.3): the example suite replayed from its cassettes through the real command
line, JUnit XML for CI, exit statuses that tell a regression (1) from a broken suite (2), outcomes in the artifact
store, flow suites, case selection, recording and stale cassettes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner, Result

from aeon_cli.evaluation import Expect, Outcome, judge, junit_xml
from aeon_cli.main import cli
from tests.plugins.flow.test_engine import EXIT, START, chain, write_flow
from tests.support.builders import answer, llm_step, plan, tool_step

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "eval" / "arithmetic"
CASES = ["sum", "product", "echo", "missing_tool", "divide_by_zero"]


def aeon_eval(*args: str) -> Result:
    return CliRunner().invoke(cli, ["eval", *args])


def copy_example(tmp_path: Path, **changes: dict[str, Any]) -> Path:
    """The example suite in ``tmp_path``, with ``changes`` (case id -> keys) made to its cases."""
    suite_dir = tmp_path / "arithmetic"
    shutil.copytree(EXAMPLE, suite_dir)
    suite = yaml.safe_load((suite_dir / "suite.yaml").read_text(encoding="utf-8"))
    for case in suite["cases"]:
        case.update(changes.get(case["id"], {}))
    (suite_dir / "suite.yaml").write_text(yaml.safe_dump(suite, sort_keys=False), encoding="utf-8")
    return suite_dir


def test_the_example_suite_passes_from_its_cassettes_through_the_real_cli(tmp_path: Path) -> None:
    junit = tmp_path / "out" / "junit.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "aeon_cli", "eval", str(EXAMPLE), "--junit", str(junit)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),  # AEON_DATA_DIR: the conftest's scratch directory
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    # never silent: a line per case as it ends (stderr is not a terminal here: no progress bar)
    for number, case in enumerate(CASES, start=1):
        assert f"✓ [{number}/{len(CASES)}] {case}" in proc.stderr
    assert "5 passed, 0 failed, 0 errors" in proc.stdout
    root = ET.parse(junit).getroot()
    (suite,) = root.findall("testsuite")
    assert (suite.get("name"), suite.get("tests"), suite.get("failures"), suite.get("errors")) == (
        "arithmetic",
        "5",
        "0",
        "0",
    )
    assert [case.get("name") for case in suite.iter("testcase")] == CASES
    assert not suite.findall(".//failure") and not suite.findall(".//error")
    assert all(float(case.get("time", "")) >= 0 for case in suite.iter("testcase"))


def test_json_reports_every_case_replayed_with_its_run(tmp_path: Path) -> None:
    result = aeon_eval(str(EXAMPLE), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["suite"], report["mode"], report["passed"], report["failed"]) == (
        "arithmetic",
        "replay",
        5,
        0,
    )
    assert [case["case"] for case in report["cases"]] == CASES
    for case in report["cases"]:
        assert case["mode"] == "replay" and case["passed"] and case["failures"] == []  # no model was loaded
        assert len(case["run_id"]) == 32
    by_id = {case["case"]: case for case in report["cases"]}
    assert by_id["divide_by_zero"]["got"]["status"] == "failed"  # the expected failure, asserted as such
    assert by_id["echo"]["got"]["answer"] == {"message": "hello world"}


def test_outcomes_are_in_the_artifact_store_under_each_run(tmp_path: Path) -> None:
    report = json.loads(aeon_eval(str(EXAMPLE), "--json", "--case", "sum", "--case", "divide_by_zero").stdout)
    for case in report["cases"]:
        found = CliRunner().invoke(cli, ["artifacts", case["run_id"], "--kind", "evaluation", "--json"])
        assert found.exit_code == 0, found.output
        (artifact,) = json.loads(found.stdout)
        assert (artifact["kind"], artifact["node"], artifact["schema_name"]) == (
            "evaluation",
            case["case"],
            "arithmetic",
        )
        assert artifact["value"]["passed"] is True and artifact["value"]["run_id"] == case["run_id"]
        # beside the run's own artifacts: its answer is there too
        answers = CliRunner().invoke(cli, ["artifacts", case["run_id"], "--kind", "answer", "--json"])
        assert json.loads(answers.stdout)[0]["value"] == case["got"]["answer"]


def test_case_selects_in_the_suite_order_and_an_unknown_case_is_a_setup_error() -> None:
    result = aeon_eval(str(EXAMPLE), "--json", "--case", "echo", "--case", "sum")
    assert [case["case"] for case in json.loads(result.stdout)["cases"]] == ["sum", "echo"]
    unknown = aeon_eval(str(EXAMPLE), "--case", "nope")
    assert unknown.exit_code == 2
    assert "no case 'nope'" in unknown.stderr and "sum, product, echo" in unknown.stderr


def test_a_wrong_expectation_is_a_regression_naming_the_case_and_the_assertion(tmp_path: Path) -> None:
    suite_dir = copy_example(
        tmp_path,
        sum={"expect": {"status": "completed", "answer_contains": "16", "tools": ["echo"]}},
        echo={"expect": {"answer": {"message": "goodbye"}}},
    )
    junit = tmp_path / "junit.xml"
    result = aeon_eval(str(suite_dir), "--junit", str(junit))
    assert result.exit_code == 1, result.output
    assert "✗ [1/5] sum" in result.stderr and "answer_contains: expected '16' in the answer" in result.stderr
    assert "3 passed, 2 failed, 0 errors" in result.stdout
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("failures")) == ("5", "2")
    failures = {
        case.get("name"): case.find("failure")
        for case in suite.iter("testcase")
        if case.find("failure") is not None
    }
    assert set(failures) == {"sum", "echo"}
    sum_failure, echo_failure = failures["sum"], failures["echo"]
    assert sum_failure is not None and echo_failure is not None
    assert sum_failure.get("message") == "answer_contains: expected '16' in the answer, got \"5 + 10 = 15 \""
    assert "tools: expected ['echo'], got ['calculator']" in (sum_failure.text or "")
    assert echo_failure.get("message") == (
        'answer: expected {"message": "goodbye"}, got {"message": "hello world"}'
    )
    report = json.loads(aeon_eval(str(suite_dir), "--json", "--case", "sum").stdout)
    assert report["cases"][0]["failures"] == [
        "answer_contains: expected '16' in the answer, got \"5 + 10 = 15 \"",
        "tools: expected ['echo'], got ['calculator']",
    ]


def test_a_broken_suite_file_is_exit_2_naming_the_file_the_line_and_the_case(tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text(
        "name: broken\n"
        "cases:\n"
        "  - id: first\n"
        "    request: add 1 and 2\n"
        "    expect:\n"
        "      status: done\n"
        "  - id: second\n"
        "    request: add 3 and 4\n"
        "    expect:\n"
        "      answer_contians: '7'\n"
        "  - id: first\n"
        "    input: {a: 1}\n"
        "    expect: {output: 1}\n",
        encoding="utf-8",
    )
    result = aeon_eval(str(tmp_path))
    assert result.exit_code == 2 and "Traceback" not in result.output
    file = tmp_path / "suite.yaml"
    for line in (
        f"{file}:6: cases[0].expect.status (case 'first'): must be one of completed, failed, ttl_expired",
        f"{file}:10: cases[1].expect.answer_contians (case 'second'): unknown key",
        f"{file}:11: cases[2].id (case 'first'): the id 'first' is given to two cases",
        f"{file}:12: cases[2].input (case 'first'): only a flow suite's cases take an input",
        f"{file}:13: cases[2].expect.output (case 'first'): does not apply here",
    ):
        assert line in result.stderr
    (tmp_path / "suite.yaml").write_text("name: [unclosed\n", encoding="utf-8")
    result = aeon_eval(str(tmp_path))
    assert result.exit_code == 2 and f"{file}:2: is not valid YAML" in result.stderr
    assert aeon_eval(str(tmp_path / "nowhere")).exit_code == 2


def test_a_missing_cassette_or_configuration_is_exit_2_before_any_case_runs(tmp_path: Path) -> None:
    suite_dir = copy_example(tmp_path)
    (suite_dir / "cassettes" / "echo.jsonl").unlink()
    result = aeon_eval(str(suite_dir))
    assert result.exit_code == 2
    assert "case 'echo': cassette" in result.stderr and "--record --case echo" in result.stderr
    assert "[1/" not in result.stderr  # nothing ran
    (suite_dir / "aeon.toml").write_text("[run]\nttl = 0\n", encoding="utf-8")
    result = aeon_eval(str(suite_dir), "--case", "sum")
    assert result.exit_code == 2 and "[run] ttl must be a positive integer" in result.stderr


def write_flow_suite(tmp_path: Path) -> Path:
    """A suite over a flow of kernel nodes only (no model): `assign` a label, then `pick` two keys."""
    flow = chain(
        START,
        {"id": "label", "role": "linear", "impl": "assign", "options": {"values": {"label": "ok"}}},
        {"id": "keep", "role": "linear", "impl": "pick", "options": {"keys": ["a", "label"]}},
        EXIT,
    )
    write_flow(tmp_path / "suite" / "flow", flow)
    suite = {
        "name": "labels",
        "flow": "flow",
        "cases": [
            {
                "id": "labelled",
                "input": {"a": 1, "b": 2},
                "expect": {"status": "success", "output": {"a": 1, "label": "ok"}},
            },
            {
                "id": "subset",
                "input": {"a": {"x": 1, "y": 2}},
                "expect": {"output_contains": {"a": {"x": 1}}},
            },
            {"id": "not_an_object", "input": [1, 2], "expect": {"status": "failure"}},
            {
                "id": "wrong",
                "input": {"a": 1},
                "expect": {"output_contains": {"a": 2, "c": 3}, "max_cycles": 1},
            },
        ],
    }
    (tmp_path / "suite" / "suite.yaml").write_text(yaml.safe_dump(suite), encoding="utf-8")
    return tmp_path / "suite"


def test_a_flow_suite_judges_the_task_status_and_output(tmp_path: Path) -> None:
    result = aeon_eval(str(write_flow_suite(tmp_path)), "--json")
    assert result.exit_code == 1, result.output
    by_id = {case["case"]: case for case in json.loads(result.stdout)["cases"]}
    assert [by_id[i]["result"] for i in ("labelled", "subset", "not_an_object", "wrong")] == [
        "passed",
        "passed",
        "passed",
        "failed",
    ]
    assert by_id["labelled"]["got"]["output"] == {"a": 1, "label": "ok"}
    assert by_id["wrong"]["failures"] == [
        "output_contains: at 'a': expected 2, got 1",
        'output_contains: expected key \'c\', missing from {"a": 1, "label": "ok"}',
        f"max_cycles: expected at most 1 cycles, got {by_id['wrong']['got']['cycles']}",
    ]


def test_record_writes_the_cassettes_that_replay_then_serves_and_a_stale_one_is_an_error(
    tmp_path: Path,
) -> None:
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            [plan(tool_step("1", "calculator", {"expression": "5 + 10"}), llm_step("2")), answer("15")]
        )
    )
    suite_dir = tmp_path / "scripted"
    (suite_dir).mkdir()
    (suite_dir / "aeon.toml").write_text(f'[llm]\nuse = "scripted"\nresponses = {json.dumps(str(script))}\n')
    suite: dict[str, Any] = {
        "name": "scripted",
        "cases": [
            {
                "id": "sum",
                "request": "add 5 and 10",
                "cassette": "cassettes/sum.jsonl",
                "expect": {"status": "completed", "answer": "15", "tools": ["calculator"]},
            }
        ],
    }
    (suite_dir / "suite.yaml").write_text(yaml.safe_dump(suite), encoding="utf-8")
    assert aeon_eval(str(suite_dir)).exit_code == 2  # nothing recorded yet
    recorded = aeon_eval(str(suite_dir), "--record", "--json")
    assert recorded.exit_code == 0, recorded.output
    assert json.loads(recorded.stdout)["cases"][0]["mode"] == "record"
    assert sorted(p.name for p in (suite_dir / "cassettes").iterdir()) == [
        "sum.jsonl"
    ]  # no partial file left
    script.write_text("[]")  # the model would now fail: replay never asks it
    replayed = aeon_eval(str(suite_dir), "--json")
    assert replayed.exit_code == 0 and json.loads(replayed.stdout)["cases"][0]["mode"] == "replay"
    live = aeon_eval(str(suite_dir), "--live", "--json")
    assert live.exit_code == 1 and json.loads(live.stdout)["cases"][0]["mode"] == "live"
    suite["cases"][0]["request"] = "add 5 and 11"  # the prompt changed: the cassette no longer answers it
    (suite_dir / "suite.yaml").write_text(yaml.safe_dump(suite), encoding="utf-8")
    stale = aeon_eval(str(suite_dir), "--json")
    assert stale.exit_code == 2
    (case,) = json.loads(stale.stdout)["cases"]
    assert case["result"] == "error" and case["failures"][0].startswith("stale cassette:")
    assert "--record --case sum" in case["failures"][0]


def test_judge_says_what_was_expected_and_what_came() -> None:
    expect = Expect(
        status="completed", answer_contains=["15", "sixteen"], answer_matches=r"^\d+$", max_cycles=2
    )
    got = {"status": "completed", "answer": "5 + 10 = 15", "tools": ["calculator"], "cycles": 3}
    assert judge(expect, got) == [
        "answer_contains: expected 'sixteen' in the answer, got \"5 + 10 = 15\"",
        'answer_matches: expected a match of /^\\d+$/, got "5 + 10 = 15"',
        "max_cycles: expected at most 2 cycles, got 3",
    ]
    assert judge(Expect(answer=None), got) == ['answer: expected null, got "5 + 10 = 15"']
    assert (
        judge(Expect.model_validate({"answer_contains": "hello"}), {"answer": {"message": "hello"}}) == []
    )  # the answer's JSON


def test_junit_xml_holds_any_answer() -> None:
    outcome = Outcome("s", "c", "failed", ("answer: got \x00\ud800 <&>",), 0.5, "r" * 32, "replay")
    root = ET.fromstring(junit_xml("s", [outcome]).encode())
    failure = root.find("testsuite/testcase/failure")
    assert failure is not None and failure.get("message") == "answer: got \ufffd\ufffd <&>"


def test_a_request_case_with_a_schema_asserts_on_fields_of_the_typed_output(tmp_path: Path) -> None:
    replies = [
        plan(tool_step("1", "calculator", {"expression": "12 * 7"}), llm_step("2"), goal="Multiply 12 by 7"),
        answer("84 eggs"),
        {"count": 84, "unit": "eggs"},
    ]
    (tmp_path / "replies.json").write_text(json.dumps(replies), encoding="utf-8")
    (tmp_path / "aeon.toml").write_text(
        f'[llm]\nuse = "scripted"\nresponses = "{tmp_path / "replies.json"}"\n', encoding="utf-8"
    )
    schema = {"type": "object", "properties": {"count": {"type": "integer"}, "unit": {"type": "string"}}}
    request = "A box holds 12 eggs. How many eggs are in 7 boxes?"
    suite = {
        "name": "typed",
        "cases": [
            {
                "id": "count",
                "request": request,
                "schema": schema,
                "expect": {"output_contains": {"count": 84}},
            },
            {
                "id": "whole",
                "request": request,
                "schema": schema,
                "expect": {"output": {"count": 84, "unit": "eggs"}},
            },
            {
                "id": "wrong",
                "request": request,
                "schema": schema,
                "expect": {"output_contains": {"count": 85}},
            },
        ],
    }
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(suite), encoding="utf-8")
    result = aeon_eval(str(tmp_path), "--live", "--json")
    assert result.exit_code == 1, result.output
    by_id = {case["case"]: case for case in json.loads(result.stdout)["cases"]}
    assert [by_id[i]["result"] for i in ("count", "whole", "wrong")] == ["passed", "passed", "failed"]
    assert by_id["wrong"]["failures"] == ["output_contains: at 'count': expected 85, got 84"]

    suite["cases"] = [
        {"id": "bad", "request": request, "schema": {"type": 5}, "expect": {"status": "completed"}}
    ]
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(suite), encoding="utf-8")
    broken = aeon_eval(str(tmp_path), "--live")
    assert (
        broken.exit_code == 2
        and "cases[0].schema (case 'bad'): the output schema is not valid" in broken.stderr
    )
    suite["cases"] = [{"id": "untyped", "request": request, "expect": {"output": 1}}]
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(suite), encoding="utf-8")
    assert "output: give it a schema" in aeon_eval(str(tmp_path), "--live").stderr


def test_a_conversation_case_judges_each_turn_and_replays_from_one_cassette(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    replies = [
        plan(tool_step("1", "calculator", {"expression": "2 + 3"}), llm_step("2")),
        answer("5"),
        plan(tool_step("1", "calculator", {"expression": "5 * 2"}), llm_step("2")),
        answer("10"),
    ]
    script.write_text(json.dumps(replies))
    suite_dir = tmp_path / "conversation"
    suite_dir.mkdir()
    (suite_dir / "aeon.toml").write_text(f'[llm]\nuse = "scripted"\nresponses = {json.dumps(str(script))}\n')
    turns = [
        {"request": "add 2 and 3", "expect": {"answer": "5"}},
        {"request": "now double that", "expect": {"answer": "10", "verification": "verified"}},
    ]
    suite: dict[str, Any] = {
        "name": "conversation",
        "cases": [{"id": "double", "cassette": "double.jsonl", "turns": turns}],
    }
    (suite_dir / "suite.yaml").write_text(yaml.safe_dump(suite), encoding="utf-8")
    recorded = aeon_eval(str(suite_dir), "--record", "--json")
    assert recorded.exit_code == 0, recorded.output
    (case,) = json.loads(recorded.stdout)["cases"]
    assert [turn["answer"] for turn in case["got"]["turns"]] == ["5", "10"]
    script.write_text("[]")
    assert aeon_eval(str(suite_dir)).exit_code == 0  # replayed: the second turn's prompt holds the first turn
    turns[1]["expect"] = {"answer": "11"}
    (suite_dir / "suite.yaml").write_text(yaml.safe_dump(suite), encoding="utf-8")
    failed = aeon_eval(str(suite_dir), "--json")
    assert failed.exit_code == 1
    assert json.loads(failed.stdout)["cases"][0]["failures"] == ['turn 2: answer: expected "11", got "10"']
    suite["cases"][0]["request"] = "add 2 and 3"
    (suite_dir / "suite.yaml").write_text(yaml.safe_dump(suite), encoding="utf-8")
    broken = aeon_eval(str(suite_dir))
    assert broken.exit_code == 2 and "a conversation case says it for each turn" in broken.output
