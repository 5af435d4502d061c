"""The Python half of scripts/package_check.sh: checks of the built wheel and of a venv that installed it.

    python package_smoke.py contents WHEEL SDIST PYPROJECT FILES  # the wheel ships every package file
    python package_smoke.py isolation [--extras cli] [--allow DIST]  # in the venv: only what aeon-core needs
    python package_smoke.py embed  # in the venv: a scripted run of the calculator tool
    python package_smoke.py write-plugin DIR  # a third-party plugin package (entry point group "aeon")
    python package_smoke.py plugin  # in the venv, once that package is installed: its tool runs, it is listed
    python package_smoke.py write-script FILE  # the scripted model's responses for `aeon run`: PLAN, ANSWER
    python package_smoke.py cli-result FILE  # the JSON that `aeon run --json` printed

Each command prints nothing when its check passes and exits with a message saying what is wrong when it does
not. Only the standard library is imported at the top: the venv holds aeon-core's core dependencies alone.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path
from typing import Any

#: aeon-core's dependencies without extras (pyproject's [project] dependencies; decision 0015).
CORE = {
    "pluggy",
    "pydantic",
    "jsonschema",
    "jsonschema-rs",
    "json-repair",
    "tenacity",
    "typing-extensions",
    "docstring-parser",
}
#: Modules of the extras ([cli], [flow], [local], [openai]) that a bare install must not bring.
NOT_CORE = ("click", "rich", "jinja2", "yaml", "platformdirs", "httpx", "llama_cpp")
#: What [cli] brings.
CLI = ("click", "rich", "jinja2", "yaml", "platformdirs")
#: What a venv holds before anything is installed into it.
VENV_BASE = {"pip", "setuptools", "wheel"}

PLAN = {
    "goal": "Add 5 and 10",
    "steps": [
        {
            "step_id": "1",
            "description": "Add 5 and 10",
            "tool": "calculator",
            "arguments": {"expression": "5 + 10"},
        },
        {"step_id": "2", "description": "Report the sum", "agent": "llm"},
    ],
}
ANSWER = {"answer": "15"}

PLUGIN_DISTRIBUTION = "aeon-demo-tool"
PLUGIN_NAME = "demo_tool"  # the entry point's name, which is the plugin's name
PLUGIN_TOOL = "demo_shout"
PLUGIN_PYPROJECT = f"""\
[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"

[project]
name = "{PLUGIN_DISTRIBUTION}"
version = "0.1.0"
description = "A third-party Aeon plugin for scripts/package_check.sh."
requires-python = ">=3.11"
dependencies = ["aeon-core"]

[project.entry-points.aeon]
{PLUGIN_NAME} = "demo_tool"

[tool.setuptools]
py-modules = ["demo_tool"]
"""
PLUGIN_MODULE = f'''\
"""A tool from outside aeon-core, registered through the "aeon" entry-point group."""

from aeon_kernel import FunctionTool, hookimpl


def shout(text):
    return {{"shout": text.upper() + "!"}}


@hookimpl
def aeon_register_tools(register):
    register(
        "{PLUGIN_TOOL}",
        lambda: FunctionTool(
            name="{PLUGIN_TOOL}",
            description="Shout a text.",
            input_schema={{"type": "object", "properties": {{"text": {{"type": "string"}}}}, "required": ["text"]}},
            output_schema={{"type": "object", "properties": {{"shout": {{"type": "string"}}}}, "required": ["shout"]}},
            function=shout,
        ),
    )
'''


def fail(message: str) -> None:
    raise SystemExit(message)


def expect(condition: bool, message: str) -> None:
    if not condition:
        fail(message)


def normalize(name: str) -> str:
    """A distribution's name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


# --- the wheel -------------------------------------------------------------------------------------------------


def contents(wheel: Path, sdist: Path, pyproject: Path, files: Path) -> None:
    """The wheel holds every file of the three packages (code and package data), its metadata asks for the core
    dependencies alone, and its entry points are pyproject's; the sdist holds what it was built from."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        expected = [line for line in files.read_text(encoding="utf-8").splitlines() if line]
        missing = [name for name in expected if name not in names]
        expect(not missing, f"the wheel lacks {len(missing)} package file(s): {', '.join(missing[:20])}")
        expect(bool(expected), "no package files were listed")
        (info,) = {name.split("/", 1)[0] for name in names if name.split("/", 1)[0].endswith(".dist-info")}
        metadata = archive.read(f"{info}/METADATA").decode()
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
    requires = [
        line.split(":", 1)[1].strip() for line in metadata.splitlines() if line.startswith("Requires-Dist:")
    ]
    unconditional = {normalize(_requirement_name(r)) for r in requires if ";" not in r}
    expect(
        unconditional == {normalize(n) for n in CORE},
        f"the wheel's unconditional dependencies are {sorted(unconditional)}, not {sorted(CORE)}",
    )
    groups = _entry_point_groups(entry_points)
    expect(
        groups.get("console_scripts") == project["scripts"],
        f"console scripts {groups.get('console_scripts')} != {project['scripts']}",
    )
    expect(
        groups.get("aeon") == project["entry-points"]["aeon"],
        f"the wheel's 'aeon' entry points differ from pyproject's: {groups.get('aeon')}",
    )
    with tarfile.open(sdist) as archive:
        members = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    missing = [name for name in ["pyproject.toml", "README.md", "PKG-INFO", *expected] if name not in members]
    expect(not missing, f"the sdist lacks {', '.join(missing[:20])}")


def _requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if match is None:
        fail(f"cannot read the requirement {requirement!r}")
    return match.group(1)  # type: ignore[union-attr]


def _entry_point_groups(text: str) -> dict[str, dict[str, str]]:
    groups: dict[str, dict[str, str]] = {}
    group: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            group = groups.setdefault(line[1:-1], {})
        elif "=" in line:
            name, value = line.split("=", 1)
            group[name.strip()] = value.strip()
    return groups


# --- the venv --------------------------------------------------------------------------------------------------


def isolation(extras: list[str], allow: list[str]) -> None:
    """aeon-core is the wheel's (not this checkout, not editable), and the venv holds nothing it did not ask for."""
    import importlib.metadata
    import importlib.util

    import aeon_kernel

    location = Path(aeon_kernel.__file__).resolve()
    expect(
        location.is_relative_to(Path(sys.prefix).resolve()) and sys.prefix != sys.base_prefix,
        f"aeon_kernel comes from {location}, not from the venv {sys.prefix}",
    )
    direct_url = importlib.metadata.distribution("aeon-core").read_text("direct_url.json") or "{}"
    expect(not json.loads(direct_url).get("dir_info", {}).get("editable"), "aeon-core is installed editable")
    present = [name for name in (*CLI, *NOT_CORE) if importlib.util.find_spec(name) is not None]
    wanted = set(CLI) if "cli" in extras else set()
    unexpected = [name for name in present if name not in wanted]
    expect(not unexpected, f"importable without being asked for: {', '.join(unexpected)}")
    absent = sorted(wanted - set(present))
    expect(not absent, f"the [cli] extra did not bring {', '.join(absent)}")
    needed = _closure("aeon-core", set(extras))
    installed = {normalize(d.metadata["Name"]) for d in importlib.metadata.distributions()}
    extra = installed - needed - VENV_BASE - {normalize(name) for name in allow}
    expect(not extra, f"installed though aeon-core{extras or ''} does not need them: {sorted(extra)}")


def _closure(root: str, extras: set[str]) -> set[str]:
    """Every distribution ``root[extras]`` may pull in (environment markers other than extras count as true)."""
    import importlib.metadata

    seen: set[str] = set()
    todo = [(root, extras)]
    while todo:
        name, wanted = todo.pop()
        if normalize(name) in seen:
            continue
        seen.add(normalize(name))
        try:
            requires = importlib.metadata.distribution(name).requires or []
        except importlib.metadata.PackageNotFoundError:
            continue  # a requirement whose marker did not hold here
        for requirement in requires:
            marker = requirement.split(";", 1)[1] if ";" in requirement else ""
            extra = re.search(r"""extra\s*==\s*['"]([^'"]+)['"]""", marker)
            if extra is None or extra.group(1) in wanted:
                todo.append((_requirement_name(requirement), set()))
    return seen


def embed() -> None:
    """The README's embedding, on the scripted model: the calculator tool runs and the run completes."""
    from aeon_kernel import Engine
    from aeon_kernel.config import AeonConfig

    config = AeonConfig().with_choice("llm", "scripted", responses=[PLAN, ANSWER])
    with Engine(config) as engine:
        errors = engine.describe_plugins()["errors"]
        expect(not errors, f"plugins failed to load: {errors}")
        result = engine.run("add 5 and 10")
    _check_result(result, "calculator", {"expression": "5 + 10", "value": 15}, "15")


def write_plugin(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "pyproject.toml").write_text(PLUGIN_PYPROJECT, encoding="utf-8")
    (directory / "demo_tool.py").write_text(PLUGIN_MODULE, encoding="utf-8")


def plugin() -> None:
    """The installed third-party plugin is found by its entry point, listed with its distribution, and its tool
    runs; the built-in plugins come from aeon-core's own entry points, and every plugin loads."""
    from aeon_kernel import Engine
    from aeon_kernel.config import AeonConfig

    plan = {
        "goal": "Shout hello",
        "steps": [
            {"step_id": "1", "description": "Shout", "tool": PLUGIN_TOOL, "arguments": {"text": "hello"}},
            {"step_id": "2", "description": "Report", "agent": "llm"},
        ],
    }
    config = AeonConfig().with_choice("llm", "scripted", responses=[plan, {"answer": "HELLO!"}])
    with Engine(config) as engine:
        result = engine.run("shout hello")
    _check_result(result, PLUGIN_TOOL, {"shout": "HELLO!"}, "HELLO!")

    with Engine() as engine:
        described = engine.describe_plugins()
    plugins = {p["name"]: p for p in described["plugins"]}
    demo = plugins.get(PLUGIN_NAME)
    expect(demo is not None, f"describe_plugins() does not list {PLUGIN_NAME!r}: {sorted(plugins)}")
    assert demo is not None
    expect(
        (demo["distribution"], demo["version"]) == (PLUGIN_DISTRIBUTION, "0.1.0"),
        f"{PLUGIN_NAME!r} is listed as from {demo['distribution']!r} {demo['version']!r}",
    )
    expect(
        demo["hooks"] == ["aeon_register_tools"] and demo["components"] == {"tools": [PLUGIN_TOOL]},
        f"{PLUGIN_NAME!r} is listed with hooks {demo['hooks']} and components {demo['components']}",
    )
    for name in ("calculator", "echo", "scripted", "llama_cpp", "openai"):
        expect(
            plugins.get(name, {}).get("distribution") == "aeon-core",
            f"the built-in plugin {name!r} is not listed from aeon-core: {plugins.get(name)}",
        )
    expect(not described["errors"], f"plugins failed to load: {described['errors']}")


def cli_result(path: Path) -> None:
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        fail(f"`aeon run --json` did not print JSON ({exc}): {path.read_text(encoding='utf-8')[:2000]}")
    _check_result(result, "calculator", {"expression": "5 + 10", "value": 15}, "15")


def _check_result(result: dict[str, Any], tool: str, output: dict[str, Any], answer: str) -> None:
    summary = json.dumps({k: result.get(k) for k in ("status", "answer", "message", "errors")}, default=str)
    expect(result.get("status") == "completed", f"the run did not complete: {summary}")
    expect(result.get("answer") == answer, f"the answer is {result.get('answer')!r}, not {answer!r}")
    calls = [(c["tool_name"], c["result"]) for c in result["final_state"]["tool_history"]]
    expect(calls == [(tool, output)], f"the tool calls were {calls}, not {[(tool, output)]}")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("contents")
    for name in ("wheel", "sdist", "pyproject", "files"):
        command.add_argument(name, type=Path)
    command = commands.add_parser("isolation")
    command.add_argument("--extras", action="append", default=[])
    command.add_argument("--allow", action="append", default=[])
    commands.add_parser("embed")
    commands.add_parser("write-plugin").add_argument("directory", type=Path)
    commands.add_parser("plugin")
    commands.add_parser("write-script").add_argument("path", type=Path)
    commands.add_parser("cli-result").add_argument("path", type=Path)
    args = parser.parse_args(argv)
    if args.command == "contents":
        contents(args.wheel, args.sdist, args.pyproject, args.files)
    elif args.command == "isolation":
        isolation(args.extras, args.allow)
    elif args.command == "embed":
        embed()
    elif args.command == "write-plugin":
        write_plugin(args.directory)
    elif args.command == "plugin":
        plugin()
    elif args.command == "write-script":
        args.path.write_text(json.dumps([PLAN, ANSWER], indent=2), encoding="utf-8")
    else:
        cli_result(args.path)


if __name__ == "__main__":
    main(sys.argv[1:])
