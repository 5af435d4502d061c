"""Multi-turn conversations on the embedded model (issue 29): the frozen set in ``conversations.jsonl``.

    python bench/sessions/run.py                   # both modes; writes results-conversations-LABEL.json
    python bench/sessions/run.py --set followups --label before   # the second set
    python bench/sessions/run.py --modes session   # one mode
    python bench/sessions/run.py --conversation c01 --conversation c06   # some, printed only

Modes: ``session`` plays each conversation as one :class:`~aeon_plugins.sessions.Session` (later turns see the
earlier ones); ``alone`` asks each turn as a run of its own, as without sessions (the peer: a later turn cannot
know what "that" is). A turn is **right** when the last number its answer states is the expected one.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from aeon_kernel import AeonError, Engine  # noqa: E402
from aeon_kernel.config import AeonConfig  # noqa: E402
from aeon_plugins.planning.grounding import numbers_in  # noqa: E402
from aeon_plugins.sessions import Session  # noqa: E402

HERE = Path(__file__).parent


def right(expect: float, result: dict[str, Any]) -> bool:
    answer = result.get("answer")
    text = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
    numbers = numbers_in(text or "")
    return bool(numbers) and abs(numbers[-1][1] - expect) < 1e-9


def play(engine: Engine, conversation: dict[str, Any], mode: str, ttl: int) -> list[dict[str, Any]]:
    session = Session(engine)
    rows = []
    for number, turn in enumerate(conversation["turns"], 1):
        started = time.perf_counter()
        try:
            if mode == "session":
                result = session.ask(turn["say"], ttl=ttl)
            else:
                result = engine.orchestrator(ttl=ttl).execute(turn["say"])
        except AeonError as exc:
            result = {"status": "error", "message": f"{type(exc).__name__}: {exc}", "answer": None}
        verification = result.get("verification") or {}
        rows.append(
            {
                "conversation": conversation["id"],
                "turn": number,
                "say": turn["say"],
                "expect": turn["expect"],
                "right": right(turn["expect"], result),
                "status": result["status"],
                "verdict": verification.get("verdict"),
                "answer": result.get("answer"),
                "tools": [
                    [c["tool_name"], c["arguments"], c.get("result")]
                    for c in (result.get("final_state") or {}).get("tool_history") or []
                ],
                "seconds": round(time.perf_counter() - started, 2),
            }
        )
        row = rows[-1]
        print(
            f"{mode:7} {row['conversation']} t{number} {'OK ' if row['right'] else 'BAD'} {row['status']:10} "
            f"{row['verdict']!s:12} {row['seconds']:5.1f}s {json.dumps(row['answer'], ensure_ascii=False)[:70]}",
            flush=True,
        )
    return rows


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    turns = sorted({r["turn"] for r in rows})
    by_turn = {
        f"turn {t}": f"{sum(r['right'] for r in rows if r['turn'] == t)}/{sum(r['turn'] == t for r in rows)}"
        for t in turns
    }
    conversations = sorted({r["conversation"] for r in rows})
    whole = sum(all(r["right"] for r in rows if r["conversation"] == c) for c in conversations)
    return {
        "right": f"{sum(r['right'] for r in rows)}/{len(rows)}",
        "right_by_turn": by_turn,
        "conversations_all_right": f"{whole}/{len(conversations)}",
        "wrong_reported_verified": sum(1 for r in rows if not r["right"] and r["verdict"] == "verified"),
        "verdicts": {
            v: sum(r["verdict"] == v for r in rows) for v in sorted({str(r["verdict"]) for r in rows})
        },
        "seconds_median": round(statistics.median(r["seconds"] for r in rows), 2) if rows else 0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--conversation", action="append", help="play only this one (repeatable); nothing is written"
    )
    parser.add_argument("--modes", default="session,alone")
    parser.add_argument("--ttl", type=int, default=12)
    parser.add_argument("--set", default="conversations", choices=["conversations", "followups", "recalls"])
    parser.add_argument("--label", default="after", help="writes results-SET-LABEL.json")
    args = parser.parse_args()
    lines = (HERE / f"{args.set}.jsonl").read_text().splitlines()
    conversations = [json.loads(line) for line in lines if line]
    if args.conversation:
        conversations = [c for c in conversations if c["id"] in args.conversation]
    results = {}
    with Engine(AeonConfig(ttl=args.ttl)) as engine:
        engine.build_selected()  # the model is loaded before the first timing
        for mode in args.modes.split(","):
            results[mode] = [row for c in conversations for row in play(engine, c, mode, args.ttl)]
    summary = {mode: summarise(rows) for mode, rows in results.items()}
    print(json.dumps(summary, indent=2))
    if not args.conversation:
        out = HERE / f"results-{args.set}-{args.label}.json"
        out.write_text(json.dumps({"summary": summary, "turns": results}, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
