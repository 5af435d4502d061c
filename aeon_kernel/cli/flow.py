"""``aeon flow``: check, draw, run and resume the declarative flows of spec 004 (docs/flows.md).

Exit status: 0 the task ended with success or partial, 1 with failure (or ``validate`` found problems), 3 the TTL
expired, 2 the flow could not start (bad manifests, configuration, input).
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, NoReturn

import click

from aeon_kernel.cli.output import echo_json, safe_streams
from aeon_kernel.errors import AeonError
from aeon_kernel.secrets import scrub_secrets

if TYPE_CHECKING:
    from aeon_kernel.flow.engine import FlowEngine, TaskResult

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
    from aeon_kernel.flow.loader import FlowError

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
    from aeon_kernel.flow.graph import dot, mermaid

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
@click.option(
    "--inspect",
    is_flag=True,
    help="Step through the run in the inspector (a local web page): it pauses before each cycle, showing the "
    "next node and its assembled context; Step, Continue and Stop drive it (Stop: exit status 130).",
)
@click.option("--no-browser", is_flag=True, help="With --inspect: print the page's URL, open no browser.")
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
) -> None:
    """Run the flow in DIRECTORY on an input, printing each stage as it ends."""
    if (input_text is None) == (input_file is None):
        _fail("give the input with exactly one of --input JSON and --input-file FILE")
    try:
        text = input_text if input_text is not None else open(input_file, encoding="utf-8").read()  # type: ignore[arg-type]  # noqa: SIM115
        value = json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        _fail(f"the input is not JSON: {exc}")
    engine = _flow_engine(directory, config, record=record, replay=replay, log_path=log_path)
    try:
        if inspect:
            from aeon_kernel.cli.inspect.stepper import flow_stages  # the server and Jinja load only here

            stages = flow_stages(engine, value, start=start, ttl=ttl, no_browser=no_browser, as_json=as_json)
        else:
            stages = engine.iter(value, start=start, ttl=ttl)
        _report(engine, stages, as_json)
    except AeonError as exc:
        _fail(exc)
    finally:
        engine.close()


@flow.command()
@click.argument("run_id")
@click.option(
    "--take-over",
    is_flag=True,
    help="Also take a run held by a process on another host (which cannot be checked): say that it is gone.",
)
@_run_options
def resume(run_id: str, take_over: bool, config: str | None, as_json: bool, log_path: str | None) -> None:
    """Continue the interrupted flow run RUN_ID from the state store, after its last committed stage."""
    from aeon_kernel.engine import Engine

    try:
        with Engine(config) as plain:
            store = plain.state_store
            if store is None:
                _fail('resuming needs a state store: set [state] use = "sqlite" in aeon.toml')
            recorded = store.load(run_id).manifest.get("flow")
    except AeonError as exc:
        _fail(exc)
    if not isinstance(recorded, dict) or not recorded.get("directory"):
        _fail(f"run {run_id!r} is not a flow run; resume it with `aeon resume {run_id}`")
    engine = _flow_engine(recorded["directory"], config, log_path=log_path)
    try:
        _report(engine, engine.iter_resume(run_id, take_over=take_over), as_json)
    except AeonError as exc:
        _fail(exc)
    finally:
        engine.close()


# --- helpers -----------------------------------------------------------------------------------------------------


def _load(directory: str, config: str | None) -> Any:
    """The flow, checked against what the plugins registered, its node code built (but no model, memory or tool)."""
    from pathlib import Path

    from aeon_kernel.engine import Engine
    from aeon_kernel.flow.checks import Known
    from aeon_kernel.flow.engine import node_functions
    from aeon_kernel.flow.loader import load_flow

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
    directory: str, config: str | None, log_path: str | None = None, **options: Any
) -> FlowEngine:
    from aeon_kernel.engine import Engine

    try:
        engine = Engine.from_config_dir(directory, config, **options)
        if log_path:
            engine.engine.add_sink("jsonl", path=log_path)
    except AeonError as exc:
        _fail(exc)
    return engine


def _report(engine: FlowEngine, stages: Any, as_json: bool) -> NoReturn:
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
    run_status = result.run.status
    sys.exit(3 if run_status == "ttl_expired" else 1 if result.status == "failure" else 0)


def _stage_line(stage: dict[str, Any]) -> str:
    mark = "✓" if stage.get("status") == "success" else "✗"
    route = f" → {', '.join(stage['route'])}" if stage.get("route") else ""
    line = f"{mark} [{stage.get('seq')}] {stage.get('task')}/{stage.get('node')} ({stage.get('role')}){route}"
    if stage.get("error"):
        line += f"\n    {stage['error']}"
    return line
