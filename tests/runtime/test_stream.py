"""Streamed runs (issue 28, part 3): ``engine.stream`` / ``engine.astream`` / ``Run.stream`` yield typed events.

What is checked: the events say what the log says (the cycle events' entries are the JSONL records, the last event
carries the result); the model's text arrives in pieces that join up to what it wrote, and before it has finished;
only the run's own events reach its stream; closing the stream or cancelling its task stops the run at a safe point,
and the run then resumes from its store to the same end.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from aeon_kernel import AeonConfig, Engine, LLMAdapter, LLMResponse, hookimpl
from aeon_kernel.events import (
    CycleEnded,
    PlanAccepted,
    RunFinished,
    RunStarted,
    StepFinished,
    StepStarted,
    TextDelta,
    ToolReturned,
    ToolStarted,
)
from tests.support.builders import answer, llm_step, plan, tool_step

SUM = plan(tool_step("1", "calculator", {"expression": "5 + 10"}), llm_step("2"))
REQUEST = "calculate the sum of 5 and 10"


def scripted(*responses: Any) -> AeonConfig:
    return AeonConfig().with_choice("llm", "scripted", responses=list(responses))


class Paced(LLMAdapter):
    """A model that streams its replies word by word, waiting ``pause`` seconds between words; ``gate``, when
    given, holds the last word of the reply numbered ``hold`` until it is set."""

    def reply(self, prompt: str) -> str:
        return json.dumps(SUM) if prompt.startswith("Write a plan") else answer("The sum is 15")

    def __init__(self, replies: list[Any], pause: float = 0.0) -> None:
        self.replies = [r if isinstance(r, str) else json.dumps(r) for r in replies]
        self.pause, self.calls = pause, 0
        self.gate: threading.Event | None = None
        self.hold = -1

    def supports_streaming(self) -> bool:
        return True

    def generate(self, prompt: str, *args: Any, **kwargs: Any) -> LLMResponse:
        return self.stream(prompt, *args, on_text=lambda _: None, **kwargs)

    def stream(self, prompt: str, *args: Any, on_text: Any, **kwargs: Any) -> LLMResponse:
        text = self.replies[self.calls % len(self.replies)] if self.replies else self.reply(prompt)
        number, self.calls = self.calls, self.calls + 1
        words = text.split(" ")
        for i, word in enumerate(words):
            if i == len(words) - 1 and number == self.hold and self.gate is not None:
                assert self.gate.wait(10), "the reader never saw the first piece"
            on_text(word if i == 0 else " " + word)
            time.sleep(self.pause)
        return {"text": text, "model": "paced", "usage": {"completion_tokens": len(words)}}


def paced_engine(model: Paced, config: AeonConfig | None = None) -> Engine:
    class Plugin:
        @hookimpl
        def aeon_register_llm_adapters(self, register: Any) -> None:
            register("paced", lambda **_: model)

    return Engine((config or AeonConfig()).with_choice("llm", "paced"), plugins=[Plugin()])


def test_a_streamed_run_says_what_its_log_and_its_result_say(tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    with Engine(scripted(SUM, answer("The sum is 15"))) as engine:
        engine.add_sink("jsonl", path=str(log))
        stream = engine.stream(REQUEST)
        events = list(stream)
    assert isinstance(events[0], RunStarted) and events[0].request == REQUEST
    assert isinstance(events[-1], RunFinished) and events[-1].result == stream.result
    assert stream.result is not None and stream.result["status"] == "completed"
    assert stream.result["answer"] == "The sum is 15"
    records = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()][1:]
    entries = [
        e.entry.model_dump(mode="json", exclude={"plan_state"}) for e in events if isinstance(e, CycleEnded)
    ]
    # the sink writes the plan where it changed (plan_state, plan_changes); the rest of each line is the entry
    assert entries == [
        {k: v for k, v in r.items() if k not in ("plan_state", "plan_changes")} for r in records
    ]
    kinds = [type(e).__name__ for e in events if not isinstance(e, TextDelta)]
    assert kinds == [
        "RunStarted",
        "PlanAccepted",
        "CycleEnded",
        "StepStarted",
        "ToolStarted",
        "ToolReturned",
        "StepFinished",
        "CycleEnded",
        "StepStarted",
        "StepFinished",
        "CycleEnded",
        "RunFinished",
    ]
    started = next(e for e in events if isinstance(e, ToolStarted))
    returned = next(e for e in events if isinstance(e, ToolReturned))
    assert (started.tool_name, started.arguments) == ("calculator", {"expression": "5 + 10"})
    assert returned.call.result == {"expression": "5 + 10", "value": 15}
    assert all(json.dumps(e.to_dict()) for e in events)  # every event is JSON
    assert [e.to_dict()["type"] for e in events][:2] == ["run_started", "text_delta"]


def test_the_text_pieces_join_up_to_what_the_model_wrote_step_by_step() -> None:
    with Engine(scripted(SUM, answer("The sum is 15"))) as engine:
        stream = engine.stream(REQUEST)
        events = list(stream)
    assert stream.result is not None
    written = [o["text"] for o in stream.result["final_state"]["llm_outputs"]]
    by_step: dict[Any, str] = {}
    for event in events:
        if isinstance(event, TextDelta):
            by_step[event.step_id] = by_step.get(event.step_id, "") + event.text
    assert by_step == {None: written[0], "2": written[1]}  # the plan, then the answer of step 2


def test_the_first_piece_of_an_answer_reaches_an_async_reader_before_the_model_has_finished() -> None:
    model = Paced([SUM, answer("The sum of five and ten is 15")])
    model.hold, model.gate = 1, threading.Event()  # the answer's last word waits for the reader

    async def read() -> list[Any]:
        seen = []
        with paced_engine(model) as engine:
            async for event in engine.astream(REQUEST):
                seen.append(event)
                if isinstance(event, TextDelta) and event.step_id == "2":
                    model.gate.set()  # only now may the model finish its answer
        return seen

    events = asyncio.run(read())
    assert isinstance(events[-1], RunFinished) and events[-1].result["status"] == "completed"
    assert sum(isinstance(e, TextDelta) and e.step_id == "2" for e in events) > 1


def test_two_runs_streamed_at_once_on_one_engine_each_get_only_their_own_events() -> None:
    with paced_engine(Paced([], pause=0.001)) as engine:  # each prompt answered for what it asks
        first, second = engine.stream(REQUEST), engine.stream(REQUEST)
        got: dict[str, list[Any]] = {}
        threads = [
            threading.Thread(target=lambda s=s: got.__setitem__(s.run.run_id, list(s)))
            for s in (first, second)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    for stream in (first, second):
        events = got[stream.run.run_id]
        assert {e.run_id for e in events} == {stream.run.run_id}
        assert isinstance(events[-1], RunFinished) and events[-1].result["status"] == "completed"
    assert first.run._context.observer is None and second.run._context.observer is None


def stored(tmp_path: Path) -> dict[str, Any]:
    return {"path": str(tmp_path / "runs.db")}


def test_closing_the_stream_between_cycles_leaves_the_run_resumable(tmp_path: Path) -> None:
    config = scripted(SUM, answer("The sum is 15")).with_choice("state", "sqlite", **stored(tmp_path))
    with Engine(config) as engine:
        stream = engine.stream(REQUEST)

        class Slow:  # the calculator's cycle ends only once the reader has closed the stream
            @hookimpl
            def aeon_cycle_end(self, entry: Any) -> None:
                if entry.step_id == "1":
                    assert stream.cancelled.wait(10)

        engine.pm.register(Slow())
        for event in stream:
            if isinstance(event, StepFinished):  # the calculator's step is done: stop here
                stream.close()
                break
        run_id = stream.run.run_id
        assert stream.result is None
    later = scripted(answer("The sum is 15")).with_choice("state", "sqlite", **stored(tmp_path))
    with Engine(later) as engine:
        result = engine.resume(run_id)  # the claim was released; the calculator is not called again
    assert result["status"] == "completed" and result["answer"] == "The sum is 15"
    assert [c["tool_name"] for c in result["final_state"]["tool_history"]] == ["calculator"]


def test_cancelling_the_reading_task_mid_answer_interrupts_the_cycle_and_the_run_resumes(
    tmp_path: Path,
) -> None:
    model = Paced([SUM, answer("The sum of five and ten is fifteen")], pause=0.05)
    cancelled = asyncio.Event()

    async def main(engine: Engine) -> str:
        stream = engine.astream(REQUEST)
        task = asyncio.create_task(read_from(stream))
        await cancelled.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await stream.aclose()  # waits for the run to stop: at the model's next piece of text
        return stream.run.run_id

    async def read_from(stream: Any) -> None:
        async for event in stream:
            if isinstance(event, TextDelta) and event.step_id == "2":
                cancelled.set()
                await asyncio.sleep(10)  # cancelled here, mid-answer

    with paced_engine(model, AeonConfig().with_choice("state", "sqlite", **stored(tmp_path))) as engine:
        run_id = asyncio.run(main(engine))
        stored_run = engine.state_store.load(run_id)
    assert stored_run.state.cycle == 2  # the answer's cycle was not committed
    assert stored_run.state.plan is not None
    assert [s.status.value for s in stored_run.state.plan.steps] == ["complete", "pending"]
    assert model.calls == 2  # the answer was cut short, not finished
    later = scripted(answer("The sum is 15")).with_choice("state", "sqlite", **stored(tmp_path))
    with Engine(later) as engine:
        result = engine.resume(run_id)
    assert result["status"] == "completed" and result["answer"] == "The sum is 15"


def test_a_resumed_run_streams_too(tmp_path: Path) -> None:
    config = scripted(SUM).with_choice("state", "sqlite", **stored(tmp_path))
    with Engine(config) as engine:
        run = engine.start(REQUEST)
        run.next(), run.next()  # the plan and the calculator; then the process goes away
        run.close()
    later = scripted(answer("The sum is 15")).with_choice("state", "sqlite", **stored(tmp_path))
    with Engine(later) as engine:
        events = list(engine.orchestrator().start_resume(run.run_id).stream())
    assert isinstance(events[0], RunStarted) and events[0].resumed
    assert [type(e).__name__ for e in events if isinstance(e, (StepStarted, StepFinished))] == [
        "StepStarted",
        "StepFinished",
    ]
    assert not any(isinstance(e, PlanAccepted) for e in events[:1])
    assert events[-1].result["status"] == "completed"  # type: ignore[attr-defined]


class Whole(Paced):
    """Paced, as a model that answers whole (it cannot stream)."""

    def supports_streaming(self) -> bool:
        return False


def test_with_a_model_that_answers_whole_the_run_goes_cycle_by_cycle_in_the_readers_thread(
    tmp_path: Path,
) -> None:
    config = AeonConfig().with_choice("state", "sqlite", **stored(tmp_path))
    threads: set[str] = set()

    class Where:
        @hookimpl
        def aeon_cycle_end(self, entry: Any) -> None:
            threads.add(threading.current_thread().name)

    with paced_engine(Whole([SUM, answer("The sum is 15")]), config) as engine:
        engine.pm.register(Where())
        events = list(engine.stream(REQUEST))
        assert threads == {threading.current_thread().name}
        assert not any(isinstance(e, TextDelta) for e in events)  # nothing to stream: each reply whole
        assert [type(e).__name__ for e in events][:3] == ["RunStarted", "PlanAccepted", "CycleEnded"]
        assert isinstance(events[-1], RunFinished) and events[-1].result["status"] == "completed"

        stream = engine.stream(REQUEST)
        for event in stream:
            if isinstance(event, StepFinished):
                break
        stream.close()  # between cycles: the calculator's cycle was committed, the answer's never began
        run_id = stream.run.run_id
        assert stream.result is None
    later = scripted(answer("The sum is 15")).with_choice("state", "sqlite", **stored(tmp_path))
    with Engine(later) as engine:
        result = engine.resume(run_id)
    assert result["status"] == "completed" and result["final_state"]["cycle"] == 3


def test_a_repair_is_an_event_of_its_cycle() -> None:
    from aeon_kernel.events import Repair

    with Engine(scripted(SUM, "The sum is 15", answer("The sum is 15"))) as engine:  # not JSON: repaired
        events = list(engine.stream(REQUEST))
    (repair,) = [e for e in events if isinstance(e, Repair)]
    assert repair.action.action_type == "json_repair" and repair.action.error is None
    step_two = [
        type(e).__name__ for e in events if getattr(e, "step_id", None) == "2" or isinstance(e, Repair)
    ]
    assert "Repair" in step_two and events[-1].result["status"] == "completed"  # type: ignore[attr-defined]
