"""The ``aeon`` command line.

``aeon run`` shows the plan and each step's status live (rich), or prints the result as JSON with ``--json``.
Every failure ends in a clear message and an exit status, never a bare traceback:

* 0 — the run completed;  1 — the run failed;  3 — the TTL expired;
* 2 — the request could not start (bad configuration, unknown component, invalid option, a component that
  cannot be built).

Output never fails on text the terminal cannot encode (a lone surrogate in a model's answer, an emoji on a
latin-1 console): every command writes through :mod:`aeon_cli.output`.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final, NoReturn

import click

from aeon_cli.options import more_ttl_option, output_schema_option, step_through_options, take_over_option
from aeon_cli.output import echo_json, safe_streams, show_request
from aeon_kernel.errors import AeonError
from aeon_kernel.secrets import scrub_secrets
from aeon_kernel.version import __version__

EXIT_CODES: Final = {"completed": 0, "failed": 1, "ttl_expired": 3, "waiting": 4}
#: ``aeon_kernel.runtime.artifacts.ArtifactKind``, written out: the CLI does not import the data model to start
ARTIFACT_KINDS: Final = (
    "plan",
    "tool_result",
    "step_output",
    "stage_output",
    "memory_snapshot",
    "answer",
    "telemetry",
    "model_call",
    "pass_event",
    "evaluation",
    "approval",
)
EXIT_SETUP_ERROR: Final = 2


def _engine(config: Any, **options: Any) -> Any:
    from aeon_kernel.engine import Engine

    return Engine(config, **options)


def _fail_setup(exc: AeonError) -> NoReturn:
    click.echo(f"Error: {scrub_secrets(str(exc))}", err=True)
    sys.exit(EXIT_SETUP_ERROR)


@click.group()
@click.version_option(__version__, prog_name="aeon")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Aeon: plan → tool → thought, with every model output validated."""
    safe_streams(ctx)


def _run_options(command: Any) -> Any:
    """The options `aeon run` and `aeon resume` share."""
    options = [
        click.option(
            "--config",
            type=click.Path(dir_okay=False),
            help="aeon.toml to use (default: $AEON_CONFIG, ./aeon.toml).",
        ),
        click.option(
            "--log", "log_path", type=click.Path(dir_okay=False), help="Append one JSON line per cycle here."
        ),
        click.option(
            "--no-log",
            is_flag=True,
            help="Do not record the run in the user data directory (where [state] or --log do not say).",
        ),
        click.option(
            "--json", "as_json", is_flag=True, help="Print the result as JSON instead of the live view."
        ),
        click.option(
            "--record",
            type=click.Path(dir_okay=False),
            help="Append every model request/response to this cassette.",
        ),
        click.option(
            "--replay",
            type=click.Path(dir_okay=False),
            help="Answer from this cassette instead of the model.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _drive(
    label: str,
    start: Callable[[Any], Iterator[Any]],
    *,
    config: str | None,
    log_path: str | None,
    no_log: bool,
    as_json: bool,
    record: str | None,
    replay: str | None,
    ttl: int | None = None,
    multipass: bool = False,
    deadline: float | None = None,
    run_id: str | None = None,
) -> None:
    """Build the engine, run ``start(orchestrator)`` to the end (live view or JSON), exit with the run's status.

    Unless ``--no-log``, the run is recorded in the user data directory where the configuration names no state
    store and no log (FR-037; :mod:`aeon_cli.recording`). Ctrl-C stops the run as ``kill -9`` would (nothing of
    the cycle under way is kept), says how to resume it and exits 130; ``run_id``: the run resumed, if any."""
    from aeon_cli import recording
    from aeon_cli.interrupts import interruptible, resume_command
    from aeon_kernel.config import load_config

    with interruptible(resume_command("aeon resume", config), run_id, as_json=as_json) as interrupt:
        try:
            chosen = load_config(config)
            if multipass:
                chosen = chosen.multipass()
            log: str | Path | None = log_path
            if not no_log:
                chosen = recording.with_default_store(chosen)
                log = log_path or recording.default_log(chosen)
            engine = _engine(chosen, record=record, replay=replay)
        except AeonError as exc:
            _fail_setup(exc)
        try:
            engine.check_choices()
            if log:
                engine.add_sink("jsonl", path=str(log))
            engine.build_selected()  # a component that cannot be built stops the run before it starts
            from aeon_cli.runs import retain

            retain(engine)  # [retention]: old runs go before this one is recorded
            orchestrator = engine.orchestrator(ttl, deadline=deadline)
        except AeonError as exc:
            engine.close()
            _fail_setup(exc)
        cycles: Iterator[Any] | None = None
        try:
            interrupt.store = orchestrator.state_store
            cycles = start(orchestrator)  # the run is made here (orchestrator.run); each cycle, as it is read
            if as_json:
                for _ in cycles:
                    pass
                result = orchestrator.result
                echo_json(result)
            else:
                from aeon_cli.live import LiveView

                result = LiveView(label).run(orchestrator.run, cycles)
        except (
            AeonError
        ) as exc:  # raised before the loop starts (an invalid request, a run that cannot resume)
            _fail_setup(exc)
        except KeyboardInterrupt:
            interrupt.quiet()
            close = getattr(cycles, "close", None)
            if callable(close):
                close()  # a step-through session stops its page server now, not at exit
            if orchestrator.run is not None:
                interrupt.run_id = orchestrator.run.run_id
                orchestrator.run.close()  # released, if Ctrl-C came between cycles
            interrupt.report()  # while the store is open
            raise
        finally:
            engine.close()
    if not no_log:  # with_default_store gave the run a store
        click.echo(recording.note(chosen, result["run_id"], Path(log) if log else None), err=True)
    if result["status"] == "waiting":
        show_request(result.get("approval") or {}, result["run_id"])
    if result["status"] == "ttl_expired" and interrupt.store is not None:
        click.echo(
            f"The TTL expired; {interrupt.command} {result['run_id']} --ttl N gives the run N more cycles.",
            err=True,
        )
    sys.exit(EXIT_CODES.get(result["status"], 1))


def _flow_options(options: dict[str, Any]) -> dict[str, Any]:
    """``aeon approve``'s options as ``aeon flow resume`` takes them (a flow run has no cassettes)."""
    if options.get("record") or options.get("replay"):
        raise click.UsageError("--record and --replay are for plan runs; a flow run's answer needs neither")
    return {key: options[key] for key in ("config", "as_json", "log_path", "no_log")}


def _stepped(orchestrator: Any, start: Callable[[], Any]) -> Iterator[Any]:
    """The cycles of the run ``start`` makes (now: it is the orchestrator's run before the first cycle, so the live
    view watches it from its start), closed however they end."""
    run = orchestrator.run = start()

    def cycles() -> Iterator[Any]:
        with run:
            yield from run

    return cycles()


@cli.command()
@click.argument("request")
@click.option("--ttl", type=click.IntRange(min=1), help="Maximum number of cycles (default: [run] ttl, 50).")
@click.option(
    "--deadline",
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds the run may take; checked between cycles (a cycle in progress is not interrupted).",
)
@click.option(
    "--multipass",
    is_flag=True,
    help="Reason in several passes (spec 003): profile, plan, validate, execute, converge, refine; as "
    '[reasoning] mode = "multipass" in aeon.toml.',
)
@output_schema_option
@step_through_options(
    "the run in the inspector (a local web page): it pauses before each cycle, showing what comes next"
)
@_run_options
def run(
    request: str,
    ttl: int | None,
    deadline: float | None,
    multipass: bool,
    output_schema: dict[str, Any] | None,
    inspect: bool,
    no_browser: bool,
    **options: Any,
) -> None:
    """Plan REQUEST with the model, execute the plan step by step, and report the answer.

    Exit status: 0 completed, 1 failed, 3 TTL expired, 4 waiting for approval (`aeon approve RUN_ID` answers), 2
    could not start, 130 interrupted (Ctrl-C, or Stop with --inspect: the run is kept, `aeon resume RUN_ID` goes
    on).
    """

    def cycles(orchestrator: Any) -> Iterator[Any]:
        if not inspect:
            return _stepped(orchestrator, lambda: orchestrator.start(request, output_type=output_schema))
        from aeon_cli.inspect.stepper import plan_cycles  # the server and Jinja load only here

        return plan_cycles(
            orchestrator,
            request,
            no_browser=no_browser,
            as_json=options["as_json"],
            output_schema=output_schema,
        )

    _drive(
        request,
        cycles,
        ttl=ttl,
        deadline=deadline,
        multipass=multipass,
        **options,
    )


@cli.command()
@click.argument("run_id")
@more_ttl_option
@take_over_option
@step_through_options(
    "the rest of the run in the inspector: its stored cycles shown, it pauses before each new one"
)
@_run_options
def resume(
    run_id: str, ttl: int | None, take_over: bool, inspect: bool, no_browser: bool, **options: Any
) -> None:
    """Continue the interrupted run RUN_ID from the state store ([state] in aeon.toml).

    Finished steps are not run again; the TTL goes on from where it was (--ttl N: with N more cycles, which also
    continues a run whose TTL expired). Exit status as for `aeon run`.
    """

    def cycles(orchestrator: Any) -> Iterator[Any]:
        if not inspect:
            return _stepped(
                orchestrator, lambda: orchestrator.start_resume(run_id, take_over=take_over, ttl=ttl)
            )
        from aeon_cli.inspect.stepper import resumed_cycles  # the server and Jinja load only here

        if ttl is not None:  # extended (committed) and released first; then stepped through like any other
            orchestrator.start_resume(run_id, take_over=take_over, ttl=ttl).close()
        return resumed_cycles(
            orchestrator, run_id, take_over=take_over, no_browser=no_browser, as_json=options["as_json"]
        )

    _drive(f"resume {run_id}", cycles, run_id=run_id, **options)


def _arguments(ctx: click.Context, param: click.Parameter, value: str | None) -> dict[str, Any] | None:
    if value is None:
        return None
    try:
        arguments = json.loads(value)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}") from None
    if not isinstance(arguments, dict):
        raise click.BadParameter("the arguments must be a JSON object, as the tool's input schema has them")
    return arguments


@cli.command()
@click.argument("run_id")
@click.option("--deny", "deny_reason", metavar="REASON", help="Refuse the call: it fails with REASON.")
@click.option(
    "--edit-arguments",
    "arguments",
    metavar="JSON",
    callback=_arguments,
    help="Approve the call with these arguments instead (checked against the tool's input schema).",
)
@click.option("--by", default="", help="Who answers, as the run's history should record it.")
@take_over_option
@_run_options
def approve(
    run_id: str,
    deny_reason: str | None,
    arguments: dict[str, Any] | None,
    by: str,
    take_over: bool,
    **options: Any,
) -> None:
    """Answer the call the waiting run RUN_ID waits on, then continue the run to its end.

    The answer is recorded in the run's history (who, when, what was changed) before the run goes on, in this
    process, whichever process asked. Exit status as for `aeon run` (4: it waits again, for another call).
    """
    if deny_reason is not None and arguments is not None:
        raise click.UsageError("--deny and --edit-arguments cannot go together: refuse the call, or edit it")
    from aeon_kernel.kit import Approval

    approval = (
        Approval.deny(deny_reason, by) if deny_reason is not None else Approval(by=by, arguments=arguments)
    )
    from aeon_cli.flow import recorded_flow, resume_flow

    try:
        recorded = recorded_flow(run_id, options["config"], options["no_log"])
    except AeonError:  # resuming says why
        recorded = None
    if recorded is not None:  # the flow engine goes on with it
        resume_flow(
            run_id,
            None,
            take_over,
            False,
            False,
            **_flow_options(options),
            approval=approval,
            recorded=recorded,
        )

    def cycles(orchestrator: Any) -> Iterator[Any]:
        return _stepped(
            orchestrator, lambda: orchestrator.start_resume(run_id, take_over=take_over, approval=approval)
        )

    _drive(f"approve {run_id}", cycles, run_id=run_id, **options)


@cli.command()
@click.argument("run_id")
@click.option("--config", type=click.Path(dir_okay=False), help="aeon.toml to use.")
@click.option(
    "--log",
    "log_path",
    type=click.Path(exists=True, dir_okay=False),
    help="Read the run from this JSONL log instead of the state store.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def stats(run_id: str, config: str | None, log_path: str | None, as_json: bool) -> None:
    """Where the run RUN_ID spent its time and tokens: per cycle, per tool, and in total (model, tools, kernel)."""
    from aeon_cli.stats import logged_entries, render, run_stats

    try:
        entries = logged_entries(log_path, run_id) if log_path else _stored_entries(config, run_id)
    except AeonError as exc:
        _fail_setup(exc)
    figures = run_stats(entries)
    if as_json:
        echo_json({"run_id": run_id, **figures})
    else:
        click.echo(render(run_id, figures))


def _stored_entries(config: str | None, run_id: str) -> list[dict[str, Any]]:
    with _recorded_runs(config) as engine:
        return [entry.model_dump(mode="json") for entry in engine.state_store.load(run_id).entries]


@cli.command()
@click.argument("run_id")
@click.option("--config", type=click.Path(dir_okay=False), help="aeon.toml to use.")
@click.option("--node", help="Only what this plan step or flow node produced.")
@click.option(
    "--schema", "schema_name", help="Only outputs validated against this schema (Plan, tool:calculator, ...)."
)
@click.option(
    "--kind",
    type=click.Choice(ARTIFACT_KINDS),
    help="Only artifacts of this kind.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the artifacts as JSON, values whole.")
def artifacts(
    run_id: str,
    config: str | None,
    node: str | None,
    schema_name: str | None,
    kind: str | None,
    as_json: bool,
) -> None:
    """The outputs of the run RUN_ID from the artifact store ([artifacts], else the user data directory's):
    validated plans and outputs, tool results, cycle records, the answer."""
    try:
        with _recorded_runs(config) as engine:
            assert engine.artifact_store is not None  # with_default_store always names one
            found = engine.artifact_store.find(run_id, node=node, schema_name=schema_name, kind=kind)
    except AeonError as exc:
        _fail_setup(exc)
    if as_json:
        echo_json([artifact.model_dump(mode="json") for artifact in found])
        return
    if not found:
        click.echo(
            f"no artifacts for run {run_id} (with these filters); aeon runs lists the recorded runs", err=True
        )
        sys.exit(1)
    for artifact in found:
        value = json.dumps(artifact.value, ensure_ascii=False)
        value = value if len(value) <= 60 else value[:59] + "…"
        where = artifact.node or "-"
        click.echo(
            f"{artifact.cycle:>4}  {artifact.kind:<12}  {where:<10}  {artifact.schema_name or '-':<16}  {value}"
        )


@contextlib.contextmanager
def _recorded_runs(config: str | None) -> Iterator[Any]:
    """The engine over the store `aeon run` records into: [state] in aeon.toml, else the user data directory's."""
    from aeon_cli.recording import with_default_store
    from aeon_kernel.config import load_config

    with _engine(with_default_store(load_config(config))) as engine:
        assert engine.state_store is not None  # with_default_store always names one
        yield engine


@cli.command()
@click.option("--config", type=click.Path(dir_okay=False), help="aeon.toml to use.")
@click.option(
    "--check",
    is_flag=True,
    help="Also build every component aeon.toml selects, as `aeon run` would (the model included, however long "
    "it takes to load), listing each that cannot be built under errors; exit with status 1 when any plugin "
    "failed to load or register or any component failed to build.",
)
def plugins(config: str | None, check: bool) -> None:
    """Print the loaded plugins as JSON: name, distribution, version, hooks, components, load errors."""
    try:
        engine = _engine(config)
    except AeonError as exc:
        _fail_setup(exc)
    try:
        described = engine.describe_plugins()
        if check:
            described["errors"] += engine.check_components()
    finally:
        engine.close()
    echo_json(described, indent=2)
    if check and described["errors"]:
        click.echo(f'{len(described["errors"])} plugin problem(s); see "errors" above', err=True)
        sys.exit(1)


@cli.command()
@click.option("--config", type=click.Path(dir_okay=False), help="aeon.toml to use.")
@click.option(
    "--all", "every", is_flag=True, help="List every registered tool: on or off, its permissions and grant."
)
def tools(config: str | None, every: bool) -> None:
    """Print the tools runs get (what the model is offered) with their input and output schemas, as JSON."""
    try:
        with _engine(config) as engine:
            exported = engine.components.tool_overview() if every else engine.tools.export_tools_for_llm()
    except AeonError as exc:
        _fail_setup(exc)
    echo_json(exported, indent=2)


@cli.command()
@click.option(
    "--dir", "directory", type=click.Path(file_okay=False), help="Write one <Model>.json per model here."
)
def schemas(directory: str | None) -> None:
    """Print (or write) the JSON Schemas of the data model: Plan, PlanStep, OrchestrationState, Tool, ..."""
    from pathlib import Path

    from aeon_cli.json_schemas import export_json_schemas

    exported = export_json_schemas()
    if directory is None:
        echo_json(exported, indent=2)
        return
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    for name, schema in exported.items():
        (target / f"{name}.json").write_text(json.dumps(schema, indent=2) + "\n", encoding="utf-8")
    click.echo(f"wrote {len(exported)} schemas to {target}")


@cli.group()
def plugin() -> None:
    """Create a plugin package."""


def _plugin_name(ctx: click.Context, param: click.Parameter, value: str) -> str:
    from aeon_cli.scaffold import ScaffoldError, check_name

    try:
        return check_name(value)
    except ScaffoldError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


@plugin.command("new")
@click.argument("name", callback=_plugin_name)
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False),
    default=".",
    help="Create the package in this directory (default: the current one).",
)
@click.option(
    "--kind",
    type=click.Choice(["tool", "llm", "memory", "sink"]),
    default="tool",
    show_default=True,
    help="What the example in the generated module implements; the other hooks stay as commented stubs.",
)
def plugin_new(name: str, directory: str, kind: str) -> None:
    """Create the package aeon-NAME: a working example plugin, its tests, a README and a pyproject.toml.

    NAME is lower-case letters, digits and hyphens; the module is aeon_NAME with hyphens as underscores.
    Exit status: 0 created, 2 invalid name or the directory already exists.
    """
    from aeon_cli.scaffold import ScaffoldError, new_plugin, report

    try:
        target = new_plugin(name, directory, kind)
    except ScaffoldError as exc:
        _fail_setup(exc)
    click.echo(report(target, name, kind))


def main() -> None:
    cli()


def _add_flow_commands() -> None:
    from aeon_cli.batch import batch  # the executor and rich are imported only when it runs
    from aeon_cli.chat import chat, list_sessions  # aeon chat, aeon sessions
    from aeon_cli.evaluate import evaluate  # the suite runner and rich are imported only when it runs
    from aeon_cli.flow import flow
    from aeon_cli.init.command import init_project  # Jinja and package metadata are read when it runs
    from aeon_cli.inspect.command import inspect_runs  # the server and Jinja load when it runs
    from aeon_cli.mcp import mcp  # the MCP SDK itself is imported only by `aeon mcp serve`
    from aeon_cli.runs import runs  # aeon runs, aeon runs prune

    cli.add_command(batch)
    cli.add_command(chat)
    cli.add_command(list_sessions)
    cli.add_command(evaluate)
    cli.add_command(flow)
    cli.add_command(init_project)
    cli.add_command(inspect_runs)
    cli.add_command(mcp)
    cli.add_command(runs)


_add_flow_commands()
