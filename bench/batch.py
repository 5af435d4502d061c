"""Many tasks at once (issue 16): the local executor's throughput and memory, beside LangGraph and pydantic-graph.

    python bench/batch.py                        # throughput at concurrency 1, 2, 4, 8 on 2,000 requests
    python bench/batch.py --n 500 --only aeon    # fewer requests, some frameworks only
    python bench/batch.py --n 200 --tool-wait 0.01   # each tool call waits 10 ms, as I/O would
    python bench/batch.py --memory 100000        # RSS across a 100,000-request engine.map and `aeon batch`
    python bench/batch.py --model --requests 8 --concurrency 1,2,4 --parallel 2   # the embedded model (Gemma 3 270M)
    python bench/batch.py --ray                  # Ray workers against the local executor, at 1, 2, 4

Throughput: every framework runs the same minimal workflow on ``--n`` requests "batch item K": an instant model
(a function returning prepared JSON, chosen by the request) writes a plan of two ``add_one`` steps, {"value": K}
and {"value": K + 1}; each step parses and validates its arguments (pydantic) and calls the tool; the answer is
K + 2, checked for every request. Aeon: ``engine.map(requests, concurrency=c)`` on one Engine (the model is
called through the kernel's serialising ModelClient); LangGraph: ``graph.batch(inputs, {"max_concurrency": c})``
(a thread pool); pydantic-graph: ``asyncio.gather`` of ``graph.run`` under a semaphore of ``c`` (one event loop).
Each case runs in a fresh process (after a warm-up of 50 requests) so that its peak RSS is its own.

Memory: ``engine.map`` over ``--memory`` requests at concurrency 4 with the ``in_memory`` memory backend (which
keeps every step's result: it grows by design) and with ``sqlite`` memory; and ``aeon batch --no-log`` on a file
of as many lines with sqlite memory (its plugin installed through an entry point, as a user's would be). RSS is
sampled as it goes. ``--cli N``: ``aeon batch`` on N lines recording every run (the default) and with ``--no-log``.

The embedded model: ``--requests`` arithmetic requests from bench/local_model.py through ``engine.map`` at
concurrency 1 and 2; requests per minute, and the time the model was busy (measured inside the adapter, so
waiting for the model's lock is not counted as model time) against the wall time.

Ray (``--ray``, needs ``aeon-core[ray]``): the same throughput workflow on a local Ray cluster of 2 CPUs that
each case's process starts (its start-up timed apart), ``RayExecutor.map`` with ``c`` workers against the local
executor's ``engine.map`` at the same ``c``; then ``aeon batch --no-log`` on ``--n`` lines with ``--executor
ray`` and ``--executor local``, the rate being the one the command prints (tasks only: not Python's or Ray's
start-up, which the wall time includes). RSS: the submitting process, and every Ray process it started.

Timings are noisy (a shared 2-core machine): compare rows of one run. Writes ``bench/batch.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from workloads.many import peak_rss_bytes, rss_bytes  # noqa: E402 - after the path it lives on

FRAMEWORKS = ("aeon", "langgraph", "pydantic_graph")
WARMUP = 50
#: seconds each tool call waits, as I/O would (``--tool-wait``; 0: the workflow is CPU-bound); Ray workers read it
#: from the environment
TOOL_WAIT = float(os.environ.get("AEON_BENCH_TOOL_WAIT", "0"))
MB = 2**20


def request(k: int) -> str:
    return f"batch item {k}"


def plan_text(k: int) -> str:
    """What the instant model answers to "batch item K", in every framework."""
    steps = [
        {"step_id": str(i + 1), "description": "add one", "tool": "add_one", "arguments": {"value": k + i}}
        for i in range(2)
    ]
    return json.dumps({"goal": f"add one to {k}, twice", "steps": steps})


_ITEM = re.compile(r"batch item (\d+)")


def instant_model(prompt: str) -> str:
    return plan_text(int(_ITEM.findall(prompt)[-1]))


# --- Aeon ----------------------------------------------------------------------------------------------------------


def aeon_plugin() -> Any:
    """The instant model and the add_one tool, registered through hooks as a user's plugin would be (made on
    demand: the peers' processes never import Aeon)."""
    from pydantic import BaseModel

    from aeon_kernel import FunctionTool, LLMAdapter, LLMResponse, hookimpl

    class Args(BaseModel):
        value: int

    class Instant(LLMAdapter):
        model_id = "instant-by-request"

        def generate(
            self,
            prompt: str,
            system_prompt: str | None = None,
            max_tokens: int = 2048,
            temperature: float = 0.7,
            *,
            json_schema: dict[str, Any] | None = None,
        ) -> LLMResponse:
            return {"text": instant_model(prompt), "model": self.model_id}

    def add_one(**kwargs: Any) -> dict[str, int]:
        if TOOL_WAIT:
            time.sleep(TOOL_WAIT)
        return {"value": Args.model_validate(kwargs).value + 1}

    schema = {
        "type": "object",
        "properties": {"value": {"type": "integer"}},
        "required": ["value"],
        "additionalProperties": False,
    }

    class Plugin:
        @hookimpl
        def aeon_register_llm_adapters(self, register: Any) -> None:
            register("instant_batch", Instant)

        @hookimpl
        def aeon_register_tools(self, register: Any) -> None:
            register(
                "add_one",
                lambda: FunctionTool(
                    name="add_one",
                    description="Add one to a number.",
                    input_schema=schema,
                    output_schema=schema,
                    function=add_one,
                ),
            )

    return Plugin()


def aeon_engine(memory: str = "in_memory", tmp: Path | None = None) -> Any:
    from aeon_kernel import Engine
    from aeon_kernel.config import AeonConfig
    from aeon_kernel.testing.pytest_plugin import BUILTIN_PLUGINS

    config = AeonConfig().with_choice("llm", "instant_batch")
    builtins = [importlib.import_module(name) for name in BUILTIN_PLUGINS]
    if memory == "sqlite":
        assert tmp is not None
        builtins.append(importlib.import_module("aeon_plugins.sqlite_memory"))
        config = config.with_choice("memory", "sqlite", path=str(tmp / "memory.db"))
    return Engine(config, plugins=[*builtins, aeon_plugin()], autoload=False)


def aeon_answer(result: dict[str, Any]) -> int:
    assert result["status"] == "completed", result["message"]
    return int(result["answer"]["value"])


def run_aeon(n: int, concurrency: int, offset: int = 0) -> None:
    engine = _shared.setdefault("aeon", aeon_engine())
    for index, result in engine.map((request(offset + k) for k in range(n)), concurrency=concurrency):
        assert aeon_answer(result) == offset + index + 2


def run_aeon_ray(n: int, concurrency: int, offset: int = 0) -> None:
    """``RayExecutor.map`` on a local Ray cluster of 2 CPUs started by this process: ``concurrency`` workers,
    each with its own Engine, the plugin imported by name (``batch:PLUGIN``)."""
    executor = _shared.get("aeon_ray")
    if executor is None:
        from aeon_kernel import Engine
        from aeon_kernel.config import AeonConfig
        from aeon_kernel.testing.pytest_plugin import BUILTIN_PLUGINS
        from aeon_plugins.ray import RayExecutor

        # the cluster's processes inherit these: the workers import this file as `batch` and build its plugin
        os.environ.update(
            AEON_BENCH_BATCH_PLUGIN="1",
            AEON_BENCH_TOOL_WAIT=str(TOOL_WAIT),
            PYTHONPATH=os.pathsep.join(filter(None, [str(BENCH), os.environ.get("PYTHONPATH")])),
        )
        # the workers' template (nothing is built here): the built-ins by name, and this file's plugin
        template = Engine(
            AeonConfig().with_choice("llm", "instant_batch"),
            plugins=[importlib.import_module(name) for name in BUILTIN_PLUGINS],
            autoload=False,
        )
        executor = RayExecutor(template, concurrency, num_cpus=2, plugins=["batch:PLUGIN"])
        started = time.perf_counter()
        executor.start()
        _shared["ray_startup_s"] = round(time.perf_counter() - started, 2)
        _shared["aeon_ray"] = executor
    for index, result in executor.map(request(offset + k) for k in range(n)):
        assert aeon_answer(result) == offset + index + 2


def descendants_rss_bytes() -> int:
    """The RSS of every process below this one (Ray's raylet, GCS and workers)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = dict(
                line.split(":", 1) for line in (entry / "status").read_text().splitlines() if ":" in line
            )
        except OSError:
            continue
        children.setdefault(int(fields["PPid"]), []).append(int(entry.name))
        rss[int(entry.name)] = int(fields.get("VmRSS", "0 kB").split()[0]) * 1024
    total, todo = 0, list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo += children.get(pid, [])
    return total


def run_aeon_loop(n: int, concurrency: int, offset: int = 0) -> None:
    """The baseline: the same runs one after another with ``engine.run``, no executor."""
    engine = _shared.setdefault("aeon", aeon_engine())
    for k in range(n):
        assert aeon_answer(engine.run(request(offset + k))) == offset + k + 2


# --- the peers -----------------------------------------------------------------------------------------------------

_shared: dict[str, Any] = {}


def _peer_models() -> tuple[Any, Any]:
    from pydantic import BaseModel

    class Step(BaseModel):
        step_id: str
        description: str
        tool: str
        arguments: dict[str, int]

    class Plan(BaseModel):
        goal: str
        steps: list[Step]

    class Args(BaseModel):
        value: int

    return Plan, Args


def langgraph_graph() -> Any:
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    Plan, Args = _peer_models()

    class State(TypedDict, total=False):
        request: str
        plan: Any
        index: int
        result: int

    def plan(state: State) -> dict[str, Any]:
        return {"plan": Plan.model_validate(json.loads(instant_model(state["request"]))), "index": 0}

    def tool(state: State) -> dict[str, Any]:
        step = state["plan"].steps[state["index"]]
        if TOOL_WAIT:
            time.sleep(TOOL_WAIT)
        return {"result": Args.model_validate(step.arguments).value + 1, "index": state["index"] + 1}

    def route(state: State) -> str:
        return "tool" if state["index"] < len(state["plan"].steps) else END

    globals()["State"] = State  # LangGraph reads the nodes' type hints, which name it, from this module
    builder = StateGraph(State)
    builder.add_node("plan", plan)
    builder.add_node("tool", tool)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "tool")
    builder.add_conditional_edges("tool", route, ["tool", END])
    return builder.compile()


def run_langgraph(n: int, concurrency: int, offset: int = 0) -> None:
    graph = _shared.setdefault("langgraph", langgraph_graph())
    inputs = [{"request": request(offset + k)} for k in range(n)]
    outputs = graph.batch(inputs, {"max_concurrency": concurrency})
    assert [out["result"] for out in outputs] == [offset + k + 2 for k in range(n)]


def pydantic_graph_graph() -> Any:
    from dataclasses import dataclass

    from pydantic_graph import BaseNode, End, GraphBuilder, GraphRunContext, StepContext

    Plan, Args = _peer_models()

    @dataclass
    class State:
        request: str
        plan: Any = None
        index: int = 0

    @dataclass
    class Tool(BaseNode[State, None, int]):
        async def run(self, ctx: GraphRunContext[State]) -> Tool | End[int]:
            state = ctx.state
            step = state.plan.steps[state.index]
            if TOOL_WAIT:
                await asyncio.sleep(TOOL_WAIT)  # its own way to wait: a blocking sleep would stop the loop
            value = Args.model_validate(step.arguments).value + 1
            state.index += 1
            return Tool() if state.index < len(state.plan.steps) else End(value)

    async def plan(ctx: StepContext[State, None, None]) -> Tool:
        ctx.state.plan = Plan.model_validate(json.loads(instant_model(ctx.state.request)))
        return Tool()

    # pydantic-graph reads the nodes' type hints (edges) in this module's namespace: the names go there
    globals().update(
        State=State, Tool=Tool, End=End, GraphRunContext=GraphRunContext, StepContext=StepContext
    )
    builder = GraphBuilder(state_type=State, output_type=int)
    start = builder.step(plan)
    builder.add(builder.edge_from(builder.start_node).to(start), builder.node(Tool))
    return builder.build(), State


def run_pydantic_graph(n: int, concurrency: int, offset: int = 0) -> None:
    graph, State = _shared.setdefault("pydantic_graph", pydantic_graph_graph())

    async def main() -> list[int]:
        gate = asyncio.Semaphore(concurrency)

        async def one(k: int) -> int:
            async with gate:
                return int(await graph.run(state=State(request(offset + k))))

        return await asyncio.gather(*(one(k) for k in range(n)))

    assert asyncio.run(main()) == [offset + k + 2 for k in range(n)]


RUNNERS = {
    "aeon": run_aeon,
    "aeon_loop": run_aeon_loop,
    "aeon_ray": run_aeon_ray,
    "langgraph": run_langgraph,
    "pydantic_graph": run_pydantic_graph,
}


def child(framework: str, n: int, concurrency: int, tool_wait: float) -> None:
    """One case in this (fresh) process: warm up, then time ``n`` requests; print the row as JSON."""
    global TOOL_WAIT
    TOOL_WAIT = tool_wait
    runner = RUNNERS[framework]
    runner(WARMUP, concurrency, offset=10**6)
    before = rss_bytes()
    started = time.perf_counter()
    runner(n, concurrency)
    wall = time.perf_counter() - started
    row = {
        "framework": framework,
        "concurrency": concurrency,
        "tool_wait_s": tool_wait,
        "n": n,
        "wall_s": round(wall, 3),
        "runs_per_s": round(n / wall, 1),
        "rss_before_mb": round(before / MB, 1),
        "peak_rss_mb": round(peak_rss_bytes() / MB, 1),
    }
    if framework == "aeon_ray":
        row["ray_startup_s"] = _shared["ray_startup_s"]
        row["ray_processes_rss_mb"] = round(descendants_rss_bytes() / MB, 1)
        _shared["aeon_ray"].shutdown()
    print(json.dumps(row))


def throughput(frameworks: list[str], n: int, levels: list[int], tool_wait: float) -> list[dict[str, Any]]:
    rows = []
    for concurrency in levels:
        for framework in frameworks:
            if framework == "aeon_loop" and concurrency != levels[0]:
                continue
            proc = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    framework,
                    "--n",
                    str(n),
                    "--concurrency",
                    str(concurrency),
                    "--tool-wait",
                    str(tool_wait),
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if proc.returncode != 0:
                print(f"{framework} c={concurrency} failed:\n{proc.stderr[-2000:]}", flush=True)
                continue
            row = json.loads(proc.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(
                f"  {framework:15} c={concurrency}  {row['runs_per_s']:>8.1f} runs/s  "
                f"peak RSS {row['peak_rss_mb']:>6.1f} MB (before {row['rss_before_mb']:.1f})"
                + (
                    f"  Ray processes {row['ray_processes_rss_mb']:.0f} MB, start-up {row['ray_startup_s']} s"
                    if "ray_startup_s" in row
                    else ""
                ),
                flush=True,
            )
    return rows


# --- memory across a long batch --------------------------------------------------------------------------------------


def memory_child(n: int, memory: str) -> None:
    """``engine.map`` over ``n`` requests at concurrency 4; RSS sampled every tenth."""
    with tempfile.TemporaryDirectory() as tmp, aeon_engine(memory, Path(tmp)) as engine:
        samples = {"start": rss_bytes()}
        every = max(1, n // 10)
        started = time.perf_counter()
        for done, (index, result) in enumerate(engine.map((request(k) for k in range(n)), concurrency=4), 1):
            assert aeon_answer(result) == index + 2
            if done % every == 0 or done == 1000:
                samples[str(done)] = rss_bytes()
        wall = time.perf_counter() - started
    print(
        json.dumps(
            {
                "path": f"engine.map, {memory} memory",
                "n": n,
                "wall_s": round(wall, 1),
                "runs_per_s": round(n / wall, 1),
                "rss_mb": {k: round(v / MB, 1) for k, v in samples.items()},
                "peak_rss_mb": round(peak_rss_bytes() / MB, 1),
            }
        )
    )


def memory_cli(n: int, no_log: bool = True, memory: str = "in_memory") -> dict[str, Any]:
    """``aeon batch`` on ``n`` lines, its plugin installed as an entry point; the child's RSS sampled. With
    ``no_log`` False it records every run as it does by default (SQLite state and artifacts, a JSONL log)."""
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        info = tmp / "site" / "aeon_bench_batch-1.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: aeon-bench-batch\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text("[aeon]\nbench_batch = batch:PLUGIN\n")
        toml = '[llm]\nuse = "instant_batch"\n'
        if memory == "sqlite":
            toml += '[memory]\nuse = "sqlite"\npath = "memory.db"\n'
        (tmp / "aeon.toml").write_text(toml)
        with (tmp / "requests.jsonl").open("w") as lines:
            for k in range(n):
                lines.write(json.dumps({"id": k, "request": request(k)}) + "\n")
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(tmp / "site"), str(BENCH), *sys.path]),
            "AEON_BENCH_BATCH_PLUGIN": "1",
            "AEON_DATA_DIR": str(tmp / "data"),
        }
        command = [sys.executable, "-m", "aeon_cli", "batch", "requests.jsonl", "--out", "out.jsonl"]
        started = time.perf_counter()
        proc = subprocess.Popen(
            [*command, "--concurrency", "4", *(["--no-log"] if no_log else [])],
            cwd=tmp,
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        samples: dict[str, float] = {}
        out = tmp / "out.jsonl"
        while proc.poll() is None:
            time.sleep(0.5)
            try:
                with open(f"/proc/{proc.pid}/status") as status:
                    fields = dict(line.split(":", 1) for line in status if ":" in line)
                done = sum(1 for _ in out.open()) if out.exists() else 0
            except (OSError, ValueError):
                continue
            if "VmRSS" not in fields:  # it has exited (a zombie until waited for)
                continue
            samples[str(done)] = int(fields["VmRSS"].split()[0]) / 1024
            samples["peak"] = int(fields["VmHWM"].split()[0]) / 1024
        wall = time.perf_counter() - started
        stderr = proc.stderr.read() if proc.stderr else ""
        lines_out = sum(1 for _ in out.open())
        assert proc.returncode == 0 and lines_out == n, (proc.returncode, lines_out, stderr[-2000:])
    keys = [k for k in samples if k != "peak" and int(k) >= min(1000, n // 10)]  # warmed up: 1,000 done
    return {
        "path": ("aeon batch --no-log" if no_log else "aeon batch (recording every run)")
        + f", {memory} memory",
        "n": n,
        "wall_s": round(wall, 1),
        "runs_per_s": round(n / wall, 1),
        "rss_mb": {k: round(samples[k], 1) for k in (keys[0], keys[len(keys) // 2], keys[-1])}
        if keys
        else {},
        "peak_rss_mb": round(samples.get("peak", 0.0), 1),
    }


def cli_executor(n: int, executor: str, concurrency: int) -> dict[str, Any]:
    """``aeon batch --no-log --executor EXECUTOR --concurrency C`` on ``n`` lines (the plugin an entry point the
    Ray workers see too: the cluster the command starts inherits its environment)."""
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        info = tmp / "site" / "aeon_bench_batch-1.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: aeon-bench-batch\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text("[aeon]\nbench_batch = batch:PLUGIN\n")
        (tmp / "aeon.toml").write_text('[llm]\nuse = "instant_batch"\n')
        with (tmp / "requests.jsonl").open("w") as lines:
            for k in range(n):
                lines.write(json.dumps({"id": k, "request": request(k)}) + "\n")
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(tmp / "site"), str(BENCH), *sys.path]),
            "AEON_BENCH_BATCH_PLUGIN": "1",
            "AEON_BENCH_TOOL_WAIT": str(TOOL_WAIT),
            "AEON_DATA_DIR": str(tmp / "data"),
        }
        env.pop("RAY_ADDRESS", None)
        command = [sys.executable, "-m", "aeon_cli", "batch", "requests.jsonl", "--out", "out.jsonl"]
        command += ["--no-log", "--executor", executor, "--concurrency", str(concurrency)]
        started = time.perf_counter()
        proc = subprocess.run(command, cwd=tmp, env=env, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
        lines_out = sum(1 for _ in (tmp / "out.jsonl").open()) if (tmp / "out.jsonl").exists() else 0
        assert proc.returncode == 0 and lines_out == n, (proc.returncode, lines_out, proc.stderr[-2000:])
    rate = re.search(r"batch done: .* \(([\d.]+)/s\)", proc.stderr)
    return {
        "path": f"aeon batch --no-log --executor {executor}",
        "concurrency": concurrency,
        "n": n,
        "wall_s": round(wall, 2),
        "runs_per_s": float(rate.group(1)) if rate else None,
    }


def ray_comparison(n: int, levels: list[int], tool_wait: float) -> dict[str, Any]:
    """Ray workers against the local executor: ``RayExecutor.map`` vs ``engine.map``, then ``aeon batch``."""
    global TOOL_WAIT
    TOOL_WAIT = tool_wait  # for cli_executor's processes
    api = throughput(["aeon", "aeon_ray"], n, levels, tool_wait)
    cli = []
    for concurrency in levels:
        for executor in ("local", "ray"):
            cli.append(cli_executor(n, executor, concurrency))
            print(json.dumps(cli[-1]), flush=True)
    return {"api": api, "cli": cli}


def memory(n: int) -> list[dict[str, Any]]:
    rows = []
    for backend in ("in_memory", "sqlite"):
        proc = subprocess.run(
            [sys.executable, __file__, "--memory-child", backend, "--n", str(n)],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            print(f"memory {backend} failed:\n{proc.stderr[-2000:]}", flush=True)
            continue
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    rows.append(memory_cli(n, memory="sqlite"))
    print(json.dumps(rows[-1]), flush=True)
    return rows


# --- the embedded model --------------------------------------------------------------------------------------------


def model(requests: int, levels: list[int], parallel: int = 1) -> list[dict[str, Any]]:
    from local_model import CASES, states

    from aeon_kernel import Engine, LLMAdapter
    from aeon_kernel.config import AeonConfig

    cases = [case for case in CASES if case.kind == "arithmetic"][:requests]
    while len(cases) < requests:
        cases += cases[: requests - len(cases)]

    class Timed(LLMAdapter):
        """The model, timed inside the client's lock: the seconds it was busy."""

        def __init__(self, inner: LLMAdapter) -> None:
            self.inner, self.model_id = inner, inner.model_id
            self.supports_json_schema = inner.supports_json_schema
            self.busy, self.calls = 0.0, 0
            self._lock = threading.Lock()

        def generate(self, prompt: str, *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return self.inner.generate(prompt, *args, **kwargs)
            finally:
                with self._lock:
                    self.busy += time.perf_counter() - started
                    self.calls += 1

    rows = []
    with Engine(AeonConfig().with_choice("llm", "llama_cpp", parallel=parallel)) as engine:
        engine.build_selected()
        timed = Timed(engine.llm.adapter)
        engine.llm.adapter = timed
        engine.run("calculate the sum of 1 and 2", ttl=12)  # warm-up: prompt caches, grammars
        for concurrency in levels:
            timed.busy, timed.calls = 0.0, 0
            started = time.perf_counter()
            seconds, right = [], 0
            for index, result in engine.map(
                (case.request for case in cases), concurrency=concurrency, ttl=12
            ):
                answer = (
                    result["answer"] if isinstance(result["answer"], str) else json.dumps(result["answer"])
                )
                right += bool(cases[index].expect and states(answer, cases[index].expect))
                seconds.append(sum(o.get("duration_ms", 0) for o in result["final_state"]["llm_outputs"]))
            wall = time.perf_counter() - started
            row = {
                "parallel": parallel,
                "concurrency": concurrency,
                "requests": len(cases),
                "wall_s": round(wall, 1),
                "requests_per_min": round(len(cases) / wall * 60, 1),
                "model_busy_s": round(timed.busy, 1),
                "model_share_of_wall": round(timed.busy / wall, 3),
                "model_calls": timed.calls,
                "right_answers": right,
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=2000, help="requests per throughput case (default 2,000)")
    parser.add_argument(
        "--tool-wait", type=float, default=0.0, help="seconds each tool call waits, as I/O would (default 0)"
    )
    parser.add_argument("--concurrency", default="1,2,4,8", help="levels, comma-separated")
    parser.add_argument(
        "--only", help=f"frameworks, comma-separated (default: aeon_loop,{','.join(FRAMEWORKS)})"
    )
    parser.add_argument("--memory", type=int, metavar="N", help="only the memory check, on N requests")
    parser.add_argument(
        "--cli", type=int, metavar="N", help="only `aeon batch` on N requests, recording every run and not"
    )
    parser.add_argument("--model", action="store_true", help="only the embedded-model check")
    parser.add_argument("--requests", type=int, default=6, help="requests for --model (default 6)")
    parser.add_argument(
        "--parallel",
        type=int,
        default=1,
        help="--model: [llm] parallel, the contexts decoding at once (default 1)",
    )
    parser.add_argument(
        "--ray", action="store_true", help="only Ray against the local executor (concurrency default 1,2,4)"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--memory-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ray and args.concurrency == parser.get_default("concurrency"):
        args.concurrency = "1,2,4"
    levels = [int(level) for level in args.concurrency.split(",")]
    if args.child:
        child(args.child, args.n, levels[0], args.tool_wait)
        return
    if args.memory_child:
        memory_child(args.n, args.memory_child)
        return
    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count()}
    if args.ray:
        key = "ray" if not args.tool_wait else "ray_tool_wait"
        results[key] = {"tool_wait_s": args.tool_wait, **ray_comparison(args.n, levels, args.tool_wait)}
    elif args.model:
        results["model"] = model(args.requests, levels, args.parallel)
    elif args.cli:
        results["cli"] = [memory_cli(args.cli, no_log=False), memory_cli(args.cli, no_log=True)]
        print("\n".join(json.dumps(row) for row in results["cli"]))
    elif args.memory:
        results["memory"] = memory(args.memory)
    else:
        frameworks = args.only.split(",") if args.only else ["aeon_loop", *FRAMEWORKS]
        key = "throughput" if not args.tool_wait else "throughput_tool_wait"
        results[key] = throughput(frameworks, args.n, levels, args.tool_wait)
    target = BENCH / "batch.json"
    previous = json.loads(target.read_text()) if target.exists() else {}
    target.write_text(json.dumps({**previous, **results}, indent=2) + "\n")


#: the plugin `aeon batch` loads through its entry point (``batch:PLUGIN``) in the memory check
PLUGIN = aeon_plugin() if os.environ.get("AEON_BENCH_BATCH_PLUGIN") else None

if __name__ == "__main__":
    main()
