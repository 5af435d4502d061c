"""``aeon stats``: where a run's time and tokens went — per cycle, per tool and for the run (spec 004 §10.4).

Everything comes from the cycle records a run already writes (the state store's or a JSONL log's): the cycle's
wall time (``duration_ms``), the time in model calls (``usage.llm_ms``, retries included), each tool call's
``duration_ms``, and the token counters. Kernel time is what is left of a cycle: parsing, validation, prompts,
records and the store. Records written before ``llm_ms`` existed count their model time as unknown (0).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from aeon_kernel.errors import ConfigError

#: The token counters shown, as OpenAI-style usage names them (llama.cpp's adapters too).
TOKENS = ("prompt_tokens", "completion_tokens")
#: What the embedded model adds (issue 31): prompt tokens evaluated (the rest came from its KV cache), the time
#: spent on them and on decoding, for tokens per second of each, and the tokens its draft lookups guessed right
SPEEDS = ("prompt_eval_tokens", "prompt_eval_ms", "decode_ms", "drafted_tokens")


def logged_entries(path: str, run_id: str) -> list[dict[str, Any]]:
    """The cycle records of ``run_id`` in the JSONL log at ``path``, in file order."""
    entries = []
    try:
        with open(path, encoding="utf-8") as file:
            for number, line in enumerate(file, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except ValueError as exc:
                    raise ConfigError(
                        f"{path}, line {number}: not JSON ({exc}); is it an Aeon JSONL log?"
                    ) from None
                if isinstance(record, dict) and record.get("run_id") == run_id and "step_number" in record:
                    entries.append(record)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    if not entries:
        raise ConfigError(f"{path} holds no cycle of run {run_id!r} (`aeon runs` lists the stored runs)")
    return entries


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def cycle_stats(entry: Mapping[str, Any]) -> dict[str, Any]:
    """One cycle record's figures."""
    usage = entry.get("usage") or {}
    calls = entry.get("tool_calls") or []
    duration = _number(entry.get("duration_ms"))
    model = _number(usage.get("llm_ms"))
    tools = sum(_number(call.get("duration_ms")) for call in calls)
    return {
        "cycle": entry.get("step_number"),
        "phase": entry.get("phase"),
        "step_id": entry.get("step_id"),
        "step_status": entry.get("step_status"),
        "duration_ms": round(duration, 3),
        "model_ms": round(model, 3),
        "tool_ms": round(tools, 3),
        "kernel_ms": round(max(duration - model - tools, 0.0), 3),
        "llm_calls": int(_number(usage.get("llm_calls"))),
        "tool_calls": len(calls),
        "errors": len(entry.get("errors") or []),
        **{name: int(_number(usage.get(name))) for name in (*TOKENS, *SPEEDS)},
    }


def stage_stats(stage: Mapping[str, Any]) -> dict[str, Any]:
    """A flow stage's figures (spec 004 §10.4): its time, CPU time, the process's peak RSS, context size, queue wait."""
    profile = stage.get("profile") or {}
    return {
        "seq": stage.get("seq"),
        "task": str(stage.get("task")),
        "node": stage.get("node"),
        "status": stage.get("status"),
        "duration_ms": round(_number(stage.get("duration_ms")), 3),
        "cpu_ms": round(_number(profile.get("cpu_ms")), 3),
        "rss_peak_kb": profile.get("rss_peak_kb"),
        "context_chars": int(_number(profile.get("context_chars"))),
        "queued_ms": profile.get("queued_ms"),
    }


def run_stats(entries: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Per cycle, per tool (calls, failures, time) and the run's totals, from its cycle records in order."""
    cycles: list[dict[str, Any]] = []
    tools: dict[str, dict[str, Any]] = {}
    entries_seen = list(entries)
    for entry in entries_seen:
        cycles.append(cycle_stats(entry))
        for call in entry.get("tool_calls") or []:
            tool = tools.setdefault(
                str(call.get("tool_name")), {"calls": 0, "failures": 0, "total_ms": 0.0, "max_ms": 0.0}
            )
            took = _number(call.get("duration_ms"))
            tool["calls"] += 1
            tool["failures"] += call.get("error") is not None
            tool["total_ms"] += took
            tool["max_ms"] = max(tool["max_ms"], took)
    summed = (
        "duration_ms",
        "model_ms",
        "tool_ms",
        "kernel_ms",
        "llm_calls",
        "tool_calls",
        "errors",
        *TOKENS,
        *SPEEDS,
    )
    totals: dict[str, Any] = {key: sum(c[key] for c in cycles) for key in summed}
    totals = {key: round(value, 3) if isinstance(value, float) else value for key, value in totals.items()}
    totals["prompt_tokens_per_s"] = _rate(totals["prompt_eval_tokens"], totals["prompt_eval_ms"])
    totals["decode_tokens_per_s"] = _rate(totals["completion_tokens"], totals["decode_ms"])
    stages = [stage_stats(stage) for entry in entries_seen for stage in entry.get("stages") or ()]
    tasks: dict[str, dict[str, Any]] = {}
    for stage in stages:  # spec 004 §10.4: per task too
        task = tasks.setdefault(
            stage["task"], {"task": stage["task"], "stages": 0, "total_ms": 0.0, "cpu_ms": 0.0}
        )
        task["stages"] += 1
        task["total_ms"] = round(task["total_ms"] + stage["duration_ms"], 3)
        task["cpu_ms"] = round(task["cpu_ms"] + stage["cpu_ms"], 3)
    return {
        "cycles": cycles,
        "stages": stages,
        "tasks": list(tasks.values()),
        "tools": [
            {"tool": name, **{k: round(v, 3) for k, v in figures.items()}}
            | {"mean_ms": round(figures["total_ms"] / figures["calls"], 3)}
            for name, figures in sorted(tools.items())
        ],
        "run": {"cycles": len(cycles), **totals},
    }


def _rate(tokens: int, ms: int) -> float | None:
    """Tokens per second, or None where the model did not say how long it took (a model server, a cassette)."""
    return round(1000 * tokens / ms, 1) if ms > 0 else None


def _ms(value: float) -> str:
    return f"{value / 1000:.2f}s" if value >= 1000 else f"{value:.1f}ms"


def _kb(value: Any) -> str:
    return "-" if not isinstance(value, int) else f"{value / 1024:.0f}MB"


def _share(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def render(run_id: str, stats: Mapping[str, Any]) -> str:
    """The figures as plain-text tables, for a terminal."""
    run = stats["run"]
    whole = run["duration_ms"]
    lines = [
        f"run {run_id}: {run['cycles']} cycles, {_ms(whole)}; model {_ms(run['model_ms'])} "
        f"({_share(run['model_ms'], whole)}), tools {_ms(run['tool_ms'])} ({_share(run['tool_ms'], whole)}), "
        f"kernel {_ms(run['kernel_ms'])} ({_share(run['kernel_ms'], whole)}); {run['llm_calls']} model calls, "
        f"{run['prompt_tokens']} prompt + {run['completion_tokens']} completion tokens; {run['errors']} errors",
        *_speeds(run),
        "",
        f"{'cycle':>5}  {'phase':<6} {'step':<8} {'status':<9} {'total':>9} {'model':>9} {'tools':>9} "
        f"{'kernel':>9} {'calls':>5} {'tokens':>7}",
    ]
    for c in stats["cycles"]:
        tokens = c["prompt_tokens"] + c["completion_tokens"]
        lines.append(
            f"{c['cycle']!s:>5}  {c['phase'] or '-':<6} {str(c['step_id'] or '-')[:8]:<8} "
            f"{c['step_status'] or '-':<9} {_ms(c['duration_ms']):>9} {_ms(c['model_ms']):>9} "
            f"{_ms(c['tool_ms']):>9} {_ms(c['kernel_ms']):>9} {c['llm_calls']:>5} {tokens:>7}"
        )
    if stats.get("stages"):
        lines += [
            "",
            f"{'stage':>5}  {'task/node':<24} {'status':<9} {'total':>9} {'cpu':>9} {'peak rss':>9} "
            f"{'context':>8} {'queued':>9}",
        ]
        lines += [
            f"{s['seq']!s:>5}  {(s['task'] + '/' + str(s['node']))[:24]:<24} {s['status'] or '-':<9} "
            f"{_ms(s['duration_ms']):>9} {_ms(s['cpu_ms']):>9} {_kb(s['rss_peak_kb']):>9} {s['context_chars']:>8} "
            f"{'-' if s['queued_ms'] is None else _ms(s['queued_ms']):>9}"
            for s in stats["stages"]
        ]
    if stats["tools"]:
        lines += ["", f"{'tool':<24} {'calls':>5} {'failed':>6} {'total':>9} {'mean':>9} {'max':>9}"]
        lines += [
            f"{t['tool'][:24]:<24} {t['calls']:>5} {t['failures']:>6} {_ms(t['total_ms']):>9} "
            f"{_ms(t['mean_ms']):>9} {_ms(t['max_ms']):>9}"
            for t in stats["tools"]
        ]
    return "\n".join(lines)


def _speeds(run: Mapping[str, Any]) -> list[str]:
    """The model's speeds, where it measured them: prompt evaluation and decoding, in tokens per second."""
    if run["prompt_tokens_per_s"] is None and run["decode_tokens_per_s"] is None:
        return []
    cached = run["prompt_tokens"] - run["prompt_eval_tokens"]
    prompt = "-" if run["prompt_tokens_per_s"] is None else f"{run['prompt_tokens_per_s']:,.0f} tokens/s"
    decode = "-" if run["decode_tokens_per_s"] is None else f"{run['decode_tokens_per_s']:,.1f} tokens/s"
    return [
        f"model: prompt {prompt} ({run['prompt_eval_tokens']} evaluated, {cached} from the KV cache, "
        f"{_ms(run['prompt_eval_ms'])}); decoding {decode} ({run['completion_tokens']} tokens"
        + (f", {run['drafted_tokens']} of them drafted" if run["drafted_tokens"] else "")
        + f", {_ms(run['decode_ms'])})"
    ]
