"""``aeon batch``: many requests at once from a JSONL file, results appended as they end, resumable, Ctrl-C safe.

The end-to-end tests run the real console entry point in a subprocess, with a plugin installed the way a
third-party one is (a dist-info directory on ``PYTHONPATH``): a model that plans from the request (tasks end in
any order) and a ``nap`` tool that sleeps, so that tasks are in flight when Ctrl-C comes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from aeon_cli.main import cli
from tests.plugins.flow.test_engine import chain, write_flow

PLUGIN = """
import json, re, time
from aeon_kernel import FunctionTool, LLMAdapter, hookimpl

class ByRequest(LLMAdapter):
    model_id = "by-request"

    def generate(self, prompt, system_prompt=None, max_tokens=2048, temperature=0.7, *, json_schema=None):
        spec = json.loads(re.findall(r"job (\\{[^{}]*\\})", prompt)[-1])
        tool = "boom" if spec.get("boom") else "nap"
        steps = [
            {"step_id": str(i), "description": "nap", "tool": tool,
             "arguments": {"seconds": spec["nap"], "value": f"{spec['word']}-{i}"}}
            for i in range(1, spec["steps"] + 1)
        ]
        return {"text": json.dumps({"goal": spec["word"], "steps": steps})}

def nap(seconds, value):
    time.sleep(seconds)
    return {"value": value}

def boom(seconds, value):
    raise RuntimeError("boom")

@hookimpl
def aeon_register_llm_adapters(register):
    register("by_request", ByRequest)

@hookimpl
def aeon_register_tools(register):
    for name, function in (("nap", nap), ("boom", boom)):
        register(name, lambda name=name, function=function: FunctionTool(
            name=name, description=name, input_schema={"type": "object"}, output_schema={"type": "object"},
            function=function))
"""


def job(word: str, *, steps: int = 1, nap: float = 0.0, boom: bool = False) -> str:
    return "job " + json.dumps({"word": word, "steps": steps, "nap": nap, "boom": boom})


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory whose aeon.toml selects the by-request model, with its plugin installed."""
    site = tmp_path / "site"
    (site / "batch_jobs-1.0.dist-info").mkdir(parents=True)
    (site / "batch_jobs-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: batch-jobs\nVersion: 1.0\n"
    )
    (site / "batch_jobs-1.0.dist-info" / "entry_points.txt").write_text("[aeon]\nbatch_jobs = batch_jobs\n")
    (site / "batch_jobs.py").write_text(PLUGIN)
    (tmp_path / "aeon.toml").write_text('[llm]\nuse = "by_request"\n')
    monkeypatch.syspath_prepend(str(site))  # for the tests that run the command in this process
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AEON_CONFIG", raising=False)
    return tmp_path


def write_requests(path: Path, lines: list[Any]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def results(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def aeon(project: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(project / "site"), os.getcwd(), *sys.path])}
    return subprocess.Popen(
        [sys.executable, "-m", "aeon_cli", *args],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def finish(proc: subprocess.Popen[str]) -> tuple[int, str]:
    _, stderr = proc.communicate(timeout=60)
    return proc.returncode, stderr


def test_a_batch_runs_every_line_and_a_rerun_skips_what_is_done(project: Path) -> None:
    lines: list[Any] = [{"id": f"r{i}", "request": job(f"w{i}", nap=0.01 * (i % 3))} for i in range(8)]
    lines += [job("bare"), {"id": 99, "request": job("bad", boom=True)}]
    write_requests(project / "requests.jsonl", lines)
    code, stderr = finish(
        aeon(project, "batch", "requests.jsonl", "--out", "out.jsonl", "--concurrency", "3")
    )
    assert code == 1, stderr  # one task failed
    assert "Traceback" not in stderr and "batch done: 9 completed, 1 failed in" in stderr
    written = {json.dumps(line["id"]): line for line in results(project / "out.jsonl")}
    assert set(written) == {*(f'"r{i}"' for i in range(8)), "9", "99"}  # a bare line's id is its line number
    for i in range(8):
        line = written[f'"r{i}"']
        assert (line["status"], line["answer"]) == ("completed", {"value": f"w{i}-1"})
        assert len(line["run_id"]) == 32 and line["seconds"] >= 0 and line["message"]
    assert written["99"]["status"] == "failed" and written["9"]["answer"] == {"value": "bare-1"}
    assert "runs recorded: state in" in stderr  # as aeon run does, unless --no-log

    with (project / "requests.jsonl").open("a") as more:  # the file grows; the rerun runs only the new line
        more.write(json.dumps({"id": "late", "request": job("late")}) + "\n")
    code, stderr = finish(aeon(project, "batch", "requests.jsonl", "--out", "out.jsonl", "--no-log"))
    assert "1 task(s) to run, 10 already in out.jsonl" in stderr and code == 1  # the earlier failure counts
    ids = [line["id"] for line in results(project / "out.jsonl")]
    assert len(ids) == 11 and ids[-1] == "late" and len(set(map(json.dumps, ids))) == 11


def test_the_scripted_model_answers_each_task_once_whatever_the_concurrency(project: Path) -> None:
    """The built-in scripted model counts its calls: concurrent tasks take turns at it, so each scripted plan
    goes to exactly one task and none is skipped or given twice."""
    plans = [
        {
            "goal": f"echo {i}",
            "steps": [
                {"step_id": "1", "description": "echo", "tool": "echo", "arguments": {"message": f"m{i}"}}
            ],
        }
        for i in range(12)
    ]
    (project / "responses.json").write_text(json.dumps(plans))
    (project / "aeon.toml").write_text('[llm]\nuse = "scripted"\nresponses = "responses.json"\n')
    # which plan a task gets is not known in advance: each request asks to echo any of the twelve messages
    choices = " ".join(f"m{i}" for i in range(12))
    write_requests(project / "requests.jsonl", [f"task {i}: echo one of {choices}" for i in range(12)])
    result = CliRunner().invoke(cli, ["batch", "requests.jsonl", "--out", "out.jsonl", "--concurrency", "6"])
    assert result.exit_code == 0, result.stderr
    lines = results(project / "out.jsonl")
    assert sorted(line["id"] for line in lines) == list(range(1, 13))
    assert sorted(line["answer"]["message"] for line in lines) == sorted(f"m{i}" for i in range(12))


@pytest.mark.parametrize("presses", [1, 2])
def test_ctrl_c_keeps_every_finished_line_and_the_rerun_gives_each_id_exactly_once(
    project: Path, presses: int
) -> None:
    """One Ctrl-C: no new tasks, the running ones finish. Two: those are cancelled at a cycle boundary. Either
    way exit 130, every line in --out is whole, and running the command again completes the rest."""
    ids = [f"t{i}" for i in range(16)]
    write_requests(project / "requests.jsonl", [{"id": i, "request": job(i, steps=3, nap=0.05)} for i in ids])
    command = ("batch", "requests.jsonl", "--out", "out.jsonl", "--concurrency", "3", "--no-log")
    proc = aeon(project, *command)
    out = project / "out.jsonl"
    deadline = time.monotonic() + 30
    while (not out.exists() or len(out.read_text().splitlines()) < 2) and time.monotonic() < deadline:
        time.sleep(0.01)
    for _ in range(presses):
        proc.send_signal(signal.SIGINT)
        time.sleep(0.02)
    code, stderr = finish(proc)
    assert code == 130, stderr
    assert "Traceback" not in stderr and "run the same command again" in stderr
    first = results(out)  # every line parses: none is half-written
    assert 2 <= len(first) < len(ids) and {line["status"] for line in first} == {"completed"}
    if presses == 1:
        assert "waiting for" in stderr
    else:
        assert "cancelling the running tasks" in stderr

    code, stderr = finish(aeon(project, *command))
    assert code == 0, stderr
    final = results(out)
    assert sorted(line["id"] for line in final) == sorted(ids)  # each exactly once
    assert final[: len(first)] == first
    assert all(line["answer"] == {"value": f"{line['id']}-3"} for line in final)


def test_an_unfinished_last_line_is_dropped_and_its_task_runs_again(project: Path) -> None:
    write_requests(project / "requests.jsonl", [{"id": i, "request": job(f"u{i}")} for i in range(3)])
    (project / "out.jsonl").write_text(
        json.dumps({"id": 0, "status": "completed"}) + '\n{"id": 1, "run_id": "abc", "sta', encoding="utf-8"
    )
    result = CliRunner().invoke(cli, ["batch", "requests.jsonl", "--out", "out.jsonl", "--no-log"])
    assert result.exit_code == 0, result.stderr
    assert "dropping an unfinished last line" in result.stderr
    assert sorted(line["id"] for line in results(project / "out.jsonl")) == [0, 1, 2]


def test_bad_lines_are_reported_with_their_numbers_before_anything_runs(project: Path) -> None:
    (project / "requests.jsonl").write_text(
        '{"id": 1, "request": "a"}\n\n{"id": 1, "request": "b"}\nnot json\n{"id": 2}\n'
        '{"id": 3, "request": "c", "ttl": 2}\n[1]\n{"id": true, "request": "d"}\n{"id": 4, "request": " "}\n',
        encoding="utf-8",
    )
    result = CliRunner().invoke(cli, ["batch", "requests.jsonl", "--out", "out.jsonl"])
    assert result.exit_code == 2 and not (project / "out.jsonl").exists()
    for expected in (
        "7 bad line(s)",
        "line 3: id 1 is already used on line 1",
        "line 4: not JSON",
        "line 5: no 'request'",
        "line 6: unknown key(s) ['ttl']",
        "line 7: expected",
        "line 8: id must be a non-empty string or an integer",
        "line 9: request must be a non-empty string",
    ):
        assert expected in result.stderr
    (project / "out.jsonl").write_text("garbage\n")
    write_requests(project / "requests.jsonl", [{"id": 1, "request": "a"}])
    result = CliRunner().invoke(cli, ["batch", "requests.jsonl", "--out", "out.jsonl"])
    assert result.exit_code == 2 and "line 1 of out.jsonl is not a batch result" in result.stderr


def test_a_flow_batch_runs_each_input_through_the_flow(project: Path) -> None:
    write_flow(
        project / "flow",
        chain({"id": "in", "role": "start"}, {"id": "out", "role": "exit"}, name="pass"),
    )
    (project / "flow" / "aeon.toml").write_text('[memory]\nuse = "in_memory"\n')
    write_requests(project / "inputs.jsonl", [{"id": i, "input": {"n": i}} for i in range(6)])
    result = CliRunner().invoke(
        cli,
        ["batch", "inputs.jsonl", "--flow", "flow", "--out", "out.jsonl", "--concurrency", "2", "--ttl", "5"],
    )
    assert result.exit_code == 0, result.stderr
    lines = sorted(results(project / "out.jsonl"), key=lambda line: line["id"])
    assert [(line["id"], line["answer"]) for line in lines] == [(i, {"n": i}) for i in range(6)]
    assert {(line["status"], line["task_status"]) for line in lines} == {("completed", "success")}
    write_requests(project / "inputs.jsonl", ["a bare line"])
    result = CliRunner().invoke(cli, ["batch", "inputs.jsonl", "--flow", "flow", "--out", "other.jsonl"])
    assert result.exit_code == 2 and 'expected {"id": ..., "input": ...}' in result.stderr
