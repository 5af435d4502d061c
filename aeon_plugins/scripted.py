"""The ``scripted`` LLM adapter: replays prepared responses in order, for tests, demos and bug reports
(:mod:`aeon_kernel.testing.scripted`; ``[llm] use = "scripted"`` and ``responses = "file.json"``)."""

from __future__ import annotations

from aeon_kernel import Register, hookimpl
from aeon_kernel.testing.scripted import ScriptedLLM as ScriptedLLM
from aeon_kernel.testing.scripted import load_script as load_script


@hookimpl
def aeon_register_llm_adapters(register: Register) -> None:
    register("scripted", ScriptedLLM)
