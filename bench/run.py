"""Aeon's orchestration overhead side by side with LangGraph, pydantic-graph and Haystack (and a bare loop).

    python bench/run.py            # full: W1 N = 10, 100, 1000; 7 repetitions; W4 with 1,000 runs
    python bench/run.py --quick    # fewer repetitions, N up to 100
    python bench/run.py --smoke    # one repetition of tiny sizes, W4 with 20 runs (CI: does the code still work)
    python bench/run.py --only aeon,langgraph     # some frameworks only
    python bench/run.py --profile  # cProfile of Aeon on W1 N=100: the top functions by cumulative time
    python bench/run.py --profile W6   # ... on the 100-node flow chain (W5: the fan-out/merge flow; W7: K=1,000;
                                       #     W8: the map over 1,000 items; W9: the 100-round loop)
    python bench/run.py --workloads W8,W9   # the map and the loop only (issue 30)

Peers come with ``pip install -e '.[bench]'``; one that is not installed is reported as such and skipped.
In every workload the model is an instant deterministic function returning prepared JSON, and every framework
does the same node work (``json.loads``, a pydantic model, a trivial tool), so only orchestration is timed.

W1 linear: a plan of N tool steps (the peers: a chain of N nodes); µs per step, and build time. The same rows
    hold ``floor``: ``bench/required_work.py``'s loop (what spec 000 requires of a tool step, no orchestration).
W2 plan loop: the model plans 10 steps, each step is a thought (an instant call) then the tool; µs per cycle,
    with the persistence variants and the bytes they write per step.
W3 cold start: fresh-process wall time of importing each framework (and ``aeon --help``); Aeon's bytecode is
    written first, as ``pip install`` writes the peers'.
W4 many runs: 1,000 W2 runs at once in a process pool, one worker per core; runs/s, peak RSS, RSS growth.
W5 flow fan-out/merge: start → split → 10 workers → merge → exit (Aeon: a spec 004 flow; the peers: the same 14
    nodes, their own fan-out and join); µs per node, build time, history (or checkpoint) bytes per node.
W6 flow chain: start → 98 linear nodes → exit, 100 nodes; the same columns.
W7 wide fan-out: W5's shape with K = 100 and K = 1,000 workers (smoke: 20 and 50); µs per branch (a run's time
    over K), build time, history bytes per node. One variant per framework (LangGraph: plain edges).
W8 map: start → split → work, once per item → merge → exit: one ``work`` subtask per item of a list (a dynamic
    fan-out; K = 1,000 items, smoke: 20; LangGraph: ``Send``); µs per node (a run's time over K + 4), build time,
    history bytes per node. A peer that cannot express it has a row saying so (``n/a``) instead of a timing.
W9 loop: start → 100 x (step → check) → exit, the decision going back to step until the count is 100 (202
    nodes executed; LangGraph, pydantic-graph, Haystack: a cycle); the same columns.

Frameworks alternate within each repetition (the order rotates), after a warm-up. The table is printed and
written as JSON (``bench/results.json`` by default). Timings are never asserted anywhere.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.util
import json
import operator
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
FRAMEWORKS = {  # name -> (workload module, the package that must be installed)
    "aeon": ("workloads.aeon_w", "aeon_kernel"),
    "langgraph": ("workloads.langgraph_w", "langgraph"),
    "pydantic_graph": ("workloads.pydantic_graph_w", "pydantic_graph"),
    "haystack": ("workloads.haystack_w", "haystack"),
    "bare": ("workloads.bare", "pydantic"),
}
#: W5 to W9 (flows): name -> workload module (the same packages as FRAMEWORKS)
FLOW_MODULES = {
    "aeon": "workloads.flows_aeon",
    "langgraph": "workloads.flows_langgraph",
    "pydantic_graph": "workloads.flows_pydantic_graph",
    "haystack": "workloads.flows_haystack",
    "bare": "workloads.flows_bare",
}
#: flow workload -> the function of every flow module that builds its case (W7: W5's, at each of the mode's widths;
#: W8: at the mode's ``w8_items``). A module leaves out of its ``VARIANTS`` a workload it cannot express, and says
#: why in ``NOT_EXPRESSIBLE``.
FLOW_WORKLOADS = {"W5": "fanout", "W6": "chain", "W7": "fanout", "W8": "map_items", "W9": "loop"}
PEERS = ("langgraph", "pydantic_graph", "haystack")
MISSING = "not installed: pip install -e '.[bench]'"
ENV = {**os.environ, "HAYSTACK_TELEMETRY_ENABLED": "False"}
COMPARE = {"<": operator.lt, "<=": operator.le, ">=": operator.ge}


@dataclass(frozen=True)
class Mode:
    name: str
    w1_sizes: tuple[int, ...]
    reps: int  # timed samples per case
    warmup: int  # untimed runs per case first
    w1_steps_per_sample: int  # small N repeats the run within a sample, so a sample is long enough to time
    #                           (W5 to W9 too: runs per sample = this // nodes per run)
    w2_runs: int  # executions of the 10-step plan per W2 sample
    w3_reps: int
    w4_runs: int
    w4_reps: int  # pools per framework (each a fresh pool of fresh workers)
    budget_s: float  # a case that has taken this long stops sampling (it keeps at least 3 samples)
    w7_widths: tuple[int, ...]  # W7: the fan-out widths K (issue 31: 100 and 1,000)
    w8_items: int  # W8: the items the map hands out (issue 30: 1,000)


MODES = {
    "full": Mode(
        "full",
        (10, 100, 1000),
        reps=7,
        warmup=2,
        w1_steps_per_sample=2000,
        w2_runs=20,
        w3_reps=10,
        w4_runs=1000,
        w4_reps=3,
        budget_s=60.0,
        w7_widths=(100, 1000),
        w8_items=1000,
    ),
    "quick": Mode(
        "quick",
        (10, 100),
        reps=5,
        warmup=1,
        w1_steps_per_sample=1000,
        w2_runs=20,
        w3_reps=5,
        w4_runs=1000,
        w4_reps=2,
        budget_s=20.0,
        w7_widths=(100, 1000),
        w8_items=1000,
    ),
    "smoke": Mode(
        "smoke",
        (10,),
        reps=1,
        warmup=0,
        w1_steps_per_sample=10,
        w2_runs=2,
        w3_reps=1,
        w4_runs=20,
        w4_reps=1,
        budget_s=5.0,
        w7_widths=(20, 50),
        w8_items=20,
    ),
}


# --- framework modules -------------------------------------------------------------------------------------------


def load_frameworks(names: list[str]) -> tuple[dict[str, Any], dict[str, str | None]]:
    """Import each framework's workload module; a peer whose package is missing is left out (version None)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    modules, versions = {}, {}
    for name in names:
        module_name, package = FRAMEWORKS[name]
        if importlib.util.find_spec(package) is None:
            versions[name] = None
            continue
        modules[name] = importlib.import_module(module_name)
        versions[name] = modules[name].version()
    return modules, versions


def rotated(items: list[Any], rep: int) -> list[Any]:
    shift = rep % len(items) if items else 0
    return items[shift:] + items[:shift]


def summary(samples: list[float]) -> dict[str, Any]:
    return {
        "median": statistics.median(samples),
        "min": min(samples),
        "max": max(samples),
        "samples": samples,
    }


# --- in-process workloads (W1, W2): alternate, warm up, repeat --------------------------------------------------


@dataclass
class Slot:
    """One case being sampled: its framework and variant, the built Case, how often ``run()`` goes per sample,
    and what a run's time is divided by (``per_run``: the case's ``units`` unless given; W7: its K branches)."""

    row: dict[str, Any]
    case: Any
    runs_per_sample: int
    per_run: int | None = None
    runs_done: int = 0
    spent: float = 0.0
    samples: list[float] | None = None

    def run(self, times: int) -> Any:
        result = None
        for _ in range(times):
            result = self.case.run()
        self.runs_done += times
        return result


def sample_all(slots: list[Slot], mode: Mode) -> None:
    """Check every case once, warm it up, then take ``mode.reps`` samples, alternating between cases."""
    live = []
    for slot in slots:
        try:
            slot.case.check(slot.run(1))
            slot.run(mode.warmup)
            slot.samples = []
            live.append(slot)
        except Exception as exc:
            _failed(slot, exc)
    for rep in range(mode.reps):
        for slot in rotated(live, rep):
            assert slot.samples is not None
            if "error" in slot.row or (len(slot.samples) >= 3 and slot.spent > mode.budget_s):
                continue
            gc.collect()
            try:
                started = time.perf_counter()
                result = slot.run(slot.runs_per_sample)
                elapsed = time.perf_counter() - started
                slot.spent += elapsed
                per_run = slot.per_run or slot.case.units
                slot.samples.append(elapsed * 1e6 / (slot.runs_per_sample * per_run))
                if rep == mode.reps - 1:
                    slot.case.check(result)  # the timed runs were right too
            except Exception as exc:
                _failed(slot, exc)
    for slot in live:
        if "error" not in slot.row and slot.samples:
            slot.row.update(summary(slot.samples))
            if slot.case.bytes_written is not None:
                slot.row["bytes_per_step"] = slot.case.bytes_written() / (slot.runs_done * slot.case.units)
            if slot.case.history_bytes is not None:  # one more run, untimed
                try:
                    slot.row["history_bytes_per_node"] = slot.case.history_bytes()
                except Exception as exc:
                    _failed(slot, exc)
        slot.case.close()


def _failed(slot: Slot, exc: Exception) -> None:
    traceback.print_exception(exc)
    slot.row["error"] = f"{type(exc).__name__}: {exc}"


#: W1's row of ``bench/required_work.py`` (it needs Aeon's models: only when Aeon runs too)
FLOOR = "floor"


def floor_case(n: int) -> Any:
    """``bench/required_work.py``'s ``run`` on W1's plan of ``n`` steps, as a case: the yardstick of issue 31's
    "at most twice the floor". Its plan is parsed once, here, as the script does (Aeon's W1 parses the JSON text
    in every run)."""
    import required_work
    from workloads import aeon_w, common
    from workloads.common import Case

    from aeon_kernel.models import Plan

    plan, tool = Plan.model_validate(json.loads(common.w1_plan(n))), aeon_w.add_one_tool()
    expected = common.w1_expected_total(n)

    def check(total: int) -> None:
        assert total == expected, total

    return Case(run=lambda: required_work.run(plan, tool), units=n, check=check)


def run_w1(modules: dict[str, Any], versions: dict[str, Any], mode: Mode) -> list[dict[str, Any]]:
    rows, slots = [], []
    names = [*versions, *([FLOOR] if "aeon" in modules else [])]
    for n in mode.w1_sizes:
        for name in names:
            variant = "required work" if name == FLOOR else "plain"
            row: dict[str, Any] = {"workload": "W1", "n": n, "framework": name, "variant": variant}
            rows.append(row)
            if name != FLOOR and name not in modules:
                row["error"] = MISSING
                continue
            build_case = floor_case if name == FLOOR else modules[name].w1
            try:  # build time: the median of a few builds (the last one is kept and run)
                build, case = [], None
                for _ in range(1 if mode.name == "smoke" else 3):
                    if case is not None:
                        case.close()
                    started = time.perf_counter()
                    case = build_case(n)
                    build.append((time.perf_counter() - started) * 1000)
                row["build_ms"] = statistics.median(build)
            except Exception as exc:
                traceback.print_exception(exc)
                row["error"] = f"{type(exc).__name__}: {exc}"
                continue
            slots.append(Slot(row, case, max(1, mode.w1_steps_per_sample // n)))
    sample_all(slots, mode)
    return rows


def run_w2(modules: dict[str, Any], versions: dict[str, Any], mode: Mode, tmp: Path) -> list[dict[str, Any]]:
    rows, slots = [], []
    for name in versions:
        variants = modules[name].W2_VARIANTS if name in modules else ("plain",)
        for variant in variants:
            row: dict[str, Any] = {"workload": "W2", "framework": name, "variant": variant}
            rows.append(row)
            if name not in modules:
                row["error"] = MISSING
                continue
            where = tmp / f"{name}-{variant}"
            where.mkdir()
            try:
                slots.append(Slot(row, modules[name].w2(variant, where), mode.w2_runs))
            except Exception as exc:
                traceback.print_exception(exc)
                row["error"] = f"{type(exc).__name__}: {exc}"
    sample_all(slots, mode)
    return rows


# --- W5 to W9: flows ----------------------------------------------------------------------------------------------


def load_flow_modules(versions: dict[str, Any]) -> dict[str, Any]:
    """The flow workload module of each framework that is installed (``versions`` from load_frameworks)."""
    return {
        name: importlib.import_module(FLOW_MODULES[name])
        for name, version in versions.items()
        if version is not None and name in FLOW_MODULES
    }


def run_flow(
    workload: str, modules: dict[str, Any], versions: dict[str, Any], mode: Mode, tmp: Path
) -> list[dict[str, Any]]:
    """W5 to W9: every framework's variants, each built once (build time: the median of a few builds).

    W7 runs W5's fan-out at each of ``mode.w7_widths`` (rows keyed by ``width``, K) and times µs per branch (a
    run's time over K, ``"per": "branch"``); the others time µs per node (W8, the map over ``mode.w8_items``
    items: rows carry ``items``). A framework that cannot express the workload gets a row with ``na``, the reason.
    """
    rows, slots = [], []
    widths: tuple[int | None, ...] = mode.w7_widths if workload == "W7" else (None,)
    for width in widths:
        for name in versions:
            if name not in FLOW_MODULES:
                continue
            if name in modules and workload not in modules[name].VARIANTS:
                reason = getattr(modules[name], "NOT_EXPRESSIBLE", {}).get(workload, "not written for it")
                rows.append({"workload": workload, "framework": name, "variant": "-", "na": reason})
                continue
            variants = modules[name].VARIANTS[workload] if name in modules else ("plain",)
            for variant in variants:
                row: dict[str, Any] = {"workload": workload, "framework": name, "variant": variant}
                if width is not None:
                    row.update(width=width, per="branch")
                if workload == "W8":
                    row["items"] = mode.w8_items
                rows.append(row)
                if name not in modules:
                    row["error"] = MISSING
                    continue
                where = tmp / f"{workload}-{name}-{variant}{'' if width is None else f'-{width}'}"
                where.mkdir()
                build_case = getattr(modules[name], FLOW_WORKLOADS[workload])
                options: dict[str, int] = {} if width is None else {"width": width}
                if workload == "W8":
                    options["items"] = mode.w8_items
                try:
                    build, case = [], None
                    for _ in range(1 if mode.name == "smoke" else 3):
                        if case is not None:
                            case.close()
                        started = time.perf_counter()
                        case = build_case(variant, where, **options)
                        build.append((time.perf_counter() - started) * 1000)
                    row["build_ms"] = statistics.median(build)
                    row["nodes"] = case.units
                except Exception as exc:
                    traceback.print_exception(exc)
                    row["error"] = f"{type(exc).__name__}: {exc}"
                    continue
                runs = max(1, mode.w1_steps_per_sample // case.units)
                slots.append(Slot(row, case, runs, per_run=width))
    sample_all(slots, mode)
    return rows


# --- W3: cold start -----------------------------------------------------------------------------------------------


AEON_PACKAGES = ("aeon_kernel", "aeon_plugins", "aeon_cli")


def _compile_aeon() -> None:
    """Write the bytecode of Aeon's packages, as ``pip install`` does for the peers' (their site-packages hold it).
    An editable checkout has none, and where PYTHONDONTWRITEBYTECODE is set (as on the project's machines) every
    fresh process would compile Aeon's sources again: W3 would time the compiler, not the import."""
    packages = [Path(importlib.import_module(name).__file__ or "").parent for name in AEON_PACKAGES]
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", *map(str, packages)], check=True, capture_output=True
    )


def run_w3(modules: dict[str, Any], versions: dict[str, Any], mode: Mode) -> list[dict[str, Any]]:
    if "aeon" in modules:
        _compile_aeon()
    commands: list[tuple[dict[str, Any], list[str]]] = []
    floor = {"workload": "W3", "framework": "python", "variant": "python -c pass"}
    commands.append((floor, [sys.executable, "-c", "pass"]))
    rows = [floor]
    for name in versions:
        if name not in modules:
            rows.append({"workload": "W3", "framework": name, "variant": "import", "error": MISSING})
            continue
        module = modules[name]
        for label, code in module.IMPORTS.items():
            commands.append(
                ({"workload": "W3", "framework": name, "variant": label}, [sys.executable, "-c", code])
            )
        for label, argv in module.COMMANDS.items():
            commands.append(({"workload": "W3", "framework": name, "variant": label}, argv))
    rows += [row for row, _ in commands[1:]]
    samples: dict[int, list[float]] = {i: [] for i in range(len(commands))}
    for row, argv in commands:  # warm the disk cache, and check each command works
        done = subprocess.run(argv, env=ENV, capture_output=True, text=True)
        if done.returncode != 0:
            row["error"] = f"exit {done.returncode}: {done.stderr.strip()[-300:]}"
    for rep in range(mode.w3_reps):
        for i in rotated(list(samples), rep):
            row, argv = commands[i]
            if "error" in row:
                continue
            started = time.perf_counter()
            subprocess.run(argv, env=ENV, capture_output=True)
            samples[i].append((time.perf_counter() - started) * 1000)
    for i, (row, _) in enumerate(commands):
        if samples[i]:
            row.update(summary(samples[i]))
    return rows


# --- W4: many runs, each framework driven from a fresh process ----------------------------------------------------


def run_w4(modules: dict[str, Any], versions: dict[str, Any], mode: Mode) -> list[dict[str, Any]]:
    """Each sample is a fresh pool driven from a fresh process; frameworks alternate; growth is measured once."""
    rows = {name: {"workload": "W4", "framework": name, "variant": "process pool"} for name in versions}
    for name in versions:
        if name not in modules:
            rows[name]["error"] = MISSING
    live = [name for name in versions if name in modules]
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in live}
    for rep in range(mode.w4_reps):
        for name in rotated(live, rep):
            if "error" not in rows[name]:
                samples[name].append(_w4_child(rows[name], name, mode.w4_runs, "pool"))
    for name in live:
        row, done = rows[name], [s for s in samples[name] if s]
        if "error" in row or not done:
            continue
        rates = [s["runs_per_s"] for s in done]
        middle = sorted(done, key=lambda s: s["runs_per_s"])[len(done) // 2]
        row.update(middle)  # the median sample's wall time, start time and RSS
        row.update(
            runs_per_s=statistics.median(rates),
            runs_per_s_min=min(rates),
            runs_per_s_max=max(rates),
            peak_rss_mb=max(s["peak_rss_mb"] for s in done),
            failed=sum(s["failed"] for s in done),
            samples=rates,
        )
        row.update(_w4_child(row, name, mode.w4_runs, "growth"))
        if row["failed"]:
            row["error"] = f"{row['failed']} runs gave a wrong result"
    return list(rows.values())


def _w4_child(row: dict[str, Any], name: str, runs: int, what: str) -> dict[str, Any]:
    """Run ``many.pool_run`` or ``many.growth`` in a fresh process (this one has every framework imported)."""
    argv = [sys.executable, str(Path(__file__).resolve()), "--w4-child", name, what, str(runs)]
    done = subprocess.run(argv, env=ENV, capture_output=True, text=True)
    if done.returncode != 0:
        print(done.stderr, file=sys.stderr)
        row["error"] = f"exit {done.returncode}: {done.stderr.strip()[-300:]}"
        return {}
    return json.loads(done.stdout)


def w4_child(name: str, what: str, runs: int) -> None:
    sys.path.insert(0, str(BENCH))
    from workloads import many

    measure = {"pool": many.pool_run, "growth": many.growth}[what]
    print(json.dumps(measure(FRAMEWORKS[name][0], runs)))


# --- ratios, targets, the table -----------------------------------------------------------------------------------


def _find(rows: list[dict[str, Any]], **match: Any) -> dict[str, Any] | None:
    for row in rows:
        if all(row.get(k) == v for k, v in match.items()) and "median" in row:
            return row
    return None


def add_ratios(results: dict[str, list[dict[str, Any]]]) -> None:
    """Aeon's median over each row's (same workload and size; lower is better for Aeon below 1)."""
    for row in results["W1"]:
        aeon = _find(results["W1"], framework="aeon", n=row["n"])
        if aeon and "median" in row:
            row["aeon_ratio"] = aeon["median"] / row["median"]
    for row in results["W2"]:
        # Persistence is compared like for like: SqliteSaver against Aeon's SQLite store; the rest against
        # Aeon without persistence; Aeon's own variants against its plain run.
        variant = "sqlite" if row["variant"] == "sqlite" else "plain"
        aeon = _find(results["W2"], framework="aeon", variant=variant)
        if aeon and "median" in row:
            row["aeon_ratio"] = aeon["median"] / row["median"]
            if row["variant"] == "stream":  # what reading the run's events costs over engine.run
                row["stream_overhead"] = row["median"] / aeon["median"] - 1
    for workload in FLOW_WORKLOADS:
        for row in results.get(workload) or []:
            aeon = _find(results[workload], framework="aeon", width=row.get("width"))  # W7: the same K
            if aeon and "median" in row:
                row["aeon_ratio"] = aeon["median"] / row["median"]
    aeon_import = _find(results["W3"], framework="aeon", variant="user import")
    for row in results["W3"]:
        if aeon_import and "median" in row:
            row["aeon_ratio"] = aeon_import["median"] / row["median"]
    aeon_w4 = _find_w4(results["W4"], "aeon")
    for row in results["W4"]:
        if aeon_w4 and "runs_per_s" in row:
            row["aeon_ratio"] = aeon_w4["runs_per_s"] / row["runs_per_s"]  # here higher is better for Aeon


def _find_w4(rows: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    return next((r for r in rows if r["framework"] == name and "runs_per_s" in r), None)


def targets(results: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The issue's targets, from this one run.

    ``floor`` is the same ratio for ``bare`` (the node work in a plain loop, no orchestration at all): a target
    the floor itself misses cannot be met by any framework that does that work.
    """
    found = []

    def target(
        label: str,
        value: float | None,
        better: str,
        limit: float,
        against: str,
        floor: float | None = None,
        floor_label: str = "a bare loop",
    ) -> None:
        met = None if value is None else COMPARE[better](value, limit)
        found.append(
            {
                "target": label,
                "value": value,
                "limit": f"{better} {limit:g}",
                "against": against,
                "met": met,
                "floor": floor,
                "floor_label": floor_label,
            }
        )

    def ratio(row: dict[str, Any] | None, peer: dict[str, Any] | None, key: str = "median") -> float | None:
        return row[key] / peer[key] if row and peer else None

    for workload, key, variant in [("W1", "n", None), ("W2", None, "plain")]:
        sizes = sorted({r["n"] for r in results[workload]}) if key else [None]
        for n in sizes:
            match = {"n": n} if key else {"variant": variant}
            aeon = _find(results[workload], framework="aeon", **match)
            peers = [r for p in PEERS if (r := _find(results[workload], framework=p, **match))]
            best = min(peers, key=lambda r: r["median"], default=None)
            label = f"{workload}{f' N={n}' if n else ''}: Aeon / fastest peer"
            bare = _find(results[workload], framework="bare", **match)
            against = best["framework"] if best else "-"
            target(label, ratio(aeon, best), "<=", 0.4, against, ratio(bare, best))
    for n in sorted({r["n"] for r in results["W1"]}):  # issue 31: at most twice required_work.py's floor
        aeon, least = _find(results["W1"], framework="aeon", n=n), _find(results["W1"], framework=FLOOR, n=n)
        label = f"W1 N={n}: Aeon / required-work floor"
        target(label, ratio(aeon, least), "<=", 2.0, "bench/required_work.py (per step)")
    aeon_sql = _find(results["W2"], framework="aeon", variant="sqlite")
    lg_sql = _find(results["W2"], framework="langgraph", variant="sqlite")
    value = aeon_sql["median"] / lg_sql["median"] if aeon_sql and lg_sql else None
    target("W2: Aeon SQLite / LangGraph SqliteSaver", value, "<=", 0.1, "langgraph sqlite")
    pg_imp = _find(results["W3"], framework="pydantic_graph")
    python = _find(results["W3"], framework="python")
    floor = python["median"] if python and "median" in python else 0.0
    for variant in ("user import", "user import, no tool"):
        aeon_imp = _find(results["W3"], framework="aeon", variant=variant)
        value = None
        if aeon_imp and pg_imp and "median" in aeon_imp and "median" in pg_imp:
            value = (aeon_imp["median"] - floor) / (pg_imp["median"] - floor)
        model = _find(results["W3"], framework="aeon", variant="one pydantic model")
        model_ratio = (
            (model["median"] - floor) / (pg_imp["median"] - floor)
            if model and pg_imp and "median" in model
            else None
        )
        label = f"W3: {variant}, net of python / pydantic_graph's"
        if variant == "user import":
            target(label, value, "<=", 1.0, "pydantic_graph", model_ratio, "one pydantic model")
        else:
            target(label, value, "<=", 1.0, "pydantic_graph")
    aeon_w4, bare_w4 = _find_w4(results["W4"], "aeon"), _find_w4(results["W4"], "bare")
    peers_w4 = [r for p in PEERS if (r := _find_w4(results["W4"], p))]
    best_w4 = max(peers_w4, key=lambda r: r["runs_per_s"], default=None)
    against = best_w4["framework"] if best_w4 else "-"
    value, floor = ratio(aeon_w4, best_w4, "runs_per_s"), ratio(bare_w4, best_w4, "runs_per_s")
    target("W4: Aeon runs/s / best peer's", value, ">=", 10.0, against, floor)
    if aeon_w4 and best_w4:
        found.append(
            {
                "target": "W4: Aeon RSS growth < best peer's (MB)",
                "value": aeon_w4["growth_mb"],
                "limit": f"< {best_w4['growth_mb']:.1f}",
                "against": against,
                "met": aeon_w4["growth_mb"] < best_w4["growth_mb"],
                "floor": bare_w4["growth_mb"] if bare_w4 else None,
            }
        )
    # W7, issue 31: Aeon's µs per branch at the widest K over the narrowest (≤ 1.2: a branch costs no more in a
    # wider fan-out), and Aeon against the fastest peer at each K (< 1: ahead of every peer)
    wide = results.get("W7") or []
    widths = sorted({r["width"] for r in wide})
    aeon_at = {k: _find(wide, framework="aeon", width=k) for k in widths}
    bare_at = {k: _find(wide, framework="bare", width=k) for k in widths}
    if len(widths) > 1:
        low, high = widths[0], widths[-1]
        label = f"W7: Aeon µs/branch K={high} / K={low}"
        bare_growth = ratio(bare_at[high], bare_at[low])
        target(label, ratio(aeon_at[high], aeon_at[low]), "<=", 1.2, f"Aeon at K={low}", bare_growth)
    for k in widths:
        peers = [r for r in wide if r["framework"] in PEERS and r["width"] == k and "median" in r]
        best = min(peers, key=lambda r: r["median"], default=None)
        against = f"{best['framework']} {best['variant']}" if best else "-"
        label = f"W7: Aeon / fastest peer at K={k}"
        target(label, ratio(aeon_at[k], best), "<", 1.0, against, ratio(bare_at[k], best))
    # W8 and W9, issue 30: Aeon (its history always on) under the fastest peer, of any variant, that can express
    # the map or the loop (< 1: ahead of every peer, as on W5 and W6)
    for workload in ("W8", "W9"):
        rows = results.get(workload) or []
        if not rows:
            continue
        aeon, bare = _find(rows, framework="aeon"), _find(rows, framework="bare")
        peers = [r for r in rows if r["framework"] in PEERS and "median" in r]
        best = min(peers, key=lambda r: r["median"], default=None)
        against = f"{best['framework']} {best['variant']}" if best else "-"
        items = next((r["items"] for r in rows if "items" in r), None)
        shape = f"map of K={items}" if workload == "W8" else "loop of 100 rounds"
        label = f"{workload}: Aeon / fastest peer, {shape}"
        target(label, ratio(aeon, best), "<", 1.0, against, ratio(bare, best))
    return found


def flow_ratios(results: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """W5, W6, W8 and W9, from this one run: Aeon (which always records its history) against the fastest peer of
    any variant (W5, W6; W8's and W9's are among the targets), and against LangGraph with ``InMemorySaver``
    (history on both sides); the bytes each keeps per node. The issue sets no target for these, so there is no
    verdict (W7's are among the targets)."""
    found = []
    for workload in ("W5", "W6", "W8", "W9"):
        rows = results.get(workload) or []
        aeon = _find(rows, framework="aeon")
        if aeon is None:
            continue
        peers = [r for r in rows if r["framework"] in PEERS and "median" in r]
        best = min(peers, key=lambda r: r["median"], default=None)
        bare = _find(rows, framework="bare")
        memory = _find(rows, framework="langgraph", variant="memory")
        if workload in ("W5", "W6"):
            found.append(
                {
                    "workload": workload,
                    "label": "Aeon (history on) / fastest peer",
                    "value": aeon["median"] / best["median"] if best else None,
                    "against": f"{best['framework']} {best['variant']}" if best else "-",
                    "floor": bare["median"] / best["median"] if bare and best else None,
                }
            )
        found.append(
            {
                "workload": workload,
                "label": "Aeon / LangGraph InMemorySaver",
                "value": aeon["median"] / memory["median"] if memory else None,
                "against": "langgraph memory (history on both sides)",
                "floor": None,
            }
        )
        found.append(
            {
                "workload": workload,
                "label": "history bytes per node",
                "aeon_bytes": aeon.get("history_bytes_per_node"),
                "langgraph_memory_bytes": memory.get("history_bytes_per_node") if memory else None,
            }
        )
    return found


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _ratio(row: dict[str, Any]) -> str:
    return f"{row['aeon_ratio']:.3f}" if "aeon_ratio" in row else "-"


def format_table(report: dict[str, Any]) -> str:
    results, lines = report["results"], []
    out = lines.append
    mode = report["mode"]
    out(
        f"Aeon orchestration overhead, {mode} mode, {report['date']}, Python {report['python']}, {report['cpus']} CPUs"
    )
    out("versions: " + ", ".join(f"{k} {v or '(not installed)'}" for k, v in report["versions"].items()))
    out("")
    if results["W1"]:  # sections of workloads that did not run are left out
        floor_note = "; floor: bench/required_work.py" if _find(results["W1"], framework=FLOOR) else ""
        out(
            "W1 linear: a plan of N tool steps (peers: a chain of N nodes); µs per step; build once per graph"
            + floor_note
        )
        out(
            f"{'N':>5}  {'framework':15} {'median':>9} {'min':>9} {'max':>9} {'build ms':>9} {'Aeon/this':>10}"
        )
        for r in results["W1"]:
            head = f"{r['n']:>5}  {r['framework']:15}"
            if "median" not in r:
                out(f"{head} {r.get('error', 'no samples')}")
                continue
            out(
                f"{head} {_num(r['median']):>9} {_num(r['min']):>9} {_num(r['max']):>9} "
                f"{_num(r.get('build_ms'), 2):>9} {_ratio(r):>10}"
            )
        out("")
    if results["W2"]:  # sections of workloads that did not run are left out
        out(
            "W2 plan loop: plan, then 10 x (thought → tool), instant model; µs per cycle (plan call included)"
        )
        out(
            f"{'framework':15} {'variant':8} {'median':>9} {'min':>9} {'max':>9} {'bytes/step':>11} {'Aeon/this':>10}"
        )
        for r in results["W2"]:
            head = f"{r['framework']:15} {r['variant']:8}"
            if "median" not in r:
                out(f"{head} {r.get('error', 'no samples')}")
                continue
            out(
                f"{head} {_num(r['median']):>9} {_num(r['min']):>9} {_num(r['max']):>9} "
                f"{_num(r.get('bytes_per_step'), 0):>11} {_ratio(r):>10}"
            )
        out("")
    if results["W3"]:  # sections of workloads that did not run are left out
        out("W3 cold start: fresh-process wall time, ms")
        out(f"{'framework':15} {'command':24} {'median':>8} {'min':>8} {'max':>8} {'Aeon/this':>10}")
        for r in results["W3"]:
            head = f"{r['framework']:15} {r['variant']:24}"
            if "median" not in r:
                out(f"{head} {r.get('error', 'no samples')}")
                continue
            out(
                f"{head} {_num(r['median'], 0):>8} {_num(r['min'], 0):>8} {_num(r['max'], 0):>8} {_ratio(r):>10}"
            )
        out("")
    if results["W4"]:  # sections of workloads that did not run are left out
        first = next((r for r in results["W4"] if "runs" in r), None)
        if first:
            out(
                f"W4 many runs: {first['runs']} W2 runs in a process pool of {first['workers']} spawned workers, "
                f"one engine/graph each; {len(first['samples'])} pool(s) per framework; RSS growth of one worker "
                f"from run {first['growth_from_runs']} to {first['growth_to_runs']}"
            )
        else:
            out("W4 many runs")
        out(
            f"{'framework':15} {'runs/s':>7} {'min':>6} {'max':>6} {'wall s':>7} {'start s':>8} "
            f"{'peak RSS MB':>12} {'growth MB':>10} {'Aeon/this':>10}"
        )
        for r in results["W4"]:
            head = f"{r['framework']:15}"
            if "growth_mb" not in r or "error" in r:
                out(f"{head} {r.get('error', 'no result')}")
                continue
            out(
                f"{head} {r['runs_per_s']:>7.0f} {r['runs_per_s_min']:>6.0f} {r['runs_per_s_max']:>6.0f} "
                f"{r['wall_s']:>7.2f} {r['worker_start_s']:>8.2f} {r['peak_rss_mb']:>12.0f} {r['growth_mb']:>10.1f} "
                f"{_ratio(r):>10}"
            )
        out("(W4 Aeon/this is runs/s over runs/s: above 1 Aeon is faster)")
        out("")
    titles = {
        "W5": "W5 flow fan-out/merge: start → split → 10 workers → merge → exit",
        "W6": "W6 flow chain: start → 98 linear → exit",
        "W7": "W7 wide fan-out: start → split → K workers → merge → exit (K + 4 nodes)",
        "W8": "W8 map: start → split → work, one subtask per item → merge → exit",
        "W9": "W9 loop: start → 100 x (step → check), check going back to step → exit",
    }
    for workload in FLOW_WORKLOADS:
        rows = results.get(workload) or []
        if not rows:
            continue
        wide = any("width" in r for r in rows)  # W7: a row per K, µs per branch
        if wide:
            out(f"{titles[workload]}; µs per branch (a run's time / K); build once per flow/graph")
        elif workload == "W8":
            items = next((r["items"] for r in rows if "items" in r), "?")
            out(f"{titles[workload]} (K = {items}, K + 4 nodes); µs per node; build once per flow/graph")
        else:
            nodes = next((r["nodes"] for r in rows if "nodes" in r), "?")
            out(f"{titles[workload]} ({nodes} nodes); µs per node; build once per flow/graph")
        out(
            (f"{'K':>5}  " if wide else "")
            + f"{'framework':15} {'variant':8} {'median':>9} {'min':>9} {'max':>9} {'build ms':>9} "
            f"{'hist B/node':>12} {'Aeon/this':>10}"
        )
        for r in rows:
            head = (f"{r['width']:>5}  " if wide else "") + f"{r['framework']:15} {r['variant']:8}"
            if "na" in r:
                out(f"{head} n/a: {r['na']}")
                continue
            if "median" not in r:
                out(f"{head} {r.get('error', 'no samples')}")
                continue
            out(
                f"{head} {_num(r['median']):>9} {_num(r['min']):>9} {_num(r['max']):>9} "
                f"{_num(r.get('build_ms'), 2):>9} {_num(r.get('history_bytes_per_node'), 0):>12} {_ratio(r):>10}"
            )
        out("")
    if report.get("flow_ratios"):
        out("Flow ratios (from this run; no target is set for them)")
        for f in report["flow_ratios"]:
            label = f"{f['workload']}: {f['label']}"
            if "aeon_bytes" in f:
                out(
                    f"  {label:50} Aeon {_num(f['aeon_bytes'], 0)} (JSON history), LangGraph InMemorySaver "
                    f"{_num(f['langgraph_memory_bytes'], 0)} (serialised checkpoints, blobs and writes)"
                )
                continue
            floor = "" if f.get("floor") is None else f"; a bare loop: {_num(f['floor'], 3)}"
            out(f"  {label:50} {_num(f['value'], 3):>9}  (vs {f['against']}{floor})")
        out("")
    ran = [t for t in report["targets"] if results.get(t["target"].split(":")[0].split()[0])]
    if ran:
        out("Targets (from this run)")
    for t in ran:
        verdict = {True: "met", False: "MISSED", None: "n/a"}[t["met"]]
        floor = (
            ""
            if t.get("floor") is None
            else f"; {t.get('floor_label', 'a bare loop')}: {_num(t['floor'], 3)}"
        )
        out(
            f"  {t['target']:50} {_num(t['value'], 3):>9}  (target {t['limit']}, vs {t['against']}{floor})  {verdict}"
        )
    return "\n".join(lines)


# --- profile ------------------------------------------------------------------------------------------------------


def profile(top: int, workload: str = "W1", n: int = 100) -> None:
    """cProfile Aeon on W1 (N steps), W5 (the fan-out flow), W6 (the flow chain), W7 (the fan-out at K=1,000), W8
    (the map over 1,000 items) or W9 (the 100-round loop): the top functions by cumulative and by own time
    (built-ins included), with shares.

    Shares are of the profiled runs' total; cProfile's own overhead inflates the absolute times (compare shares).
    """
    import cProfile
    import pstats

    modules, _ = load_frameworks(["aeon"])
    with tempfile.TemporaryDirectory(prefix="aeon-profile-") as tmp:
        if workload == "W1":
            case, runs, title = modules["aeon"].w1(n), 50, f"Aeon W1 N={n}"
        else:
            flows_aeon = load_flow_modules({"aeon": "installed"})["aeon"]
            options = {"width": max(MODES["full"].w7_widths)} if workload == "W7" else {}
            if workload == "W8":
                options = {"items": MODES["full"].w8_items}
            case = getattr(flows_aeon, FLOW_WORKLOADS[workload])("history", Path(tmp), **options)
            runs = max(5 if options else 20, 5000 // case.units)
            title = f"Aeon {workload} ({FLOW_WORKLOADS[workload]}, {case.units} nodes)"
        case.check(case.run())
        for _ in range(3):
            case.run()
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(runs):
            case.run()
        profiler.disable()
        case.close()
    entries = pstats.Stats(profiler).stats.items()
    # (file, line, function) -> (primitive calls, calls, own time, cumulative time, callers)
    ours = [(key, value) for key, value in entries if str(BENCH) not in key[0]]
    total = max(value[3] for key, value in ours if key[0] != "~")  # the outermost kernel call: all the runs
    unit = "step" if workload == "W1" else "node"
    print(
        f"{title}: {runs} runs under cProfile, {total:.2f} s "
        f"({total / (case.units * runs) * 1e6:.0f} µs per {unit})"
    )
    for heading, column in (("cumulative", 3), ("own", 2)):
        print(f"\ntop {top} by {heading} time")
        print(f"{heading + ' s':>12} {'share':>6} {'calls':>8} {'µs/' + unit:>8}  function")
        ranked = sorted(
            (item for item in ours if column == 2 or item[0][0] != "~"),
            key=lambda item: item[1][column],
            reverse=True,
        )[:top]
        for (filename, line, function), value in ranked:
            where = filename.split("site-packages/")[-1].replace(str(BENCH.parent) + "/", "")
            per_unit = value[column] / (case.units * runs) * 1e6
            print(
                f"{value[column]:>12.3f} {value[column] / total:>6.1%} {value[1]:>8} {per_unit:>8.1f}  "
                f"{function} ({where}:{line})"
            )


# --- main ---------------------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="fewer repetitions, N up to 100")
    size.add_argument("--smoke", action="store_true", help="one repetition of tiny sizes (CI)")
    parser.add_argument(
        "--only", help=f"comma-separated frameworks (default: all of {', '.join(FRAMEWORKS)})"
    )
    parser.add_argument(
        "--workloads", default="W1,W2,W3,W4,W5,W6,W7,W8,W9", help="comma-separated (default: all)"
    )
    parser.add_argument(
        "--reps",
        type=int,
        help="timed samples per case in W1, W2, W5 to W9 (default: the mode's; raise it when busy)",
    )
    parser.add_argument("--out", type=Path, default=BENCH / "results.json", help="where to write the JSON")
    parser.add_argument(
        "--profile",
        nargs="?",
        const="W1",
        choices=("W1", "W5", "W6", "W7", "W8", "W9"),
        help="profile Aeon instead: on W1 N=100 (the default), W5 (the fan-out flow), W6 (the flow chain), W7 "
        "(the fan-out at K=1000), W8 (the map over 1,000 items) or W9 (the 100-round loop)",
    )
    parser.add_argument("--top", type=int, default=10, help="functions shown by --profile")
    parser.add_argument("--w4-child", nargs=3, metavar=("FRAMEWORK", "WHAT", "RUNS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.w4_child:
        name, what, runs = args.w4_child
        w4_child(name, what, int(runs))
        return 0
    if args.profile:
        profile(args.top, args.profile)
        return 0
    mode = MODES["smoke" if args.smoke else "quick" if args.quick else "full"]
    if args.reps:
        mode = replace(mode, reps=args.reps)
    names = args.only.split(",") if args.only else list(FRAMEWORKS)
    unknown = sorted(set(names) - set(FRAMEWORKS))
    if unknown:
        parser.error(f"unknown framework(s) {unknown}; choose from {', '.join(FRAMEWORKS)}")
    chosen = {w.strip().upper() for w in args.workloads.split(",")}
    modules, versions = load_frameworks(names)
    results: dict[str, list[dict[str, Any]]] = {w: [] for w in ("W1", "W2", "W3", "W4", *FLOW_WORKLOADS)}
    with tempfile.TemporaryDirectory(prefix="aeon-bench-") as tmp:
        if "W1" in chosen:
            results["W1"] = run_w1(modules, versions, mode)
        if "W2" in chosen:
            results["W2"] = run_w2(modules, versions, mode, Path(tmp))
        if chosen & set(FLOW_WORKLOADS):
            flow_modules = load_flow_modules(versions)
            for workload in FLOW_WORKLOADS:
                if workload in chosen:
                    results[workload] = run_flow(workload, flow_modules, versions, mode, Path(tmp))
    if "W3" in chosen:
        results["W3"] = run_w3(modules, versions, mode)
    if "W4" in chosen:
        results["W4"] = run_w4(modules, versions, mode)
    add_ratios(results)
    report = {
        "mode": mode.name,
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "versions": versions,
        "results": results,
    }
    report["targets"] = targets(results)
    report["flow_ratios"] = flow_ratios(results)
    print(format_table(report))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwritten to {args.out}")
    errors = [r for rows in results.values() for r in rows if "error" in r and r["error"] != MISSING]
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
