"""``aeon flow``: check, draw, run and resume the declarative flows of spec 004 (docs/flows.md).

Exit status: 0 the task ended with success or partial, 1 with failure (or ``validate`` found problems), 3 the TTL
expired, 2 the flow could not start (bad manifests, configuration, input).
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from aeon_cli.options import more_ttl_option, step_through_options, take_over_option
from aeon_cli.output import echo_json, safe_streams, show_request
from aeon_kernel.errors import AeonError, ConfigError
from aeon_kernel.markers import hookimpl
from aeon_kernel.secrets import scrub_secrets

if TYPE_CHECKING:
    from aeon_plugins.flow.engine import FlowEngine, TaskResult

EXIT_SETUP_ERROR = 2


def _fail(exc: AeonError | str) -> NoReturn:
    click.echo(f"Error: {scrub_secrets(str(exc))}", err=True)
    sys.exit(EXIT_SETUP_ERROR)


@click.group()
@click.pass_context
def flow(ctx: click.Context) -> None:
    """Declarative workflows: a DAG of nodes in flow.yaml (see docs/flows.md)."""
    safe_streams(ctx)  # also when this group is run on its own, not under `aeon`


_config = click.option(
    "--config",
    type=click.Path(dir_okay=False),
    help="aeon.toml to use (default: DIR/aeon.toml, ./aeon.toml).",
)
_directory = click.argument("directory", type=click.Path())


@flow.command()
@_directory
@_config
@click.option("--json", "as_json", is_flag=True, help="Print the problems as a JSON list.")
def validate(directory: str, config: str | None, as_json: bool) -> None:
    """Check the flow in DIRECTORY and list every problem (file, line, key, node). Exit 1 if there is any."""
    from aeon_plugins.flow.loader import FlowError

    try:
        loaded = _load(directory, config)
    except FlowError as exc:
        if as_json:
            echo_json([problem.to_dict() for problem in exc.problems])
        else:
            click.echo(scrub_secrets(str(exc)), err=True)
        sys.exit(1)
    except AeonError as exc:
        _fail(exc)
    if as_json:
        click.echo("[]")
    else:
        click.echo(
            f"flow {loaded.name!r}: {len(loaded.nodes)} nodes, {len(loaded.spec.edges)} edges: no problems"
        )


@flow.command()
@_directory
@_config
@click.option("--format", "fmt", type=click.Choice(["mermaid", "dot"]), default="mermaid", show_default=True)
def graph(directory: str, config: str | None, fmt: str) -> None:
    """Print the DAG of the flow in DIRECTORY as a Mermaid flowchart or Graphviz DOT."""
    from aeon_plugins.flow.graph import dot, mermaid

    try:
        loaded = _load(directory, config)
    except AeonError as exc:
        _fail(exc)
    click.echo(mermaid(loaded) if fmt == "mermaid" else dot(loaded), nl=False)


def _run_options(command: Any) -> Any:
    for option in reversed(
        [
            _config,
            click.option(
                "--json", "as_json", is_flag=True, help="Print the Task result (with its history) as JSON."
            ),
            click.option(
                "--log",
                "log_path",
                type=click.Path(dir_okay=False),
                help="Append one JSON line per cycle here.",
            ),
            click.option(
                "--no-log",
                is_flag=True,
                help="Do not record the run (by default it is kept in the user data directory, like `aeon run`'s: "
                "aeon runs, aeon flow resume, aeon inspect).",
            ),
        ]
    ):
        command = option(command)
    return command


@flow.command()
@_directory
@click.option("--input", "input_text", help="The start node's input, as JSON.")
@click.option(
    "--input-file", type=click.Path(dir_okay=False, exists=True), help="Read the input (JSON) from this file."
)
@click.option("--start", help="The start node (default: flow.yaml's start, or its first start node).")
@click.option("--ttl", type=click.IntRange(min=1), help="Maximum number of cycles (default: the flow's ttl).")
@click.option(
    "--record", type=click.Path(dir_okay=False), help="Append every model request/response to this cassette."
)
@click.option(
    "--replay", type=click.Path(dir_okay=False), help="Answer from this cassette instead of the model."
)
@step_through_options(
    "the run in the inspector (a local web page): it pauses before each cycle, showing the next node and its "
    "assembled context"
)
@_run_options
def run(
    directory: str,
    input_text: str | None,
    input_file: str | None,
    start: str | None,
    ttl: int | None,
    record: str | None,
    replay: str | None,
    inspect: bool,
    no_browser: bool,
    config: str | None,
    as_json: bool,
    log_path: str | None,
    no_log: bool,
) -> None:
    """Run the flow in DIRECTORY on an input, printing each stage as it ends.

    Exit status as for `aeon run`: 130 when interrupted (Ctrl-C; `aeon flow resume RUN_ID` goes on)."""
    from aeon_cli.interrupts import interruptible, resume_command

    if (input_text is None) == (input_file is None):
        _fail("give the input with exactly one of --input JSON and --input-file FILE")
    try:
        text = input_text if input_text is not None else Path(input_file).read_text(encoding="utf-8")  # type: ignore[arg-type]
        value = json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        _fail(f"the input is not JSON: {exc}")
    except RecursionError:  # 100,000 nested arrays: no input of a flow nests like that (issue 27)
        _fail("the input nests too deeply to read: give JSON nested less than a few hundred levels")
    with interruptible(
        resume_command("aeon flow resume", _config_of(directory, config)), as_json=as_json
    ) as ctrl_c:
        engine, note = _flow_engine(directory, config, log_path, no_log, record=record, replay=replay)
        ctrl_c.store = engine.engine.state_store
        started, stages = _Started(), None
        engine.engine.pm.register(started, name="aeon.cli.started")
        try:
            if inspect:
                from aeon_cli.inspect.stepper import flow_stages  # the server and Jinja load only here

                stages = flow_stages(
                    engine, value, start=start, ttl=ttl, no_browser=no_browser, as_json=as_json
                )
            else:
                stages = engine.iter(value, start=start, ttl=ttl)
            _report(engine, stages, as_json, note, ctrl_c.command)
        except AeonError as exc:
            _fail(exc)
        except KeyboardInterrupt:
            ctrl_c.quiet()
            _close(stages)
            ctrl_c.run_id = started.run_id
            ctrl_c.report()  # while the store is open
            raise
        finally:
            engine.close()


@flow.command()
@click.argument("run_id")
@more_ttl_option
@take_over_option
@step_through_options(
    "the rest of the run in the inspector: its stored stages shown, it pauses before each new cycle of stages"
)
@_run_options
def resume(
    run_id: str,
    ttl: int | None,
    take_over: bool,
    inspect: bool,
    no_browser: bool,
    config: str | None,
    as_json: bool,
    log_path: str | None,
    no_log: bool,
) -> None:
    """Continue the interrupted flow run RUN_ID from the state store, after its last committed stage (--ttl N:
    with N more cycles, which also continues a run whose TTL expired). Exit status as for `aeon flow run`."""
    resume_flow(run_id, ttl, take_over, inspect, no_browser, config, as_json, log_path, no_log)


def resume_flow(
    run_id: str,
    ttl: int | None,
    take_over: bool,
    inspect: bool,
    no_browser: bool,
    config: str | None,
    as_json: bool,
    log_path: str | None,
    no_log: bool,
    approval: Any = None,
    recorded: dict[str, Any] | None = None,
) -> NoReturn:
    """``aeon flow resume``, and ``aeon approve`` of a flow run (``approval``: the answer it waits for;
    ``recorded``: the run's flow, as :func:`recorded_flow` read it)."""
    from aeon_cli.interrupts import interruptible, resume_command

    with interruptible(resume_command("aeon flow resume", config), run_id, as_json=as_json) as ctrl_c:
        if recorded is None:
            try:
                recorded = recorded_flow(run_id, config, no_log)
            except AeonError as exc:
                _fail(exc)
        if recorded is None:
            _fail(f"run {run_id!r} is not a flow run; resume it with `aeon resume {run_id}`")
        engine, note = _flow_engine(recorded["directory"], config, log_path, no_log)
        ctrl_c.store, stages = engine.engine.state_store, None
        try:
            if inspect:
                from aeon_cli.inspect.stepper import resumed_flow_stages  # the server loads only here

                if (
                    ttl is not None
                ):  # extended (committed) and released first; then stepped through as any other
                    engine.start_resume(run_id, take_over=take_over, ttl=ttl)[0].close()
                stages = resumed_flow_stages(
                    engine, run_id, take_over=take_over, no_browser=no_browser, as_json=as_json
                )
            else:
                stages = engine.iter_resume(run_id, take_over=take_over, ttl=ttl, approval=approval)
            _report(engine, stages, as_json, note, ctrl_c.command)
        except AeonError as exc:
            _fail(exc)
        except KeyboardInterrupt:
            ctrl_c.quiet()
            _close(stages)
            ctrl_c.report()  # while the store is open
            raise
        finally:
            engine.close()


# --- helpers -----------------------------------------------------------------------------------------------------


def recorded_flow(run_id: str, config: str | None, no_log: bool) -> dict[str, Any] | None:
    """The flow the stored run ``run_id`` records (its manifest's ``flow``, with the directory it was loaded from),
    from the store the CLI records into; None for a run that is not a flow's. AeonError when it cannot be read."""
    from aeon_cli.recording import with_default_store
    from aeon_kernel.config import load_config
    from aeon_kernel.engine import Engine

    chosen = load_config(config)
    with Engine(chosen if no_log else with_default_store(chosen)) as plain:
        store = plain.state_store
        if store is None:
            raise ConfigError(
                'resuming needs a state store: set [state] use = "sqlite" in aeon.toml, or drop --no-log'
            )
        recorded = store.load(run_id).manifest.get("flow")
    return recorded if isinstance(recorded, dict) and recorded.get("directory") else None


def _load(directory: str, config: str | None) -> Any:
    """The flow, checked against what the plugins registered, its node code built (but no model, memory or tool)."""
    from pathlib import Path

    from aeon_kernel.engine import Engine
    from aeon_plugins.flow.checks import Known
    from aeon_plugins.flow.engine import node_functions
    from aeon_plugins.flow.loader import load_flow

    if config is None and (Path(directory) / "aeon.toml").is_file():
        config = str(Path(directory) / "aeon.toml")
    with Engine(config) as engine:
        registries = engine.registries
        loaded = load_flow(
            directory,
            Known(
                nodes=registries["nodes"].names(),
                tools=engine.tools.list_all(),  # what runs get: a tool that needs a grant is there once granted
                policies=registries["retrieval_policies"].names(),
                memory_backends=registries["memory_backends"].names(),
            ),
        )
        node_functions(registries, loaded)
        return loaded


def _flow_engine(
    directory: str, config: str | None, log_path: str | None, no_log: bool, **options: Any
) -> tuple[FlowEngine, Callable[[str], str] | None]:
    """The flow's engine, and (unless ``--no-log``) what to say at the end about where its run was recorded: like
    ``aeon run``, in the user data directory where the configuration names no state store or log (FR-037)."""
    from pathlib import Path

    from aeon_cli import recording
    from aeon_kernel.config import load_config
    from aeon_kernel.engine import Engine

    beside = Path(directory) / "aeon.toml"
    try:
        chosen = load_config(config or (str(beside) if beside.is_file() else None))
        log: str | Path | None = log_path
        if not no_log:
            chosen = recording.with_default_store(chosen)
            log = log_path or recording.default_log(chosen)
        engine = Engine.from_config_dir(directory, chosen, **options)
        if log:
            engine.engine.add_sink("jsonl", path=str(log))
    except AeonError as exc:
        _fail(exc)
    from aeon_cli.runs import retain

    retain(engine.engine)  # [retention]: old runs go before this one is recorded
    if no_log:
        return engine, None
    return engine, lambda run_id: recording.note(chosen, run_id, Path(log) if log else None)


def _config_of(directory: str, config: str | None) -> str | None:
    """The configuration a flow in ``directory`` runs with, where one is named: --config, else DIR/aeon.toml."""
    from pathlib import Path

    beside = Path(directory) / "aeon.toml"
    return config or (str(beside) if beside.is_file() else None)


def _close(stages: Any) -> None:
    """Close the stages' generator: a run it holds between two stages is released (resumable at once)."""
    with contextlib.suppress(Exception):
        getattr(stages, "close", lambda: None)()


class _Started:
    """Remembers the id of the run its engine starts, for what Ctrl-C says (the flow engine starts it inside)."""

    run_id: str | None = None

    @hookimpl
    def aeon_run_start(self, run_id: str) -> None:
        self.run_id = run_id


def _report(
    engine: FlowEngine,
    stages: Any,
    as_json: bool,
    note: Callable[[str], str] | None = None,
    resume_with: str = "aeon flow resume",
) -> NoReturn:
    """Drain ``stages`` (a line per stage unless ``as_json``), print the result, exit with its status."""
    for stage in stages:
        if not as_json:
            click.echo(scrub_secrets(_stage_line(stage)))
    result: TaskResult | None = engine.result
    assert result is not None
    if as_json:
        echo_json(result.to_dict())
    else:
        click.echo(f"\n{result.status}: {scrub_secrets(result.message)}")
        echo_json(result.output, indent=2)
        click.echo(f"run {result.run_id}")
    if note is not None:
        click.echo(note(result.run_id), err=True)
    run_status = result.run.status
    if run_status == "waiting":
        show_request(result.run.details.get("approval") or {}, result.run_id)
        sys.exit(4)
    if run_status == "ttl_expired" and engine.engine.state_store is not None:
        click.echo(
            f"The TTL expired; {resume_with} {result.run_id} --ttl N gives the run N more cycles.", err=True
        )
    sys.exit(3 if run_status == "ttl_expired" else 1 if result.status == "failure" else 0)


def _stage_line(stage: dict[str, Any]) -> str:
    mark = "✓" if stage.get("status") == "success" else "✗"
    route = f" → {', '.join(stage['route'])}" if stage.get("route") else ""
    line = f"{mark} [{stage.get('seq')}] {stage.get('task')}/{stage.get('node')} ({stage.get('role')}){route}"
    if stage.get("error"):
        line += f"\n    {stage['error']}"
    return line
