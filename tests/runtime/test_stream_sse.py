"""The streaming example (examples/streaming/sse_app.py) served by a real uvicorn on loopback and read with httpx:
a run's events arrive as server-sent events, in order, the text as it is written; a client that hangs up stops the
run at its next safe point, and the run resumes from its store."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from aeon_kernel import AeonConfig, Engine
from tests.runtime.test_stream import REQUEST, SUM, Paced, paced_engine
from tests.support.builders import answer

uvicorn = pytest.importorskip("uvicorn")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "streaming" / "sse_app.py"


def example() -> Any:
    spec = importlib.util.spec_from_file_location("sse_app", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def served(engine: Engine) -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(example().make_app(engine), host="127.0.0.1", port=port, log_level="error")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(20)


def messages(lines: Iterator[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(event, data) of each server-sent event."""
    kind, data = "", ""
    for line in lines:
        if line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            data = line[6:]
        elif line == "" and kind:
            yield kind, json.loads(data)
            kind, data = "", ""


def test_a_run_streams_to_an_http_client_as_server_sent_events() -> None:
    model = Paced([SUM, answer("The sum of five and ten is 15")], pause=0.01)
    with served(paced_engine(model)) as url, httpx.Client(timeout=30) as client:
        assert client.get(f"{url}/run").status_code == 400
        with client.stream("GET", f"{url}/run", params={"request": REQUEST}) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            got = list(messages(response.iter_lines()))
        assert "<form" in client.get(url).text
    kinds = [kind for kind, _ in got]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert {"plan_accepted", "step_started", "tool_started", "tool_returned", "step_finished"} <= set(kinds)
    assert all(data["type"] == kind for kind, data in got)
    result = got[-1][1]["result"]
    assert result["status"] == "completed" and result["answer"] == "The sum of five and ten is 15"
    answer_text = "".join(d["text"] for k, d in got if k == "text_delta" and d["step_id"] == "2")
    assert answer_text == result["final_state"]["llm_outputs"][1]["text"]


def test_a_client_that_hangs_up_stops_the_run_and_it_resumes(tmp_path: Path) -> None:
    model = Paced([SUM, answer("The sum of five and ten is fifteen, as the calculator says")], pause=0.2)
    config = AeonConfig().with_choice("state", "sqlite", path=str(tmp_path / "runs.db"))
    with served(paced_engine(model, config)) as url, httpx.Client(timeout=30) as client:
        with client.stream("GET", f"{url}/run", params={"request": REQUEST}) as response:
            for kind, data in messages(response.iter_lines()):
                if kind == "run_started":
                    run_id = data["run_id"]
                if kind == "text_delta" and data["step_id"] == "2":
                    break  # the browser goes away mid-answer
        deadline = time.monotonic() + 20
        with Engine(config.with_choice("llm", "scripted", responses=[answer("15")])) as reader:
            while (summary := reader.state_store.list_runs()[0]).liveness() == "live":  # until released
                assert time.monotonic() < deadline, f"the run was not stopped: {summary}"
                time.sleep(0.1)
    # stopped mid-answer: that cycle was not committed
    assert (summary.status, summary.cycles) == ("running", 2)
    assert model.calls == 2 and run_id
    with Engine(config.with_choice("llm", "scripted", responses=[answer("The sum is 15")])) as engine:
        result = engine.resume(run_id)
    assert result["status"] == "completed" and result["answer"] == "The sum is 15"
