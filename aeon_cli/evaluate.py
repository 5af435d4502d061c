"""``aeon eval SUITE_DIR``: run an evaluation suite (:mod:`aeon_cli.evaluation`), show each case as it ends and a
summary table, write JUnit XML for CI.

Exit status: 0 every case passed; 1 a case failed (a regression); 2 the suite could not be evaluated — its file,
a cassette or the configuration is wrong, or a case could not run (its ``error`` says why).

Never a silent terminal: one line per case as it ends, and on a terminal a progress bar with the case running.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NoReturn

import click

from aeon_cli.output import echo_json
from aeon_kernel.errors import AeonError
from aeon_kernel.secrets import scrub_secrets

if TYPE_CHECKING:
    from rich.console import Console

    from aeon_cli.evaluation import Case, Mode, Outcome

EXIT_FAILED: Final = 1
EXIT_BROKEN: Final = 2
_MARK: Final = {"passed": ("✓", "green"), "failed": ("✗", "bold red"), "error": ("!", "bold magenta")}
_MODE_TEXT: Final = {
    "replay": "cases with a cassette replayed from it, the others live",
    "live": "live: every case asks the model",
    "record": "live, recording each case's cassette anew",
}


def _fail(exc: AeonError | str) -> NoReturn:
    click.echo(f"Error: {scrub_secrets(str(exc))}", err=True)
    sys.exit(EXIT_BROKEN)


@click.command("eval")
@click.argument("suite_dir", type=click.Path())
@click.option("--live", is_flag=True, help="Ask the model in every case, ignoring the cassettes.")
@click.option(
    "--record",
    is_flag=True,
    help="Ask the model in every case and write each case's cassette anew (cases without one just run live).",
)
@click.option(
    "--junit", type=click.Path(dir_okay=False), help="Write the outcomes as JUnit XML to this file."
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcomes as JSON instead of the table.")
@click.option("--case", "case_ids", multiple=True, metavar="ID", help="Only this case (repeatable).")
@click.option(
    "--config",
    type=click.Path(dir_okay=False),
    help="aeon.toml to use (default: the suite's config:, SUITE_DIR/aeon.toml, the flow's, ./aeon.toml).",
)
def evaluate(
    suite_dir: str,
    live: bool,
    record: bool,
    junit: str | None,
    as_json: bool,
    case_ids: tuple[str, ...],
    config: str | None,
) -> None:
    """Run the evaluation suite in SUITE_DIR (its suite.yaml) and judge every case's run against its expect:.

    A case with a cassette is replayed from it (no model loaded) unless --live or --record. Each case's outcome
    is kept in the artifact store under its run id (aeon artifacts RUN_ID --kind evaluation).

    Exit status: 0 all passed, 1 a case failed, 2 the suite (or a case) could not be evaluated.
    """
    from aeon_cli.evaluation import load_suite
    from aeon_cli.recording import with_default_store
    from aeon_kernel.config import load_config
    from aeon_kernel.engine import Engine

    mode: Mode = "record" if record else "live" if live else "replay"
    try:
        suite = load_suite(suite_dir)
        cases = suite.select(case_ids)
        suite.check_ready(cases, mode)
        chosen = with_default_store(load_config(config or suite.config_path()))
        keeper = Engine(chosen)  # only for its artifact store: no model, no tool is built
    except AeonError as exc:
        _fail(exc)
    started = time.perf_counter()
    try:
        store = keeper.artifact_store
        outcomes = _run(suite, cases, chosen, mode, store)
    except AeonError as exc:
        _fail(exc)
    finally:
        keeper.close()
    elapsed = time.perf_counter() - started
    if junit:
        _write_junit(Path(junit), suite.name, outcomes)
    if as_json:
        echo_json(
            {
                "suite": suite.name,
                "mode": mode,
                **_counts(outcomes),
                "seconds": round(elapsed, 3),
                "cases": [outcome.to_dict() for outcome in outcomes],
            },
            indent=2,
        )
    else:
        _summary(suite.name, outcomes, elapsed)
    if any(outcome.result == "error" for outcome in outcomes):
        sys.exit(EXIT_BROKEN)
    if any(outcome.result == "failed" for outcome in outcomes):
        sys.exit(EXIT_FAILED)


def _run(suite: Any, cases: list[Case], config: Any, mode: Mode, store: Any) -> list[Outcome]:
    """Run the cases with a line per case on stderr as it ends, and a progress bar when stderr is a terminal."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    from aeon_cli.evaluation import run_suite

    console = Console(stderr=True, highlight=False)
    console.print(
        f"suite {suite.name!r}: {len(cases)} case{'s' if len(cases) != 1 else ''} ({_MODE_TEXT[mode]})",
        markup=False,
        soft_wrap=True,
    )
    done = {"count": 0}

    def line(outcome: Outcome) -> None:
        done["count"] += 1
        mark, style = _MARK[outcome.result]
        reason = f"  {scrub_secrets(outcome.failures[0])}" if outcome.failures else ""
        more = f" (+{len(outcome.failures) - 1} more)" if len(outcome.failures) > 1 else ""
        _print(
            console,
            [
                (mark, style),
                f" [{done['count']}/{len(cases)}] {outcome.case}  {outcome.duration:.2f} s",
                reason + more,
            ],
        )

    if not console.is_terminal:
        return run_suite(suite, config, mode=mode, cases=cases, store=store, on_done=line)
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task("starting", total=len(cases))

        def start(case: Case) -> None:
            progress.update(task, description=f"case {case.id}")

        def end(outcome: Outcome) -> None:
            line(outcome)
            progress.advance(task)

        return run_suite(suite, config, mode=mode, cases=cases, store=store, on_start=start, on_done=end)


def _print(console: Console, parts: list[tuple[str, str] | str]) -> None:
    from rich.text import Text

    console.print(Text.assemble(*parts), soft_wrap=True)


def _counts(outcomes: list[Outcome]) -> dict[str, int]:
    return {
        "passed": sum(o.result == "passed" for o in outcomes),
        "failed": sum(o.result == "failed" for o in outcomes),
        "errors": sum(o.result == "error" for o in outcomes),
    }


def _summary(name: str, outcomes: list[Outcome], elapsed: float) -> None:
    """The table (case, result, seconds, reason, run), then the counts and where the outcomes are kept."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"aeon eval: {name}", title_justify="left")
    table.add_column("case", no_wrap=True)
    table.add_column("result", no_wrap=True)
    table.add_column("s", justify="right", no_wrap=True)
    table.add_column("reason")
    table.add_column("run", no_wrap=True, style="dim")
    for outcome in outcomes:
        _, style = _MARK[outcome.result]
        table.add_row(
            Text(outcome.case),
            Text(outcome.result, style=style),
            f"{outcome.duration:.2f}",
            Text(scrub_secrets("\n".join(outcome.failures))),
            outcome.run_id,
        )
    console = Console(highlight=False)
    console.print(table)
    counts = _counts(outcomes)
    console.print(
        f"{counts['passed']} passed, {counts['failed']} failed, {counts['errors']} errors in {elapsed:.2f} s; "
        "each outcome is in the artifact store: aeon artifacts RUN_ID --kind evaluation",
        markup=False,
        soft_wrap=True,
    )


def _write_junit(path: Path, name: str, outcomes: list[Outcome]) -> None:
    from aeon_cli.evaluation import junit_xml

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(scrub_secrets(junit_xml(name, outcomes)), encoding="utf-8")
    except OSError as exc:
        _fail(f"cannot write the JUnit XML to {path}: {exc.strerror or exc}")
