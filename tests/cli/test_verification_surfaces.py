"""The verdict where users look (issue 26 item 1, decision 0018): `aeon run`, `aeon eval`, `aeon batch`, the
inspector's run page, the OTel run span. Real commands and servers on the scripted model."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from aeon_cli.inspect.server import serving
from aeon_cli.inspect.sources import Catalog, SqliteRuns
from aeon_cli.main import cli
from aeon_kernel import Engine
from aeon_kernel.config import AeonConfig
from tests.cli.test_inspect import fetch
from tests.plugins.test_otel_sink import engine_for, finished
from tests.support.builders import answer, llm_step, plan, tool_step

REQUEST = "add 11 and 4, then multiply the result by 3"
RIGHT = [
    plan(tool_step("1", "calculator", {"expression": "(11 + 4) * 3"}), llm_step("2")),
    answer("It is 45."),
]
#: what Gemma 3 270M wrote for it: the multiplication became a division
WRONG = [
    plan(tool_step("1", "calculator", {"expression": "(11 + 4) / 3"}), llm_step("2")),
    answer("It is 5."),
]


def scripted(tmp_path: Path, replies: list[Any], name: str = "aeon.toml") -> Path:
    (tmp_path / f"{name}.json").write_text(json.dumps(replies), encoding="utf-8")
    config = tmp_path / name
    config.write_text(
        f'[llm]\nuse = "scripted"\nresponses = "{tmp_path / (name + ".json")}"\n', encoding="utf-8"
    )
    return config


def test_aeon_run_reports_the_verdict_and_a_contradicted_run_exits_1(tmp_path: Path) -> None:
    runner = CliRunner()
    right = runner.invoke(
        cli, ["run", REQUEST, "--json", "--no-log", "--config", str(scripted(tmp_path, RIGHT))]
    )
    assert right.exit_code == 0, right.output
    assert json.loads(right.stdout)["verification"]["verdict"] == "verified"
    wrong = runner.invoke(
        cli, ["run", REQUEST, "--json", "--no-log", "--config", str(scripted(tmp_path, WRONG, "wrong.toml"))]
    )
    assert wrong.exit_code == 1, wrong.output
    result = json.loads(wrong.stdout)
    assert (result["status"], result["verification"]["verdict"]) == ("failed", "contradicted")


def test_the_live_view_shows_the_verdict_and_its_reason(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["run", REQUEST, "--no-log", "--config", str(scripted(tmp_path, WRONG))], terminal_width=200
    )
    assert result.exit_code == 1
    shown = re.sub(r"[\s│╭╮╰╯─]+", " ", result.output)  # the panel's borders and line breaks aside
    assert "CONTRADICTED" in shown
    assert "The request asks to multiply, which no calculation does." in shown


def test_an_eval_case_asserts_the_verdict(tmp_path: Path) -> None:
    """Each case runs on an engine of its own, so both get the same replies: a division, which is what one of the
    requests asks for."""
    config = scripted(tmp_path, WRONG)
    divide = "add 11 and 4, then divide the result by 3"
    suite = {
        "name": "verdicts",
        "config": str(config),
        "cases": [
            {"id": "wrong", "request": REQUEST, "expect": {"verification": "verified"}},
            {"id": "right", "request": divide, "expect": {"status": "completed", "verification": "verified"}},
        ],
    }
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(suite), encoding="utf-8")
    result = CliRunner().invoke(cli, ["eval", str(tmp_path), "--live", "--json"])
    assert result.exit_code == 1, result.output
    by_id = {case["case"]: case for case in json.loads(result.stdout)["cases"]}
    assert by_id["right"]["result"] == "passed"
    assert by_id["wrong"]["failures"] == ["verification: expected 'verified', got 'contradicted'"]


def test_a_batch_line_carries_the_verdict(tmp_path: Path) -> None:
    config = scripted(tmp_path, RIGHT)
    (tmp_path / "in.jsonl").write_text(json.dumps({"id": "a", "request": REQUEST}) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(
        cli, ["batch", str(tmp_path / "in.jsonl"), "--out", str(out), "--no-log", "--config", str(config)]
    )
    assert result.exit_code == 0, result.output
    (line,) = [json.loads(text) for text in out.read_text(encoding="utf-8").splitlines()]
    assert (line["status"], line["verification"]) == ("completed", "verified")


def test_the_inspector_shows_the_verification_with_each_check(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    config = (
        AeonConfig()
        .with_choice("llm", "scripted", responses=WRONG)
        .with_choice("state", "sqlite", path=str(db))
    )
    with Engine(config) as engine:
        run_id = engine.run(REQUEST)["run_id"]
    catalog = Catalog([SqliteRuns("store", db)])
    with serving(catalog) as server:
        status, _, page = fetch(server, f"/run/store/{run_id}")
    catalog.close()
    assert status == 200
    assert 'class="block verification"' in page
    assert '<span class="badge s-bad">contradicted</span>' in page
    assert "The request asks to multiply, which no calculation does." in page
    assert "plan_fits_request" in page and "review" in page


def test_the_run_span_carries_the_verdict(tmp_path: Path) -> None:
    with engine_for(tmp_path, [json.dumps(RIGHT[0]), RIGHT[1]]) as engine:
        engine.run(REQUEST)
        spans = finished(engine)
    (root,) = [s for s in spans if s.parent is None]
    assert root.attributes is not None
    assert root.attributes["aeon.run.verification"] == "verified"
    assert (
        root.attributes["aeon.run.verification.reason"]
        == "every tool call was reviewed and every check passed"
    )
    assert root.attributes["aeon.run.checks"] == 3
