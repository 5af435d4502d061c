"""`aeon run`'s live view is built on the run's events (issue 28): the same a stream yields, in the command's own
thread (so Ctrl-C interrupts the run where it is), the model's text shown as it is written."""

from __future__ import annotations

import io
import json
import threading

from rich.console import Console

from aeon_cli.live import LiveView
from aeon_kernel import AeonConfig, Engine
from tests.support.builders import answer, llm_step, plan, tool_step

SUM = plan(tool_step("1", "calculator", {"expression": "5 + 10"}), llm_step("2"))
SAID = "The sum of five and ten is 15"


class Recording(LiveView):
    """The view, remembering what it would show at each refresh."""

    def __init__(self, request: str) -> None:
        super().__init__(request, console=Console(file=io.StringIO(), width=120))
        self.shown: list[tuple[str, dict[str, str], str]] = []

    def _refresh(self) -> None:
        statuses = {step_id: step.status.value for step_id, step in self.steps.items()}
        self.shown.append((self.writing, statuses, threading.current_thread().name))


def test_the_live_view_follows_the_runs_events_and_shows_the_text_as_it_is_written() -> None:
    config = AeonConfig().with_choice("llm", "scripted", responses=[SUM, answer(SAID)])
    view = Recording("calculate the sum of 5 and 10")
    with Engine(config) as engine:
        run = engine.orchestrator().start("calculate the sum of 5 and 10")
        with run:
            result = view.run(run, run)
        assert engine.pm.get_plugin("aeon.live_view") is None  # no hooks of its own
    assert result["status"] == "completed" and result["answer"] == SAID
    assert {thread for _, _, thread in view.shown} == {threading.current_thread().name}
    written = [text for text, _, _ in view.shown if text]
    whole = json.dumps({"answer": SAID})
    assert written[-1] == whole and len(set(written)) > 3  # the answer grew piece by piece on screen
    assert all(whole.startswith(text) for text in written if text.startswith('{"answer"'))
    statuses = [s for _, s, _ in view.shown if s]
    assert {"1": "running", "2": "pending"} in statuses and statuses[-1] == {"1": "complete", "2": "complete"}
    assert view.cycle == (3, result["final_state"]["ttl_remaining"])
