"""Reuse the KV cache of earlier prompts only where it gives the very logits evaluating afresh would give.

**Exact reuse.** llama.cpp's CPU kernels compute a row of a batch in one of three ways: in a group of four rows
(repacked weights, batches of eight rows or more), in a small batch (four to seven rows), or alone (the last one to
three rows of a batch, or a batch of one to three), and the three round differently: the same prompt, its last
twelve tokens evaluated apart from the rest, gave logits up to 1.1 away from evaluating it whole (bench/README.md).
llama-cpp-python reuses the cache for whatever start a prompt shares with the one before and evaluates the rest
apart, so a reply depended on what the model was asked before: the quality sets measured one run order, and a
judge's replies in multi-pass runs flipped once a cache was kept. Here a prompt reuses only a start that a whole
evaluation would also have computed in groups of four, and the rest is evaluated in the batches a whole
evaluation uses (split where ``n_batch`` splits it, at least eight rows where it had eight), so every row is
computed the same way and the logits are equal bit for bit (tested).

**Kept prompts.** llama.cpp keeps one KV cache per context, and a run alternates prompts (plan, arguments,
answer), so each evaluated its shared start again (issue 31). With ``size`` above 0 this keeps the state of the
last few sequences (the cells they use) and puts back the one sharing the longest usable start with the next
prompt, under the same rule. A model with sliding-window attention (Gemma 3: 512 tokens) saves a longer sequence
without the cells that fell out of the window, and one put back from there gave wrong logits (up to 3.7 away), so
only sequences within the window are kept: a longer prompt is kept at the end of its first batch.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any, Final

#: the rows llama.cpp's repacked CPU kernels multiply together: a reused start is a whole number of these
ROW_GROUP: Final = 4
#: the fewest rows of a batch that are multiplied in groups (fewer take the small-batch path)
GROUPED_BATCH: Final = 8
#: a saved sequence is put back only when it spares this many more tokens than the context already holds
_WORTH: Final = 16


def _shared(a: Sequence[int], b: Sequence[int]) -> int:
    """How many tokens ``a`` and ``b`` share from their start."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def exact(prompt_tokens: int, n_batch: int = 512) -> int:
    """How much of a sequence whose prompt had ``prompt_tokens`` tokens a later prompt may reuse: the rows its
    evaluation computed in groups of four (every batch of ``n_batch`` rows but the last, and the last one's whole
    groups when it had eight rows or more)."""
    whole, rest = divmod(prompt_tokens, n_batch)
    return whole * n_batch + (rest - rest % ROW_GROUP if rest >= GROUPED_BATCH else 0)


def batch_end(row: int, n_batch: int = 512) -> int:
    """Where the batch that evaluating a whole prompt puts ``row`` in ends (llama.cpp splits at ``n_batch``)."""
    return (row // n_batch + 1) * n_batch


def usable(shared: int, held_exact: int, prompt_tokens: int, n_batch: int = 512) -> int:
    """The start a prompt of ``prompt_tokens`` tokens reuses: shared, computed in groups, a whole number of groups,
    and leaving batches of eight rows or more to evaluate (the prompt's last batch and, when the rest crosses a
    multiple of ``n_batch``, the part before it), so each row is computed as evaluating the prompt whole does."""
    keep = min(shared, held_exact, prompt_tokens - GROUPED_BATCH)
    keep -= keep % ROW_GROUP
    boundary = batch_end(keep, n_batch)
    if boundary < prompt_tokens and boundary - keep < GROUPED_BATCH:
        keep = boundary - GROUPED_BATCH
    return max(keep, 0)


class PrefixCache:
    """What one ``llama_cpp.Llama`` may reuse of its KV cache, and the saved states of its last ``size`` sequences."""

    def __init__(self, llama: Any, bindings: Any, size: int = 4) -> None:
        self._llama, self._bindings, self._size = llama, bindings, size
        self._exact = 0  # how much of the sequence the context holds may be reused
        #: the longest sequence whose saved state is whole: a sliding window's, or any (0); bindings that cannot
        #: tell get 1, so nothing is kept rather than a state that may be wrong
        n_swa = getattr(bindings, "llama_model_n_swa", None)
        self._window = (int(n_swa(llama._model.model)) if n_swa else 1) if size else 0
        self._saved: OrderedDict[tuple[int, ...], tuple[bytes, int]] = OrderedDict()

    def install(self) -> None:
        """Route the Llama's ``generate`` through the cache (the chat completion calls it with the prompt's tokens)."""
        generate = self._llama.generate

        def cached_generate(tokens: Sequence[int], *args: Any, **kwargs: Any) -> Iterator[int]:
            tokens = list(tokens)
            self.prepare(tokens)
            try:
                yield from generate(tokens, *args, **kwargs)
            finally:
                self._exact = exact(min(len(tokens), self._llama.n_tokens), self._llama.n_batch)
                self.save(self._exact)

        self._llama.generate = cached_generate

    def prepare(self, tokens: list[int]) -> None:
        """Before ``tokens`` are evaluated: put back the saved sequence whose start serves them best, then keep only
        the start that may be reused (llama-cpp-python's ``generate`` evaluates from there)."""
        llama, n_batch = self._llama, self._llama.n_batch
        held = llama._input_ids.tolist() if llama.n_tokens else []
        keep = usable(_shared(held, tokens), self._exact, len(tokens), n_batch)
        best, best_keep = None, keep + _WORTH
        for key, (_, saved_exact) in self._saved.items():
            n = usable(_shared(key, tokens), saved_exact, len(tokens), n_batch)
            if n > best_keep:
                best, best_keep = key, n
        if best is not None and self._restore(best):
            keep = best_keep
        if keep < llama.n_tokens:
            llama._ctx.kv_cache_seq_rm(-1, keep, -1)
            llama.n_tokens = keep
        boundary = batch_end(keep, n_batch)
        if boundary < len(tokens) and (keep or self._size):  # up to where a whole evaluation's batch ends
            llama.eval(tokens[keep:boundary])
            self.save(boundary)  # a start other prompts may share, kept while it fits the window

    def _restore(self, key: tuple[int, ...]) -> bool:
        data, self._exact = self._saved[key]
        self._saved.move_to_end(key)
        llama, ctx = self._llama, self._llama._ctx.ctx
        self._bindings.llama_memory_clear(self._bindings.llama_get_memory(ctx), True)
        buffer = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        if self._bindings.llama_state_seq_set_data(ctx, buffer, len(data), 0) != len(data):
            llama.n_tokens = self._exact = 0  # the context was cleared: evaluate the prompt from its start
            return False
        llama.input_ids[: len(key)] = key
        llama.n_tokens = len(key)
        llama._requires_eval = True
        return True

    def save(self, exact: int) -> None:
        """Keep the state of the sequence the context now holds, of which ``exact`` tokens may be reused."""
        llama = self._llama
        key = tuple(llama._input_ids.tolist())
        if self._size <= 0 or not key or key in self._saved or 0 < self._window < len(key):
            return
        ctx = llama._ctx.ctx
        size = self._bindings.llama_state_seq_get_size(ctx, 0)
        buffer = (ctypes.c_uint8 * size)()
        written = self._bindings.llama_state_seq_get_data(ctx, buffer, size, 0)
        if written <= 0:
            return
        self._saved[key] = (ctypes.string_at(buffer, written), exact)  # not a slice: that is a list of ints
        while len(self._saved) > self._size:
            self._saved.popitem(last=False)


def install(llama: Any, bindings: Any, size: int) -> None:
    """Route ``llama`` through exact reuse and a cache of ``size`` sequences (0: only what the context holds). The
    cache lives on in the ``generate`` it installs."""
    PrefixCache(llama, bindings, size).install()
