"""The ``in_memory`` backend (FR-014…018), checked against a plain dict by a Hypothesis state machine."""

from __future__ import annotations

import copy
import json
import math
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from aeon_kernel import Engine, Memory, MemoryStoreError
from aeon_kernel.config import load_config
from aeon_plugins.in_memory import InMemoryKVStore, aeon_register_memory_backends
from tests.support.builders import answer, llm_step, plan, tool_step

# Keys chosen to stress prefix search: SQL LIKE wildcards, unicode, keys that are prefixes of each other,
# characters that sort just below/above common ones, and case differences (search is case-sensitive).
TRICKY_KEYS = [
    "a", "ab", "abc", "abd", "ac", "b", "A", "AB",
    "%", "%a", "a%", "a%b", "_", "_a", "a_", "a_b", "a.b", "a*", "a[", "a\\",
    "é", "éa", "e\u0301", "日本", "日本語", "😀", "😀x",
    "a\x00", "a\x00b", " ", " a", "a ", "\U0010ffff", "a\U0010ffff",
]  # fmt: skip

keys = st.sampled_from(TRICKY_KEYS) | st.text(min_size=1, max_size=6)
prefixes = st.sampled_from(["", *TRICKY_KEYS]) | st.text(max_size=4)

finite_floats = st.floats(allow_nan=False, allow_infinity=False)
scalars = st.none() | st.booleans() | st.integers() | finite_floats | st.text(max_size=10)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)
containers = st.lists(json_values, min_size=1, max_size=3) | st.dictionaries(
    st.text(max_size=3), json_values, min_size=1, max_size=3
)


class _Opaque:
    pass


NON_JSON_VALUES = [
    {1, 2},
    frozenset(),
    _Opaque(),
    object(),
    float("nan"),
    float("inf"),
    -float("inf"),
    b"bytes",
    1j,
    {"nested": {1, 2}},
    [1, object()],
    {"deep": [{"x": float("nan")}]},
    {1: "int key"},
    {"ok": {None: "None key"}},
    [{True: "bool key"}],
]


def _mutate(value: Any) -> None:
    if isinstance(value, list):
        value.append("mutated")
    elif isinstance(value, dict):
        value["__mutated__"] = True


class MemoryMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.store = InMemoryKVStore()
        self.model: dict[str, Any] = {}

    @rule(key=keys, value=json_values)
    def write(self, key: str, value: Any) -> None:
        self.store.write(key, value)
        self.model[key] = copy.deepcopy(value)

    def expected_search(self, prefix: str) -> list[tuple[str, Any]]:
        return sorted((k, v) for k, v in self.model.items() if k.startswith(prefix))

    @rule(key=keys)
    def read(self, key: str) -> None:
        assert self.store.read(key) == self.model.get(key)

    @rule(prefix=prefixes)
    def search(self, prefix: str) -> None:
        expected = self.expected_search(prefix)
        found = self.store.search(prefix)
        assert [k for k, _ in found] == [k for k, _ in expected]  # in key order
        assert found == expected

    @rule(prefix=prefixes)
    def release(self, prefix: str) -> None:
        """A run ended: every key under its prefix goes, no other (an empty prefix releases nothing)."""
        self.store.release(prefix)
        if prefix:
            self.model = {k: v for k, v in self.model.items() if not k.startswith(prefix)}

    @rule(key=keys, value=containers)
    def mutating_a_written_value_does_not_change_the_store(self, key: str, value: Any) -> None:
        self.store.write(key, value)
        self.model[key] = copy.deepcopy(value)
        _mutate(value)
        assert self.store.read(key) == self.model[key]

    @rule(key=keys)
    def mutating_a_read_value_does_not_change_the_store(self, key: str) -> None:
        value = self.store.read(key)
        _mutate(value)
        assert self.store.read(key) == self.model.get(key)

    @rule(prefix=prefixes)
    def mutating_search_results_does_not_change_the_store(self, prefix: str) -> None:
        for _, value in self.store.search(prefix):
            _mutate(value)
        assert self.store.search(prefix) == self.expected_search(prefix)

    @rule(key=keys, value=st.sampled_from(NON_JSON_VALUES))
    def non_json_values_are_refused_and_change_nothing(self, key: str, value: Any) -> None:
        with pytest.raises(MemoryStoreError, match="not JSON-serialisable"):
            self.store.write(key, value)
        assert self.store.read(key) == self.model.get(key)

    @rule(key=st.sampled_from(["", None, 1, b"a", ("a",)]), value=json_values)
    def invalid_keys_are_refused(self, key: Any, value: Any) -> None:
        with pytest.raises(MemoryStoreError, match="non-empty strings"):
            self.store.write(key, value)

    @invariant()
    def everything_is_found_by_the_empty_prefix(self) -> None:
        assert [k for k, _ in self.store.search("")] == sorted(self.model)


MemoryMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
TestMemoryMachine = MemoryMachine.TestCase


def test_missing_key_reads_none_and_empty_store_searches_empty() -> None:
    store = InMemoryKVStore()
    assert store.read("missing") is None
    assert store.search("") == []
    assert store.search("a") == []


def test_prefix_search_is_literal_and_case_sensitive() -> None:
    store = InMemoryKVStore()
    for key in ["a%", "ab", "a_", "aX", "A%", "b"]:
        store.write(key, key.upper())
    assert store.search("a%") == [("a%", "A%")]
    assert store.search("a_") == [("a_", "A_")]
    assert [k for k, _ in store.search("a")] == ["a%", "aX", "a_", "ab"]
    assert [k for k, _ in store.search("A")] == ["A%"]


def test_overwrite_replaces_the_value_and_keeps_one_entry() -> None:
    store = InMemoryKVStore()
    store.write("k", 1)
    store.write("k", {"v": 2})
    assert store.read("k") == {"v": 2}
    assert store.search("k") == [("k", {"v": 2})]


def test_falsy_values_are_not_confused_with_missing() -> None:
    store = InMemoryKVStore()
    for key, value in [("zero", 0), ("empty", ""), ("list", []), ("false", False), ("null", None)]:
        store.write(key, value)
        assert store.read(key) == value
    assert dict(store.search("")) == {"zero": 0, "empty": "", "list": [], "false": False, "null": None}


def test_tuples_are_stored_as_json_arrays() -> None:
    store = InMemoryKVStore()
    store.write("t", (1, (2, 3)))
    assert store.read("t") == [1, [2, 3]]


def test_large_and_precise_numbers_round_trip() -> None:
    store = InMemoryKVStore()
    store.write("n", [2**100, -(2**70), 0.1, 1e308, -0.0])
    value = store.read("n")
    assert value[:4] == [2**100, -(2**70), 0.1, 1e308]
    assert math.copysign(1, value[4]) == -1


def test_deeply_nested_values_are_refused_not_crashed() -> None:
    value: Any = []
    for _ in range(100_000):
        value = [value]
    store = InMemoryKVStore()
    with pytest.raises(MemoryStoreError):
        store.write("deep", value)
    assert store.read("deep") is None


def test_concurrent_writers_lose_nothing() -> None:
    store = InMemoryKVStore()

    def writer(n: int) -> None:
        for i in range(300):
            store.write(f"t{n}/{i:03d}", {"thread": n, "i": i})

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for n in range(4):
        found = store.search(f"t{n}/")
        assert [v["i"] for _, v in found] == list(range(300))
    assert len(store.search("t")) == 1200


def test_registered_as_a_memory_backend() -> None:
    registered: list[tuple[str, Any]] = []
    aeon_register_memory_backends(lambda name, factory: registered.append((name, factory)))
    assert [name for name, _ in registered] == ["in_memory"]
    store = registered[0][1]()
    assert isinstance(store, Memory)
    store.close()  # optional hook, must not fail


def test_keep_runs_keeps_released_keys_and_must_be_a_boolean() -> None:
    store = InMemoryKVStore(keep_runs=True)
    store.write("run/r1/1", 1)
    store.release("run/r1/")
    assert store.read("run/r1/1") == 1
    with pytest.raises(MemoryStoreError, match="keep_runs must be true or false"):
        InMemoryKVStore(keep_runs="yes")  # type: ignore[arg-type]


def test_an_engine_serving_many_runs_keeps_none_of_their_keys_unless_told_to(tmp_path: Path) -> None:
    """Issue 31: the default memory no longer grows with every run; ``keep_runs = true`` in aeon.toml keeps them."""
    request = "calculate the sum of 5 and 10"
    for keep, expected in ((False, []), (True, [("1", {"expression": "5 + 10", "value": 15})])):
        (tmp_path / "aeon.toml").write_text(f'[memory]\nuse = "in_memory"\nkeep_runs = {str(keep).lower()}\n')
        script = [
            json.dumps(plan(tool_step("1", "calculator", {"expression": "5 + 10"}), llm_step("2"))),
            answer("15"),
        ]
        config = load_config(tmp_path / "aeon.toml").with_choice("llm", "scripted", responses=script)
        with Engine(config) as engine:
            result = engine.run(request)
            assert result["status"] == "completed", result["message"]
            prefix = f"run/{result['run_id']}/"
            assert [
                (k[len(prefix) :], v) for k, v in engine.memory.search(prefix) if k.endswith("1")
            ] == expected
