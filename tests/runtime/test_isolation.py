"""Issue 13, item 3: concurrent runs of one engine never record each other's model outputs — in their state, the
JSONL log or the state store. Each run's request carries a canary the model echoes; no canary may turn up in
another run's records."""

from __future__ import annotations

import importlib
import json
import threading
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from aeon_kernel import Engine
from aeon_kernel.config import AeonConfig
from aeon_kernel.testing.pytest_plugin import BUILTIN_PLUGINS
from tests.runtime.test_run import ByRequestPlugin, echo_request

canaries = st.lists(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=6, max_size=10).map(
        lambda w: f"cq{w}q"
    ),
    min_size=2,
    max_size=10,
    unique=True,
).filter(lambda words: not any(a != b and a in b for a in words for b in words))  # none hides inside another


@settings(max_examples=15, deadline=None)
@given(words=canaries)
def test_concurrent_runs_keep_their_model_outputs_to_themselves(
    tmp_path_factory: Any, words: list[str]
) -> None:
    root: Path = tmp_path_factory.mktemp("isolation")
    config = (
        AeonConfig()
        .with_choice("llm", "by_request")
        .with_choice("state", "sqlite", path=str(root / "runs.db"))
    )
    builtins = [importlib.import_module(name) for name in (*BUILTIN_PLUGINS, "aeon_plugins.sqlite_state")]
    with Engine(config, plugins=[*builtins, ByRequestPlugin()], autoload=False) as engine:
        engine.add_sink("jsonl", path=str(root / "runs.jsonl"))
        runs = {word: engine.start(echo_request(word)) for word in words}
        barrier = threading.Barrier(len(words))

        def go(word: str) -> None:
            barrier.wait()
            runs[word].execute()

        threads = [threading.Thread(target=go, args=(word,)) for word in words]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        store = engine.state_store
        assert store is not None
        lines = [json.loads(line) for line in (root / "runs.jsonl").read_text(encoding="utf-8").splitlines()]
        for word, run in runs.items():
            assert run.result is not None and run.result.status == "completed", run.result
            others = [other for other in words if other != word]
            stored = store.load(run.run_id)
            records = {
                "state": run.state.model_dump_json(),
                "jsonl": json.dumps([line for line in lines if line.get("run_id") == run.run_id]),
                "store": json.dumps([entry.model_dump(mode="json") for entry in stored.entries])
                + stored.state.model_dump_json(),
            }
            for channel, text in records.items():
                assert word in text, channel
                leaked = [other for other in others if other in text]
                assert not leaked, f"{channel} of the run for {word!r} holds {leaked}"
