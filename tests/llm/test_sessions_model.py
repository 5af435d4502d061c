"""A conversation on the embedded model (issue 29): the third turn needs the first turn's result and is given it
through the session's context; whether the model uses it right or not, the result claims no more than was
checked. Marked ``model`` (CI runs it); the frozen sets' rates are in bench/sessions."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from aeon_kernel import Engine
from aeon_kernel.config import AeonConfig
from aeon_kernel.kit import request_parts
from aeon_plugins.sessions import Session

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    pytest.importorskip("llama_cpp")
    with Engine(AeonConfig(ttl=12)) as engine:
        yield engine


def test_the_third_turn_uses_the_first_turns_result(engine: Engine) -> None:
    session = Session(engine)
    first = session.ask("what is 20 minus 8?")
    session.ask("and what is 7 times 3?")
    third = session.ask("multiply the first answer by 2")
    values = [call["result"]["value"] for call in first["final_state"]["tool_history"] if call["result"]]
    assert values[:1] == [12], first["final_state"]["tool_history"]
    given, asked = request_parts(third["final_state"]["request"])
    assert asked == "multiply the first answer by 2" and "answered" in given and "12" in given
    # The 270M model often takes a wrong number here (bench/sessions); whatever it does, the run claims no more
    # than was checked: a right call is reported verified, a wrong one never is.
    values = [call["result"]["value"] for call in third["final_state"]["tool_history"] if call["result"]]
    verdict = third["verification"]["verdict"]
    if values and values[-1] == 24:
        assert third["status"] == "completed" and "24" in str(third["answer"]), third["message"]
    else:
        assert verdict != "verified" and third["status"] != "completed", (values, third["message"])
