"""W4: many independent W2 runs at once, in a process pool (one worker per core), for any framework.

Each worker imports only its framework's workload module and calls its ``w4_init`` once (Aeon: ONE Engine
per worker; the peers: one compiled graph or pipeline per worker), then runs W2 again and again. Workers are
spawned, not forked, so none inherits what the benchmark's parent process had imported. This module imports
only the standard library, so the parent that drives the pool stays small.
"""

from __future__ import annotations

import concurrent.futures
import importlib
import multiprocessing
import os
import resource
import time
from typing import Any

_module: Any = None
_init_seconds = 0.0


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def rss_bytes() -> int:
    """This process's resident set size now."""
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except ImportError:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes(pid: int | str = "self") -> int:
    """A process's peak RSS: ``VmHWM``, which (unlike ``ru_maxrss``) does not carry over the RSS of the
    process that forked this one before it exec'd (the benchmark's parent has every framework imported)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kilobytes on Linux


def _init(module_name: str) -> None:
    global _module, _init_seconds
    started = time.perf_counter()
    _module = importlib.import_module(module_name)
    _module.w4_init()
    _init_seconds = time.perf_counter() - started


def _task(_: int) -> tuple[int, bool, int, float]:
    from .common import W2_EXPECTED

    ok = _module.w4_run() == W2_EXPECTED
    return os.getpid(), ok, peak_rss_bytes(), _init_seconds


def _growth(runs: int) -> dict[str, int]:
    """RSS of one worker after a tenth of ``runs`` sequential runs, and after all of them."""
    from .common import W2_EXPECTED

    early = max(1, runs // 10)
    samples = {}
    for done in range(1, runs + 1):
        assert _module.w4_run() == W2_EXPECTED
        if done in (early, runs):
            samples[f"rss_after_{done}"] = rss_bytes()
    return {"early_runs": early, "runs": runs, **samples}


def pool_run(module_name: str, runs: int, workers: int | None = None) -> dict[str, Any]:
    """``runs`` W2 runs in a fresh pool of ``workers`` (default: one per core); wall time includes starting it."""
    workers = workers or cpu_count()
    chunk = max(1, runs // (workers * 20))
    started = time.perf_counter()
    with concurrent.futures.ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("spawn"), initializer=_init, initargs=(module_name,)
    ) as pool:
        outcomes = list(pool.map(_task, range(runs), chunksize=chunk))
        wall = time.perf_counter() - started
        # Every worker counts, also one that got no task (fast runs: one worker may drain the queue alone).
        # ``_processes`` is private but long-stable: the pool's worker processes by pid.
        peaks = {pid: peak_rss_bytes(pid) for pid in getattr(pool, "_processes", None) or {}}
    for pid, _, peak, _ in outcomes:
        peaks[pid] = max(peak, peaks.get(pid, 0))
    return {
        "runs": runs,
        "workers": workers,
        "failed": sum(1 for _, ok, _, _ in outcomes if not ok),
        "wall_s": wall,
        "runs_per_s": runs / wall,
        "worker_start_s": max(seconds for *_, seconds in outcomes),
        "peak_rss_mb": (sum(peaks.values()) + peak_rss_bytes()) / 2**20,  # the workers and this parent
    }


def growth(module_name: str, runs: int) -> dict[str, Any]:
    """RSS growth of ONE fresh worker from a tenth of ``runs`` sequential runs to all of them."""
    with concurrent.futures.ProcessPoolExecutor(
        1, mp_context=multiprocessing.get_context("spawn"), initializer=_init, initargs=(module_name,)
    ) as pool:
        found = pool.submit(_growth, runs).result()
    early, late = found[f"rss_after_{found['early_runs']}"], found[f"rss_after_{runs}"]
    return {
        "growth_mb": (late - early) / 2**20,
        "growth_from_runs": found["early_runs"],
        "growth_to_runs": runs,
        "rss_one_worker_mb": late / 2**20,
    }
