"""Keep the KV cache of recent prompts, so a prompt that starts like an earlier one is not evaluated again.

llama.cpp keeps one KV cache per context, and llama-cpp-python reuses it only for the prompt just before; a run
alternates prompts (plan, arguments, answer), so each evaluated its shared start again (issue 31). This keeps the
state of the last few sequences (the cells they use) and puts back the one sharing the longest start with the next
prompt. Like llama-cpp-python's own reuse, it can change a reply: KV values depend slightly on the batch split.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any

#: a saved sequence is put back only when it spares this many more tokens than the context already holds
_WORTH: int = 16


def _shared(a: Sequence[int], b: Sequence[int]) -> int:
    """How many tokens ``a`` and ``b`` share from their start."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


class PrefixCache:
    """The saved KV state of the last ``size`` sequences one ``llama_cpp.Llama`` evaluated, by their tokens."""

    def __init__(self, llama: Any, bindings: Any, size: int = 4) -> None:
        self._llama, self._bindings, self._size = llama, bindings, size
        self._saved: OrderedDict[tuple[int, ...], bytes] = OrderedDict()

    def install(self) -> None:
        """Route the Llama's ``generate`` through the cache (the chat completion calls it with the prompt's tokens)."""
        generate = self._llama.generate

        def cached_generate(tokens: Sequence[int], *args: Any, **kwargs: Any) -> Iterator[int]:
            self.prepare(list(tokens))
            try:
                yield from generate(tokens, *args, **kwargs)
            finally:
                self.save()

        self._llama.generate = cached_generate

    def prepare(self, tokens: list[int]) -> None:
        """Before ``tokens`` are evaluated: put back the saved sequence sharing the longest start with them."""
        llama = self._llama
        held = _shared(llama._input_ids.tolist(), tokens) if llama.n_tokens else 0
        best, shared = None, held + _WORTH
        for key in self._saved:
            n = _shared(key, tokens)
            if n > shared:
                best, shared = key, n
        if best is None:
            return
        data = self._saved[best]
        self._saved.move_to_end(best)
        ctx = llama._ctx.ctx
        self._bindings.llama_memory_clear(self._bindings.llama_get_memory(ctx), True)
        buffer = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        if self._bindings.llama_state_seq_set_data(ctx, buffer, len(data), 0) != len(data):
            llama.n_tokens = 0  # the context was cleared: evaluate the prompt from its start
            return
        llama.input_ids[: len(best)] = best
        llama.n_tokens = len(best)
        llama._requires_eval = True

    def save(self) -> None:
        """After a call: keep the state of the sequence the context now holds (the prompt and the reply)."""
        llama = self._llama
        key = tuple(llama._input_ids.tolist())
        if not key or key in self._saved:
            return
        ctx = llama._ctx.ctx
        size = self._bindings.llama_state_seq_get_size(ctx, 0)
        buffer = (ctypes.c_uint8 * size)()
        written = self._bindings.llama_state_seq_get_data(ctx, buffer, size, 0)
        if written <= 0:
            return
        self._saved[key] = bytes(buffer[:written])
        while len(self._saved) > self._size:
            self._saved.popitem(last=False)


def install(llama: Any, bindings: Any, size: int) -> None:
    """Route ``llama`` through a cache of ``size`` sequences (none for 0: prompts are evaluated as llama-cpp-python
    does). The cache lives on in the ``generate`` it installs."""
    if size > 0:
        PrefixCache(llama, bindings, size).install()
