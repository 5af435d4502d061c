"""Evaluation suites (spec 004 §10.3, issue 15): a directory of cases, each a request (or a flow's input) and what
its run must give, run live or from cassettes, each outcome kept in the artifact store.

``SUITE_DIR/suite.yaml`` names the suite, optionally an ``aeon.toml`` and a flow directory, and its cases; each
case has an ``id``, a ``request`` (or, in a flow suite, an ``input``), optionally a ``cassette`` to replay, and
``expect``: the assertions its run must pass. A file that cannot be used is a :class:`SuiteError` listing every
problem with the file, line and case, so that a broken suite is told apart from a regression.

This module has no terminal code: ``aeon eval`` (:mod:`aeon_cli.evaluate`) shows progress and the summary.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from aeon_kernel.errors import AeonError

if TYPE_CHECKING:
    from aeon_kernel.config import AeonConfig
    from aeon_kernel.runtime.artifacts import ArtifactStore

SUITE_FILE: Final = "suite.yaml"
#: how a case's run ends: ``aeon run``'s statuses, and a flow task's (spec 004 §3.4)
RUN_STATUSES: Final = ("completed", "failed", "ttl_expired", "waiting")
FLOW_STATUSES: Final = ("success", "partial", "failure")
#: a value quoted in a failure message is cut to this many characters
_SHOWN: Final = 200

#: ``replay``: a case with a cassette is answered from it; ``live``: every case asks the model; ``record``: live,
#: and each case's cassette is written anew
Mode = Literal["replay", "live", "record"]
#: ``error``: the case could not be evaluated (its engine could not be built, its cassette is stale, ...)
Result = Literal["passed", "failed", "error"]


class SuiteError(AeonError):
    """The suite itself cannot be run as written (its file, a case, a cassette, its configuration): every problem,
    each naming the file, the line and the case."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        heading = "the evaluation suite cannot be run" if len(problems) != 1 else ""
        super().__init__(
            "\n  ".join([heading, *self.problems]) if heading else self.problems[0],
        )


# --- the suite file --------------------------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Expect(_Strict):
    """What a case's run must give; every key set is one assertion (a key left out asserts nothing)."""

    status: str | None = None
    #: the answer, equal (a request case); ``answer: null`` asserts there is none
    answer: Any = None
    #: strings that must all appear in the answer (its text, or its JSON when it is not a string)
    answer_contains: list[str] | None = None
    #: a regular expression the answer's text must match (``re.search``)
    answer_matches: str | None = None
    #: the output, equal (a flow case, or a request case with a ``schema``)
    output: Any = None
    #: keys the output must have, with these values (nested objects: a subset again)
    output_contains: dict[str, Any] | None = None
    #: the tools the run called, in order
    tools: list[str] | None = None
    #: the run's verification verdict (decision 0018): ``verified``, ``unverified`` or ``contradicted``
    verification: Literal["verified", "unverified", "contradicted"] | None = None
    max_cycles: int | None = Field(default=None, ge=1)

    @field_validator("answer_contains", mode="before")
    @classmethod
    def _one_or_more(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("answer_matches")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from None
        return value

    @model_validator(mode="after")
    def _something(self) -> Expect:
        if not self.model_fields_set:
            raise ValueError(f"asserts nothing; set at least one of {', '.join(type(self).model_fields)}")
        return self


class TurnCase(_Strict):
    """One turn of a conversation case: what is said, and what its run must give."""

    request: str = Field(min_length=1)
    expect: Expect


class Case(_Strict):
    """One request (or flow input), or a conversation's turns, and what each run must give."""

    id: str = Field(min_length=1, pattern=r"^\S+$")
    request: str | None = Field(default=None, min_length=1)
    #: a conversation (a session, issue 29): each turn sees the ones before it
    turns: list[TurnCase] | None = Field(default=None, min_length=1)
    #: the flow's input (a flow suite); any JSON value
    input: Any = None
    #: the cassette to replay, relative to the suite directory
    cassette: str | None = Field(default=None, min_length=1)
    #: a request case's typed output: the JSON Schema it is written under (``aeon run --schema``)
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    #: what the run must give (a conversation's turns say it each)
    expect: Expect | None = None


class Suite(_Strict):
    """``suite.yaml``, as written (paths relative to the suite directory)."""

    name: str = Field(min_length=1)
    description: str | None = None
    #: an aeon.toml (default: the suite directory's, then the flow directory's, then the usual lookup)
    config: str | None = Field(default=None, min_length=1)
    #: a flow directory: the cases then give the flow's ``input`` instead of a ``request``
    flow: str | None = Field(default=None, min_length=1)
    cases: list[Case] = Field(min_length=1)


@dataclass(frozen=True)
class LoadedSuite:
    """A suite checked and ready to run: its file, its directory, what it says."""

    file: Path
    directory: Path
    spec: Suite

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def flow(self) -> Path | None:
        return self.directory / self.spec.flow if self.spec.flow else None

    def cassette(self, case: Case) -> Path | None:
        return self.directory / case.cassette if case.cassette else None

    def config_path(self) -> Path | None:
        """The aeon.toml the suite runs with (None: the usual lookup, ``$AEON_CONFIG`` then ``./aeon.toml``)."""
        if self.spec.config:
            return self.directory / self.spec.config
        for directory in (self.directory, self.flow):
            if directory is not None and (directory / "aeon.toml").is_file():
                return directory / "aeon.toml"
        return None

    def select(self, ids: Sequence[str]) -> list[Case]:
        """The cases named ``ids`` (all when none), in the suite's order; an unknown id is a SuiteError."""
        if not ids:
            return list(self.spec.cases)
        known = [case.id for case in self.spec.cases]
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise SuiteError(
                [f"{self.file}: no case {', '.join(map(repr, unknown))}; the cases are {', '.join(known)}"]
            )
        return [case for case in self.spec.cases if case.id in ids]

    def check_ready(self, cases: Sequence[Case], mode: Mode) -> None:
        """Raise a SuiteError when what the run needs is missing: the flow directory, the aeon.toml, a case's
        cassette (when it is to be replayed)."""
        problems = []
        if self.flow is not None and not (self.flow / "flow.yaml").is_file():
            problems.append(f"{self.file}: flow: {self.flow} is not a flow directory (it has no flow.yaml)")
        if self.spec.config and not (self.directory / self.spec.config).is_file():
            problems.append(f"{self.file}: config: {self.directory / self.spec.config} does not exist")
        if mode == "replay":
            for case in cases:
                cassette = self.cassette(case)
                if cassette is not None and not cassette.is_file():
                    problems.append(
                        f"{self.file}: case {case.id!r}: cassette {cassette} does not exist; record it with "
                        f"aeon eval {self.directory} --record --case {case.id}"
                    )
        if problems:
            raise SuiteError(problems)


def load_suite(path: str | Path) -> LoadedSuite:
    """The suite in directory ``path`` (or the suite file ``path``), checked: a SuiteError lists every problem."""
    from aeon_plugins.flow.yamlfile import Loaded, dotted, load_file

    given = Path(path)
    file = given if given.is_file() else given / SUITE_FILE
    if not given.exists():
        raise SuiteError([f"{given}: no such suite directory"])
    loaded = load_file(file, str(file))
    if not isinstance(loaded, Loaded):
        raise SuiteError([str(loaded)])
    data = loaded.value
    if not isinstance(data, dict):
        raise SuiteError([f"{file}: must be a mapping with name and cases, got {type(data).__name__}"])

    problems: list[tuple[int, str]] = []  # (line, problem): reported in the file's order

    def problem(loc: tuple[str | int, ...], message: str) -> None:
        line = loaded.line(loc)
        case = _case_id(data, loc)
        where = f"{file}:{line}" if line else str(file)
        problems.append(
            (line or 0, f"{where}: {dotted(loc) or 'suite'}{f' (case {case!r})' if case else ''}: {message}")
        )

    try:
        spec: Suite | None = Suite.model_validate(data)
    except ValidationError as exc:
        spec = None
        for error in exc.errors():
            problem(_loc(error), _message(error))
    # what the schema cannot say, for every case that is well formed on its own (one bad case hides nothing)
    raw = data.get("cases")
    flow = data.get("flow") is not None
    seen: set[str] = set()
    for i, item in enumerate(raw if isinstance(raw, list) else []):
        case_id = item.get("id") if isinstance(item, dict) else None
        if isinstance(case_id, str):
            if case_id in seen:
                problem(("cases", i, "id"), f"the id {case_id!r} is given to two cases")
            seen.add(case_id)
        try:
            case = Case.model_validate(item)
        except ValidationError:
            continue  # reported above
        for loc, message in _case_problems(case, flow=flow):
            problem(("cases", i, *loc), message)
    if problems or spec is None:
        raise SuiteError([text for _, text in sorted(problems, key=lambda p: p[0])])
    return LoadedSuite(file, file.parent, spec)


def _loc(error: Any) -> tuple[str | int, ...]:
    return tuple(part for part in error["loc"] if isinstance(part, int) or not part.startswith("function-"))


def _message(error: Any) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown key"
    if error["type"] == "missing":
        return "is required"
    if error["type"] == "string_pattern_mismatch":
        return f"must be one word, without spaces; got {error['input']!r}"
    message = str(error["msg"])
    return message.removeprefix("Value error, ")


def _case_id(data: dict[str, Any], loc: tuple[str | int, ...]) -> str | None:
    if len(loc) < 2 or loc[0] != "cases" or not isinstance(loc[1], int):
        return None
    cases = data.get("cases")
    if not isinstance(cases, list) or not 0 <= loc[1] < len(cases) or not isinstance(cases[loc[1]], dict):
        return None
    found = cases[loc[1]].get("id")
    return found if isinstance(found, str) else None


def _case_problems(case: Case, *, flow: bool) -> list[tuple[tuple[str, ...], str]]:
    """What the schema cannot say: a request case and a flow case take different keys and statuses."""
    given = case.model_fields_set
    expect = case.expect.model_fields_set if case.expect is not None else set()
    problems: list[tuple[tuple[str, ...], str]] = []
    if case.turns is not None:
        if flow:
            problems.append((("turns",), "a flow suite's cases give the flow's input, not a conversation"))
        for key in sorted(given & {"request", "expect", "schema_"}):
            shown = key.rstrip("_")
            problems.append(((shown,), "a conversation case says it for each turn, under turns"))
        return problems
    if case.expect is None:
        problems.append((("expect",), "is required"))
    if flow:
        if "request" in given:
            problems.append((("request",), "a flow suite's cases give the flow's input, not a request"))
        if "input" not in given:
            problems.append((("input",), "is required (the flow's input) in a flow suite"))
        wrong = sorted(expect & {"answer", "answer_contains", "answer_matches"})
        hint = "a flow case asserts output or output_contains"
        if case.schema_ is not None:
            problems.append((("schema",), "only a request case takes a schema (a flow's nodes have theirs)"))
    else:
        if "input" in given:
            problems.append((("input",), "only a flow suite's cases take an input (set flow: in the suite)"))
        if case.request is None:
            problems.append((("request",), "is required"))
        wrong = sorted(expect & {"output", "output_contains"}) if case.schema_ is None else []
        hint = "a request case asserts answer, answer_contains or answer_matches (output: give it a schema)"
        if case.schema_ is not None:
            from aeon_kernel.output_types import check_output_schema

            try:
                check_output_schema(case.schema_)
            except AeonError as exc:
                problems.append((("schema",), str(exc)))
    problems += [(("expect", key), f"does not apply here: {hint}") for key in wrong]
    statuses = FLOW_STATUSES if flow else RUN_STATUSES
    if case.expect is not None and case.expect.status is not None and case.expect.status not in statuses:
        kind = "a flow case" if flow else "a request case"
        problems.append(
            (
                ("expect", "status"),
                f"must be one of {', '.join(statuses)} for {kind}, got {case.expect.status!r}",
            )
        )
    if "input" in given:
        try:
            json.dumps(case.input, allow_nan=False)
        except (TypeError, ValueError) as exc:
            problems.append((("input",), f"must be JSON (quote dates and times): {exc}"))
    return problems


# --- running ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """How one case went: its result, every failed assertion (expected vs got), its run, how long it took."""

    suite: str
    case: str
    result: Result
    failures: tuple[str, ...]
    duration: float
    run_id: str
    mode: str
    cassette: str | None = None
    #: what the run gave: status, answer or output, tools, cycles
    got: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.result == "passed"

    def to_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "case": self.case,
            "result": self.result,
            "passed": self.passed,
            "failures": list(self.failures),
            "duration": round(self.duration, 3),
            "run_id": self.run_id,
            "mode": self.mode,
            "cassette": self.cassette,
            "got": self.got,
        }


def run_suite(
    suite: LoadedSuite,
    config: AeonConfig,
    *,
    mode: Mode = "replay",
    cases: Sequence[Case] | None = None,
    store: ArtifactStore | None = None,
    on_start: Callable[[Case], None] | None = None,
    on_done: Callable[[Outcome], None] | None = None,
) -> list[Outcome]:
    """Run ``cases`` (default: all) of ``suite`` one after another, each on an engine of its own (its cassette,
    nothing shared with the case before), and put each outcome into ``store`` as it ends."""
    from aeon_kernel.runtime.artifacts import Artifact
    from aeon_kernel.secrets import scrub_secrets_data

    outcomes = []
    for case in cases if cases is not None else suite.spec.cases:
        if on_start is not None:
            on_start(case)
        outcome = run_case(suite, case, config, mode=mode)
        if store is not None:
            store.put(
                [
                    Artifact(
                        run_id=outcome.run_id,
                        kind="evaluation",
                        node=case.id,
                        schema_name=suite.name,
                        value=scrub_secrets_data(outcome.to_dict()),
                    )
                ]
            )
        outcomes.append(outcome)
        if on_done is not None:
            on_done(outcome)
    return outcomes


def run_case(suite: LoadedSuite, case: Case, config: AeonConfig, *, mode: Mode = "replay") -> Outcome:
    """Run one case and judge it. An error that stops the case (its engine cannot be built, a stale cassette) is
    an ``error`` outcome, not an exception."""
    cassette = suite.cassette(case)
    replay = cassette if mode == "replay" and cassette is not None else None
    recording = cassette.with_name(cassette.name + ".recording") if mode == "record" and cassette else None
    used = "replay" if replay is not None else "record" if recording is not None else "live"
    started = time.perf_counter()
    run_id: str | None = None
    try:
        if recording is not None:
            recording.unlink(missing_ok=True)
        if case.turns is not None:
            got, run_id, errors = _run_conversation(case.turns, config, replay=replay, record=recording)
        elif suite.flow is not None:
            got, run_id, errors = _run_flow(suite.flow, case, config, replay=replay, record=recording)
        else:
            got, run_id, errors = _run_request(case, config, replay=replay, record=recording)
        stale = [e["message"] for e in errors if e.get("type") == "CassetteMissError"]
        if stale:
            result: Result = "error"
            failures = [f"stale cassette: {stale[0]} (aeon eval {suite.directory} --record --case {case.id})"]
        else:
            failures = (
                [
                    f"turn {number}: {failure}"
                    for number, (turn, said) in enumerate(zip(case.turns, got["turns"], strict=True), 1)
                    for failure in judge(turn.expect, said)
                ]
                if case.turns is not None
                else judge(case.expect, got)
                if case.expect is not None
                else []
            )
            result = "failed" if failures else "passed"
        if recording is not None and cassette is not None and recording.is_file():  # a flow may ask no model
            os.replace(recording, cassette)  # only a whole run replaces the cassette it had
    except AeonError as exc:
        result, failures, got = "error", [f"{type(exc).__name__}: {exc}"], {}
    finally:
        if recording is not None:
            recording.unlink(missing_ok=True)
    return Outcome(
        suite=suite.name,
        case=case.id,
        result=result,
        failures=tuple(failures),
        duration=time.perf_counter() - started,
        run_id=run_id or uuid.uuid4().hex,
        mode=used,
        cassette=str(cassette) if cassette else None,
        got=got,
    )


def _run_request(
    case: Case, config: AeonConfig, *, replay: Path | None, record: Path | None
) -> tuple[dict[str, Any], str, list[dict[str, Any]]]:
    """``aeon run REQUEST`` for one case, as ``aeon run`` does it: every component built before the run."""
    from aeon_kernel.engine import Engine

    assert case.request is not None  # load_suite checked it
    with Engine(config, replay=replay, record=record) as engine:
        engine.check_choices()
        engine.build_selected()
        result = engine.orchestrator().execute(case.request, output_type=case.schema_)
    return _got(result), result["run_id"], list(result.get("errors", []))


def _got(result: dict[str, Any]) -> dict[str, Any]:
    """What a request's run gave, as a case's ``expect`` is judged against it."""
    state = result["final_state"]
    return {
        "status": result["status"],
        "answer": result["answer"],
        "output": result.get("output"),
        "tools": [call["tool_name"] for call in state.get("tool_history", [])],
        "cycles": state.get("cycle"),
        "verification": _verdict(result),
    }


def _run_conversation(
    turns: Sequence[TurnCase], config: AeonConfig, *, replay: Path | None, record: Path | None
) -> tuple[dict[str, Any], str, list[dict[str, Any]]]:
    """The turns of a conversation case, one session on one engine (its cassette answers every turn)."""
    from aeon_kernel.engine import Engine
    from aeon_plugins.sessions import Session

    said, errors = [], []
    with Engine(config, replay=replay, record=record) as engine:
        engine.check_choices()
        engine.build_selected()
        session = Session(engine)
        for turn in turns:
            result = session.ask(turn.request)
            said.append(_got(result))
            errors += result.get("errors", [])
    return {"turns": said}, session.id, errors


def _run_flow(
    flow: Path, case: Case, config: AeonConfig, *, replay: Path | None, record: Path | None
) -> tuple[dict[str, Any], str, list[dict[str, Any]]]:
    from aeon_kernel.engine import Engine

    with Engine.from_config_dir(flow, config, replay=replay, record=record) as engine:
        task = engine.run(case.input)
    run = task.run.to_dict()
    state = run["final_state"]
    got = {
        "status": task.status,
        "output": task.output,
        "tools": [call["tool_name"] for call in state.get("tool_history", [])],
        "cycles": state.get("cycle"),
        "verification": _verdict(run),
    }
    return got, task.run_id, list(run.get("errors", []))


def _verdict(result: dict[str, Any]) -> str | None:
    verification = result.get("verification")
    return verification.get("verdict") if isinstance(verification, dict) else None


# --- assertions ------------------------------------------------------------------------------------------------


def judge(expect: Expect, got: dict[str, Any]) -> list[str]:
    """Every assertion of ``expect`` that ``got`` fails, each saying what was expected and what came."""
    asked = expect.model_fields_set
    failures = []
    if expect.status is not None and got.get("status") != expect.status:
        failures.append(f"status: expected {expect.status!r}, got {got.get('status')!r}")
    answer = got.get("answer")
    if "answer" in asked and answer != expect.answer:
        failures.append(f"answer: expected {_shown(expect.answer)}, got {_shown(answer)}")
    text = (
        answer
        if isinstance(answer, str)
        else ""
        if answer is None
        else json.dumps(answer, ensure_ascii=False, default=str)
    )
    for wanted in expect.answer_contains or ():
        if wanted not in text:
            failures.append(f"answer_contains: expected {wanted!r} in the answer, got {_shown(answer)}")
    if expect.answer_matches is not None and not re.search(expect.answer_matches, text):
        failures.append(
            f"answer_matches: expected a match of /{expect.answer_matches}/, got {_shown(answer)}"
        )
    output = got.get("output")
    if "output" in asked and output != expect.output:
        failures.append(f"output: expected {_shown(expect.output)}, got {_shown(output)}")
    if expect.output_contains is not None:
        failures += [f"output_contains: {problem}" for problem in _subset(expect.output_contains, output, "")]
    if expect.tools is not None and got.get("tools") != expect.tools:
        failures.append(f"tools: expected {expect.tools}, got {got.get('tools')}")
    if expect.verification is not None and got.get("verification") != expect.verification:
        failures.append(f"verification: expected {expect.verification!r}, got {got.get('verification')!r}")
    cycles = got.get("cycles")
    if expect.max_cycles is not None and (not isinstance(cycles, int) or cycles > expect.max_cycles):
        failures.append(f"max_cycles: expected at most {expect.max_cycles} cycles, got {cycles}")
    return failures


def _subset(wanted: dict[str, Any], got: Any, path: str) -> list[str]:
    """Where ``got`` differs from ``wanted`` on the keys ``wanted`` has (nested objects compared the same way)."""
    if not isinstance(got, dict):
        return [f"expected an object{' at ' + path if path else ''}, got {_shown(got)}"]
    problems = []
    for key, value in wanted.items():
        at = f"{path}.{key}" if path else key
        if key not in got:
            problems.append(f"expected key {at!r}, missing from {_shown(got)}")
        elif isinstance(value, dict) and isinstance(got[key], dict):
            problems += _subset(value, got[key], at)
        elif got[key] != value:
            problems.append(f"at {at!r}: expected {_shown(value)}, got {_shown(got[key])}")
    return problems


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


# --- JUnit XML -------------------------------------------------------------------------------------------------

#: characters XML 1.0 cannot hold, even escaped (a model's answer may have any)
_NOT_XML: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def junit_xml(suite_name: str, outcomes: Sequence[Outcome]) -> str:
    """The outcomes as JUnit XML, which CI systems show per test: one ``testsuite``, a ``testcase`` per case,
    ``failure`` for a failed one and ``error`` for one that could not be evaluated."""

    def clean(text: str) -> str:
        return _NOT_XML.sub("\ufffd", text)

    total = sum(outcome.duration for outcome in outcomes)
    counts = {
        "tests": str(len(outcomes)),
        "failures": str(sum(o.result == "failed" for o in outcomes)),
        "errors": str(sum(o.result == "error" for o in outcomes)),
        "skipped": "0",
        "time": f"{total:.3f}",
    }
    root = ET.Element("testsuites", {"name": clean(suite_name), **counts})
    testsuite = ET.SubElement(root, "testsuite", {"name": clean(suite_name), **counts})
    for outcome in outcomes:
        testcase = ET.SubElement(
            testsuite,
            "testcase",
            {
                "classname": clean(f"aeon.eval.{suite_name}"),
                "name": clean(outcome.case),
                "time": f"{outcome.duration:.3f}",
            },
        )
        properties = ET.SubElement(testcase, "properties")
        ET.SubElement(properties, "property", {"name": "run_id", "value": outcome.run_id})
        ET.SubElement(properties, "property", {"name": "mode", "value": outcome.mode})
        if outcome.result != "passed":
            tag = "failure" if outcome.result == "failed" else "error"
            problem = ET.SubElement(testcase, tag, {"message": clean(outcome.failures[0]), "type": tag})
            problem.text = clean("\n".join([*outcome.failures, f"run {outcome.run_id}"]))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
