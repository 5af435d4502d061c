"""A reply does not depend on what the model was asked before (aeon_plugins/llama_cpp/prefix_cache.py, issue 31).

llama.cpp's CPU kernels round rows multiplied four at a time differently from rows multiplied alone, so a prompt
whose shared start was reused from the cache and whose rest was evaluated apart got other logits than the same
prompt evaluated whole. The adapter now reuses only starts of whole four-row groups that were computed in full
groups: the logits of a prompt are the same bit for bit whatever came before it, with or without kept prompts.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from aeon_plugins.llama_cpp.prefix_cache import GROUPED_BATCH, ROW_GROUP, exact, usable

BASE = "You judge answers. Rate the coherence of the answer from 0 to 10 and say why in a short note. " * 8
ENDINGS = [
    "Question: what is 2 + 2? Answer: 4.",
    "Question: what is 9 times 11? Answer: 99.",
    "Q: 9 x 11?",
    "Question: what is 9 times 11? Answer: 99. Judge it carefully, please, and be brief.",
    "Question: what is 9 times 11? Answer: 98.",
    # longer than a batch (512 tokens): the shared start ends on either side of the batch's end
    BASE * 2 + "Question: what is 5 + 5? Answer: 10.",
    BASE * 2 + "Question: what is 5 + 6? Answer: 11, which is right.",
    BASE + "Question: what is 5 + 6? Answer: " + "eleven, " * 60,
]


def test_a_reused_start_is_shared_computed_in_groups_whole_groups_and_leaves_batches_of_eight() -> None:
    assert (ROW_GROUP, GROUPED_BATCH) == (4, 8)
    assert exact(218) == 216 and exact(216) == 216  # the last 218 % 4 rows are multiplied one by one
    assert exact(7) == 0 and exact(517) == 512  # a last batch under eight rows is not multiplied in groups
    assert exact(700) == 700 and exact(1030) == 1024 and exact(1040) == 1040
    assert usable(shared=206, held_exact=216, prompt_tokens=218) == 204  # whole groups of the shared start
    assert (
        usable(shared=300, held_exact=216, prompt_tokens=400) == 216
    )  # not the rows decoded after the prompt
    assert usable(shared=216, held_exact=216, prompt_tokens=216) == 208  # the last batch has eight rows
    assert usable(shared=211, held_exact=216, prompt_tokens=216) == 208
    assert usable(shared=3, held_exact=216, prompt_tokens=218) == 0
    assert usable(shared=5, held_exact=216, prompt_tokens=6) == 0
    # the rest crosses 512: the part before it is evaluated as a batch of eight rows or more
    assert usable(shared=508, held_exact=512, prompt_tokens=700) == 504
    assert usable(shared=500, held_exact=512, prompt_tokens=700) == 500
    assert usable(shared=600, held_exact=700, prompt_tokens=700) == 600


def first_logits(llama: Any, tokens: list[int]) -> np.ndarray:
    """The logits the prompt's last row gave, read once the first token was chosen (before it is evaluated)."""
    import llama_cpp

    generated: Iterator[int] = llama.generate(tokens, temp=0.0)
    next(generated)
    logits = np.ctypeslib.as_array(
        llama_cpp.llama_get_logits_ith(llama._ctx.ctx, -1), shape=(llama.n_vocab(),)
    ).copy()
    generated.close()  # type: ignore[attr-defined]
    return logits


@pytest.mark.model
@pytest.mark.parametrize("kept", [0, 2])
def test_a_prompts_logits_are_the_same_after_any_other_prompt_as_evaluated_alone(kept: int) -> None:
    pytest.importorskip("llama_cpp")
    from aeon_plugins.llama_cpp import LlamaCppAdapter

    adapter = LlamaCppAdapter(prefix_cache=kept)
    llama = adapter._llama
    try:
        prompts = [llama.tokenize((BASE + ending).encode()) for ending in ENDINGS]
        alone = []
        for tokens in prompts:
            llama.reset()
            alone.append(first_logits(llama, tokens))
        unrelated = llama.tokenize(b"Something else entirely: cats, dogs and the weather today.")
        import llama_cpp

        evaluated = whole = 0
        for i, tokens in enumerate(prompts):
            for before in prompts[:i] + prompts[i + 1 :]:
                llama.reset()
                first_logits(llama, before)
                if kept:  # the context holds another prompt; a kept one is put back
                    first_logits(llama, unrelated)
                llama_cpp.llama_perf_context_reset(llama._ctx.ctx)
                after = first_logits(llama, tokens)
                assert np.array_equal(after, alone[i]), (ENDINGS[i], "after", ENDINGS[prompts.index(before)])
                evaluated += llama_cpp.llama_perf_context(llama._ctx.ctx).n_p_eval
                whole += len(tokens)
        assert evaluated < whole / 2  # most of each prompt came from the cache (64 % when measured)
    finally:
        adapter.close()
