"""The ``aeon`` command line, run as a real subprocess (the installed console script) where it matters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from unittest.mock import ANY

import pytest
from click.testing import CliRunner

from aeon_cli.main import cli
from tests.support.builders import answer, llm_step, plan, tool_step

SUM = plan(tool_step("1", "calculator", {"expression": "5 + 10"}), llm_step("2"))


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory whose aeon.toml selects the scripted model."""
    (tmp_path / "responses.json").write_text(json.dumps([SUM, answer("The sum is 15")]))
    (tmp_path / "aeon.toml").write_text('[llm]\nuse = "scripted"\nresponses = "responses.json"\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AEON_CONFIG", raising=False)
    return tmp_path


def aeon(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aeon_cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_run_json_prints_the_result(project: Path) -> None:
    proc = aeon("run", "calculate the sum of 5 and 10", "--json", "--log", "run.jsonl", cwd=project)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "completed" and result["answer"] == "The sum is 15"
    assert set(result) >= {"plan", "status", "final_state"}
    manifest, *cycles = [json.loads(line) for line in (project / "run.jsonl").read_text().splitlines()]
    assert manifest["manifest"]["run_id"] == result["run_id"]
    assert manifest["manifest"]["model"] == "scripted" and manifest["manifest"]["config_fingerprint"]
    assert {
        "name": "calculator",
        "distribution": "aeon-core",
        "version": "0.1.0",
        "hookspec_version": None,
    } in (manifest["manifest"]["plugins"])
    assert [cycle["step_number"] for cycle in cycles] == [1, 2, 3]


def test_log_flag_keeps_the_sinks_configured_in_aeon_toml(project: Path) -> None:
    """Regression: --log added its sink first, and the engine then skipped the [telemetry] sinks."""
    toml = project / "aeon.toml"
    toml.write_text(
        toml.read_text() + '[telemetry]\nuse = ["jsonl"]\n[telemetry.jsonl]\npath = "configured.jsonl"\n'
    )
    proc = aeon("run", "calculate the sum of 5 and 10", "--json", "--log", "flag.jsonl", cwd=project)
    assert proc.returncode == 0, proc.stderr
    run_id = json.loads(proc.stdout)["run_id"]
    for name in ("configured.jsonl", "flag.jsonl"):
        manifest, *cycles = [json.loads(line) for line in (project / name).read_text().splitlines()]
        assert manifest["manifest"]["run_id"] == run_id, name
        assert [cycle["step_number"] for cycle in cycles] == [1, 2, 3], name


def test_run_live_view_shows_the_plan_and_the_answer(project: Path) -> None:
    result = CliRunner().invoke(cli, ["run", "calculate the sum of 5 and 10"])
    assert result.exit_code == 0, result.output
    for text in ("Goal: Add 5 and 10", "calculator", "COMPLETED", "The sum is 15", "✔"):
        assert text in result.output


def test_run_schema_writes_a_typed_output_shown_live_and_in_json(project: Path) -> None:
    total = {"type": "object", "properties": {"total": {"type": "integer"}}, "required": ["total"]}
    (project / "total.json").write_text(json.dumps(total))
    (project / "responses.json").write_text(json.dumps([SUM, answer("The sum is 15"), {"total": 15}]))
    result = CliRunner().invoke(cli, ["run", "calculate the sum of 5 and 10", "--schema", "total.json"])
    assert result.exit_code == 0, result.output
    assert 'output: {"total": 15}' in result.output and "The sum is 15" in result.output
    inline = CliRunner().invoke(cli, ["run", "add 5 and 10", "--json", "--schema", json.dumps(total)])
    assert json.loads(inline.stdout)["output"] == {"total": 15}
    (project / "responses.json").write_text(
        json.dumps([SUM, answer("The sum is 15"), {"total": 16}, {"total": 16}])
    )
    wrong = CliRunner().invoke(cli, ["run", "add 5 and 10", "--json", "--schema", "total.json"])
    assert wrong.exit_code == 1 and json.loads(wrong.stdout)["output"] is None  # 16: no tool said it
    for bad, message in (("nope.json", "neither a JSON object nor a file"), ('{"type": 5}', "not valid")):
        refused = CliRunner().invoke(cli, ["run", "x", "--schema", bad])
        assert refused.exit_code == 2 and message in refused.output and "Traceback" not in refused.output


def test_exit_status_reports_failure_and_ttl(project: Path) -> None:
    (project / "responses.json").write_text(json.dumps([SUM]))  # no answer for step 2: the model "fails"
    assert CliRunner().invoke(cli, ["run", "x", "--json"]).exit_code == 1
    (project / "responses.json").write_text(json.dumps([SUM, answer("15")]))
    result = CliRunner().invoke(cli, ["run", "x", "--json", "--ttl", "2"])
    assert result.exit_code == 3 and json.loads(result.stdout)["status"] == "ttl_expired"


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[llm]\nuse = "gpt-17"\n', "no LLM adapter named 'gpt-17' is registered. Available: "),
        ("[llm\n", "not valid TOML"),
        ("[run]\nttl = 0\n", "ttl must be a positive integer"),
        ('[llm]\nuse = "scripted"\n', "set responses"),
    ],
)
def test_setup_errors_are_clear_messages_not_tracebacks(project: Path, toml: str, message: str) -> None:
    (project / "aeon.toml").write_text(toml)
    proc = aeon("run", "x", cwd=project)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_config_lookup_flag_and_environment(project: Path) -> None:
    other = project / "other.toml"
    other.write_text('[llm]\nuse = "nope"\n')
    assert "named 'nope'" in aeon("run", "x", "--config", str(other), cwd=project).stderr
    assert "named 'nope'" in aeon("run", "x", cwd=project, env={"AEON_CONFIG": str(other)}).stderr
    assert "does not exist" in aeon("run", "x", "--config", "missing.toml", cwd=project).stderr


def test_plugins_prints_json(project: Path) -> None:
    proc = aeon("plugins", cwd=project)
    data = json.loads(proc.stdout)
    by_name = {p["name"]: p for p in data["plugins"]}
    assert by_name["calculator"]["components"] == {"tools": ["calculator"]}
    assert by_name["scripted"]["hooks"] == ["aeon_register_llm_adapters"]
    assert by_name["scripted"]["distribution"] == "aeon-core"
    assert "errors" in data


def test_tools_lists_schemas(project: Path) -> None:
    tools = {t["name"]: t for t in json.loads(aeon("tools", cwd=project).stdout)}
    assert tools["calculator"]["input_schema"]["required"] == ["expression"]
    assert "output_schema" in tools["echo"]


def test_tools_all_says_which_tools_are_off_and_why(project: Path) -> None:
    (project / "work").mkdir()
    files = '[tools.files]\ngrant = ["read"]\nroot = "work"\n'
    (project / "aeon.toml").write_text(f'[tools]\nenabled = ["calculator", "files"]\n{files}')
    listed = {t["name"]: t for t in json.loads(aeon("tools", "--all", cwd=project).stdout)}
    assert (
        listed["files"]["on"]
        and listed["files"]["granted"] == ["read"]
        and listed["files"]["tools"] == ["files"]
    )
    assert set(listed["files"]["permissions"]) == {"read", "write", "list"}
    assert listed["echo"]["on"] is False and listed["echo"]["why_off"] == "not in [tools] enabled"
    assert [t["name"] for t in json.loads(aeon("tools", cwd=project).stdout)] == ["calculator", "files"]
    (project / "aeon.toml").write_text(files)
    listed = {t["name"]: t for t in json.loads(aeon("tools", "--all", cwd=project).stdout)}
    assert listed["shell"]["on"] is False and listed["shell"]["permissions"] == {"run": ANY}
    assert listed["shell"]["why_off"] == "nothing granted: add grant = [...] to [tools.shell]"
    (project / "aeon.toml").write_text('[tools]\nenabled = ["shell"]\n')
    failed = aeon("tools", "--all", cwd=project)
    assert failed.returncode == 2 and "add grant = [...] to [tools.shell]" in failed.stderr


def test_secrets_never_reach_the_log(project: Path) -> None:
    """A secret given to a component as a reference is resolved late and never written to the JSONL log."""
    (project / "aeon.toml").write_text(
        '[llm]\nuse = "scripted"\nresponses = "responses.json"\n'
        '[telemetry]\nuse = ["jsonl"]\n[telemetry.jsonl]\npath = "log.jsonl"\n'
    )
    proc = aeon(
        "run",
        "calculate the sum of 5 and 10",
        "--json",
        cwd=project,
        env={"AEON_TEST_SECRET": "sk-very-secret"},
    )
    assert proc.returncode == 0
    assert "sk-very-secret" not in (project / "log.jsonl").read_text() + proc.stdout + proc.stderr


def test_exported_schemas_in_docs_are_current(tmp_path: Path) -> None:
    """docs/schemas/ is what `aeon schemas --dir` writes; regenerate it when a model changes."""
    result = CliRunner().invoke(cli, ["schemas", "--dir", str(tmp_path)])
    assert result.exit_code == 0
    docs = Path(__file__).resolve().parents[2] / "docs" / "schemas"
    generated = {p.name: p.read_text() for p in tmp_path.glob("*.json")}
    assert generated == {p.name: p.read_text() for p in docs.glob("*.json")}
    assert {"Plan.json", "PlanStep.json", "Tool.json", "LogEntry.json", "SupervisorAction.json"} <= set(
        generated
    )


def test_plugins_check_exit_status(project: Path, tmp_path: Path) -> None:
    assert aeon("plugins", "--check", cwd=project).returncode == 0
    site = tmp_path / "site"
    (site / "broken_dist-1.0.dist-info").mkdir(parents=True)
    (site / "broken_dist-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: broken-dist\nVersion: 1.0\n"
    )
    (site / "broken_dist-1.0.dist-info" / "entry_points.txt").write_text("[aeon]\nbroken = aeon_broken_mod\n")
    (site / "aeon_broken_mod.py").write_text("raise ImportError('needs libfoo')\n")
    env = {"PYTHONPATH": str(site)}
    proc = aeon("plugins", "--check", cwd=project, env=env)
    assert proc.returncode == 1 and "1 plugin problem" in proc.stderr
    assert json.loads(proc.stdout)["errors"][0]["error"] == "ImportError: needs libfoo"
    assert aeon("plugins", cwd=project, env=env).returncode == 0  # without --check it only reports
    run = aeon("run", "calculate the sum of 5 and 10", "--json", cwd=project, env=env)
    assert run.returncode == 0  # one broken plugin never takes the host down


def test_runs_and_resume_from_the_command_line(project: Path) -> None:
    """`aeon runs` lists stored runs newest first; `aeon resume` finishes an interrupted one, with the same options."""
    from aeon_kernel import Engine

    (project / "aeon.toml").write_text(
        '[llm]\nuse = "scripted"\nresponses = "responses.json"\n[state]\nuse = "sqlite"\npath = "state.db"\n'
    )
    with Engine(str(project / "aeon.toml")) as engine:
        cycles = engine.orchestrator().iter("calculate the sum of 5 and 10")
        run_id = [next(cycles).run_id for _ in range(2)][-1]  # the plan and the calculator, then "a crash"
        cycles.close()
    listed = json.loads(aeon("runs", "--json", cwd=project).stdout)
    assert [(r["run_id"], r["status"], r["cycles"]) for r in listed] == [(run_id, "running", 2)]
    assert run_id in aeon("runs", cwd=project).stdout

    (project / "responses.json").write_text(
        json.dumps([answer("15")])
    )  # only the last step still needs the model
    proc = aeon("resume", run_id, "--json", "--log", "resumed.jsonl", cwd=project)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert (result["run_id"], result["status"], result["answer"]) == (run_id, "completed", "15")
    assert json.loads(aeon("runs", "--json", cwd=project).stdout)[0]["status"] == "completed"

    again = aeon("resume", run_id, cwd=project)
    assert again.returncode == 2 and "already finished" in again.stderr and "Traceback" not in again.stderr
    unknown = aeon("resume", "nope", cwd=project)
    assert unknown.returncode == 2 and "no run 'nope'" in unknown.stderr


def test_every_cli_run_is_recorded_in_the_data_directory_by_default(
    project: Path, data_directory: Path
) -> None:
    """FR-037 without flags: no [state], no --log, and the run is still in `aeon runs`, resumable and logged."""
    empty = aeon("runs", cwd=project)
    assert empty.returncode == 0 and f"no runs recorded yet in {data_directory / 'runs.db'}" in empty.stderr

    proc = aeon("run", "calculate the sum of 5 and 10", "--json", cwd=project)
    assert proc.returncode == 0, proc.stderr
    run_id = json.loads(proc.stdout)["run_id"]  # stdout stays pure JSON: the note goes to stderr
    assert f"run {run_id} recorded: state in {data_directory / 'runs.db'}" in proc.stderr
    assert f"log in {data_directory / 'runs.jsonl'}" in proc.stderr
    (listed,) = json.loads(aeon("runs", "--json", cwd=project).stdout)
    assert (listed["run_id"], listed["status"]) == (run_id, "completed")
    lines = [json.loads(line) for line in (data_directory / "runs.jsonl").read_text().splitlines()]
    assert lines[0]["manifest"]["run_id"] == run_id and lines[-1]["run_id"] == run_id
    again = aeon("resume", run_id, cwd=project)  # the default store serves resume too
    assert again.returncode == 2 and "already finished" in again.stderr


def test_no_log_records_nothing(project: Path, data_directory: Path) -> None:
    proc = aeon("run", "calculate the sum of 5 and 10", "--json", "--no-log", cwd=project)
    assert proc.returncode == 0 and "recorded" not in proc.stderr
    assert not (data_directory / "runs.db").exists() and not (data_directory / "runs.jsonl").exists()


def test_a_configured_store_and_log_are_used_instead_of_the_data_directory(
    project: Path, data_directory: Path
) -> None:
    with (project / "aeon.toml").open("a") as toml:
        toml.write('[state]\nuse = "sqlite"\npath = "mine.db"\n')
    proc = aeon("run", "calculate the sum of 5 and 10", "--json", "--log", "mine.jsonl", cwd=project)
    assert proc.returncode == 0 and "state in mine.db, log in mine.jsonl" in proc.stderr
    assert (project / "mine.db").exists() and (project / "mine.jsonl").exists()
    assert list(data_directory.iterdir()) == []


def test_an_unwritable_data_directory_is_a_setup_error_naming_the_ways_out(project: Path) -> None:
    blocker = project / "a-file"
    blocker.write_text("")
    proc = aeon(
        "run", "calculate the sum of 5 and 10", cwd=project, env={"AEON_DATA_DIR": str(blocker / "sub")}
    )
    assert proc.returncode == 2 and "cannot record the run in" in proc.stderr and "--no-log" in proc.stderr
    assert "Traceback" not in proc.stderr
