"""Where the time to a plan goes on the embedded model (issue 31, item 5).

    python bench/model_split.py [--runs 5] [--prefix-cache N] [--draft-tokens N] [--same]

Builds one Engine on the default model (timing the load), then runs the quick-start request and "what is 7 times
6?" in turn (``--same``: the quick-start request every time) and prints, for each run's plan call, the prompt
tokens, how many llama.cpp evaluated (the rest came from its KV cache), the milliseconds on the prompt and on
decoding, and the run's wall time; then the medians of the plan call.
"""

from __future__ import annotations

import argparse
import statistics
import time

from aeon_kernel import Engine
from aeon_kernel.config import AeonConfig

REQUESTS = ("calculate the sum of 5 and 10", "what is 7 times 6?")
FIELDS = (
    "prompt_tokens",
    "prompt_eval_tokens",
    "prompt_eval_ms",
    "completion_tokens",
    "drafted_tokens",
    "decode_ms",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--prefix-cache", type=int, default=4, help="[llm] prefix_cache (0: off; default 4, the adapter's)"
    )
    parser.add_argument(
        "--draft-tokens", type=int, default=7, help="[llm] draft_tokens (0: one token at a time)"
    )
    parser.add_argument("--same", action="store_true", help="the quick-start request every time")
    args = parser.parse_args()
    started = time.perf_counter()
    options = {"prefix_cache": args.prefix_cache, "draft_tokens": args.draft_tokens}
    engine = Engine(AeonConfig().with_choice("llm", "llama_cpp", **options))
    engine.llm  # noqa: B018 - building it loads the model
    print(f"model load: {(time.perf_counter() - started) * 1000:.0f} ms")
    plans, durations, model_ms = [], [], []
    for number in range(args.runs):
        request = REQUESTS[0 if args.same else number % len(REQUESTS)]
        started = time.perf_counter()
        result = engine.run(request)
        wall = time.perf_counter() - started
        usage = result["final_state"]["llm_outputs"][0]["usage"]
        plans.append(usage)
        shown = ", ".join(f"{key} {usage.get(key)}" for key in FIELDS)
        model_ms.append(usage.get("prompt_eval_ms", 0) + usage.get("decode_ms", 0))
        durations.append(result["final_state"]["llm_outputs"][0]["duration_ms"])
        print(
            f"run {number}: {result['status']}, {wall:.2f} s; plan call {durations[-1]:.0f} ms "
            f"({model_ms[-1]} ms in the model): {shown}",
            flush=True,
        )
    print(
        f"plan call, median: {statistics.median(durations):.0f} ms, {statistics.median(model_ms)} ms in the model;",
        ", ".join(f"{k} {statistics.median(u.get(k, 0) for u in plans)}" for k in FIELDS),
    )
    engine.close()


if __name__ == "__main__":
    main()
