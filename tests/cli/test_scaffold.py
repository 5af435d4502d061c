"""``aeon plugin new`` and the plugin template: every kind renders a working, tested plugin, the same as
``cookiecutter plugin_template`` renders it, and bad input ends in a clear error (exit status 2)."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import click
import pytest
from click.testing import CliRunner

from aeon_cli import scaffold
from aeon_cli.main import cli
from aeon_kernel import HOOKSPEC_VERSION, hookspecs
from aeon_kernel.plugins import Registries, build_plugin_manager, describe_plugins

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "aeon_cli" / "plugin_template"
HOOKS = sorted(name for name in dir(hookspecs) if name.startswith("aeon_"))

#: kind -> (registry kind, the example (the class of what its factory builds, or the tool itself), its registered
#: name for a plugin called "demo-<kind>")
KINDS: dict[str, tuple[str, str, str]] = {
    "tool": ("tools", "word_count", "demo_tool_word_count"),
    "llm": ("llm_adapters", "EchoModel", "demo_llm"),
    "memory": ("memory_backends", "DictMemory", "demo_memory"),
    "sink": ("telemetry_sinks", "CycleLogSink", "demo_sink"),
}


def new(*args: str) -> Any:
    return CliRunner().invoke(cli, ["plugin", "new", *args])


def files_of(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in directory.rglob("*") if p.is_file()}


def load(path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """Import a generated module by path (in sys.modules while the test runs, as pydantic needs)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, path.stem, module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    """Every kind rendered once with the CLI: kind -> (project directory, what the command printed)."""
    parent = tmp_path_factory.mktemp("plugins")
    projects = {}
    for kind in KINDS:
        result = new(f"demo-{kind}", "--dir", str(parent), "--kind", kind)
        assert result.exit_code == 0, result.output
        projects[kind] = (parent / f"aeon-demo-{kind}", result.output)
    return projects


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_renders_the_expected_files(rendered: dict[str, tuple[Path, str]], kind: str) -> None:
    project, output = rendered[kind]
    module = f"aeon_demo_{kind}"
    assert sorted(files_of(project)) == sorted(
        [".gitignore", "README.md", "pyproject.toml", f"{module}.py", f"tests/test_{module}.py"]
    )
    text = "\n".join(p.read_text(encoding="utf-8") for p in project.rglob("*") if p.is_file())
    assert "{{" not in text and "{%" not in text and "#%" not in text and "cookiecutter" not in text
    pyproject = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["name"] == f"aeon-demo-{kind}"
    assert pyproject["project"]["entry-points"]["aeon"] == {f"demo_{kind}": module}
    assert pyproject["tool"]["setuptools"]["py-modules"] == [module]
    assert any(dep.startswith("aeon-core") for dep in pyproject["project"]["dependencies"])
    # What was created, and what to do next.
    assert f"Created aeon-demo-{kind}, an Aeon {kind} plugin, in {project.resolve()}" in output
    for expected in (f"{module}.py", f"tests/test_{module}.py", ".gitignore", "Next steps:", "aeon plugins"):
        assert expected in output
    assert re.search(rf"^  cd .*aeon-demo-{kind}$", output, re.MULTILINE)
    assert 'pip install -e ".[test]"' in output


@pytest.mark.parametrize("kind", KINDS)
def test_the_generated_module_registers_its_component(
    rendered: dict[str, tuple[Path, str]], kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    project, _ = rendered[kind]
    registry, class_name, component = KINDS[kind]
    module = load(project / f"aeon_demo_{kind}.py", monkeypatch)
    assert module.AEON_HOOKSPEC_VERSION == HOOKSPEC_VERSION
    pm = build_plugin_manager([module], autoload=False)
    assert pm.failures == []
    registries = Registries(pm)
    assert registries.conflicts == []
    assert registries[registry].get(component).provider == module.__name__
    built, example = registries[registry].create(component), getattr(module, class_name)
    assert built is example if kind == "tool" else built.__class__ is example
    assert registries.provided_by(module.__name__) == {registry: [component]}
    # The README's `aeon plugins` excerpt is what `aeon plugins` prints for this module, once installed.
    readme = (project / "README.md").read_text(encoding="utf-8")
    assert "pip install -e ." in readme
    (excerpt,) = re.findall(r"```json\n(.*?)```", readme, re.DOTALL)
    (described,) = [p for p in describe_plugins(pm, registries)["plugins"] if p["name"] == module.__name__]
    installed = {**described, "name": f"demo_{kind}", "distribution": f"aeon-demo-{kind}", "version": "0.1.0"}
    assert excerpt.rstrip("\n") == "\n".join(
        "    " + line for line in json.dumps(installed, indent=2).split("\n")
    )


@pytest.mark.parametrize("kind", KINDS)
def test_the_generated_module_keeps_every_other_hook_as_a_stub(
    rendered: dict[str, tuple[Path, str]], kind: str
) -> None:
    project, _ = rendered[kind]
    source = (project / f"aeon_demo_{kind}.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    implemented = {
        node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name in HOOKS
    }
    stubbed = set(re.findall(r"^\s*# def (aeon_\w+)\(", source, re.MULTILINE))
    assert implemented | stubbed == set(HOOKS), set(HOOKS) - implemented - stubbed
    assert not implemented & stubbed


@pytest.mark.parametrize("kind", KINDS)
def test_the_generated_tests_pass(rendered: dict[str, tuple[Path, str]], kind: str, tmp_path: Path) -> None:
    """They use Aeon's fixtures (aeon_orchestrator_factory, ...) and the kind's one-line conformance suite."""
    # A copy: running the tests writes caches, and the original is compared with cookiecutter's output.
    project = Path(shutil.copytree(rendered[kind][0], tmp_path / f"aeon-demo-{kind}"))
    tests = (project / f"tests/test_aeon_demo_{kind}.py").read_text(encoding="utf-8")
    conformance = {"tool": "tool", "llm": "llm_adapter", "memory": "memory", "sink": "telemetry_sink"}[kind]
    assert f"= {conformance}_conformance(" in tests
    assert "aeon_orchestrator_factory" in tests
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(project), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(project), "-q", "-p", "no:cacheprovider"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"\d+ passed", proc.stdout) and "failed" not in proc.stdout, proc.stdout


@pytest.mark.parametrize("kind", KINDS)
def test_the_generated_code_is_lint_clean_whatever_the_name_length(tmp_path: Path, kind: str) -> None:
    """ruff (lint and format) is happy with what the template renders, for a short and the longest name."""
    pytest.importorskip("ruff")
    for name in (f"x-{kind}", f"plugin-with-a-long-name-{kind}".ljust(scaffold.MAX_NAME_LENGTH, "x")):
        project = scaffold.new_plugin(name, tmp_path, kind)
        for command in (
            ["check", "--select", "E,F,W,I,B,UP,SIM,RUF100"],
            ["format", "--check", "--diff"],
        ):
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "ruff",
                    *command,
                    "--isolated",
                    "--no-cache",
                    "--line-length",
                    "110",
                    ".",
                ],
                cwd=project,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert proc.returncode == 0, f"{name}: ruff {command[0]}\n{proc.stdout}{proc.stderr}"


@pytest.mark.parametrize(
    "name",
    [
        "Demo",
        "demo_x",
        "demo x",
        "-demo",
        "demo-",
        "de--mo",
        "1demo",
        "démo",
        "../evil",
        "a" * 41,
        "aeon-foo",
    ],
)
def test_invalid_names_are_refused_with_a_clear_message(tmp_path: Path, name: str) -> None:
    result = new("--dir", str(tmp_path), "--", name)
    assert result.exit_code == 2, result.output
    assert "Invalid value for 'NAME'" in result.output
    assert "aeon-<name>" in result.output
    assert list(tmp_path.iterdir()) == []


def test_invalid_names_come_with_a_suggestion() -> None:
    assert "did you mean 'word-tools'?" in new("Word_Tools").output
    assert "without the 'aeon-' prefix ('foo')" in new("aeon-foo").output


def test_an_existing_directory_is_never_overwritten(tmp_path: Path) -> None:
    (tmp_path / "aeon-demo").mkdir()
    (tmp_path / "aeon-demo" / "mine.txt").write_text("keep me")
    result = new("demo", "--dir", str(tmp_path))
    assert result.exit_code == 2
    assert "already exists" in result.output and "nothing was overwritten" in result.output
    assert files_of(tmp_path) == {"aeon-demo/mine.txt": b"keep me"}


def test_dir_defaults_to_the_working_directory_and_is_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = new("demo")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "aeon-demo" / "aeon_demo.py").is_file()
    assert "\n  cd aeon-demo\n" in result.output
    result = new("other", "--dir", "nested/deeper")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "nested" / "deeper" / "aeon-other" / "aeon_other.py").is_file()


def test_unknown_kind_is_refused(tmp_path: Path) -> None:
    result = new("demo", "--kind", "database", "--dir", str(tmp_path))
    assert result.exit_code == 2 and "'database' is not one of" in result.output
    assert list(tmp_path.iterdir()) == []


def test_a_failed_render_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any) -> Path:
        raise scaffold.ScaffoldError("the plugin template cannot be rendered: boom")

    monkeypatch.setattr(scaffold, "render_template", broken)
    result = new("demo", "--dir", str(tmp_path))
    assert result.exit_code == 2 and "boom" in result.output
    assert list(tmp_path.iterdir()) == []


def test_cli_kinds_match_the_scaffold() -> None:
    group = cli.commands["plugin"]
    assert isinstance(group, click.Group)
    (kind,) = [p for p in group.commands["new"].params if p.name == "kind"]
    assert isinstance(kind.type, click.Choice)
    assert tuple(kind.type.choices) == scaffold.KINDS == tuple(KINDS)


def test_help_and_import_do_not_load_jinja2() -> None:
    probe = "import sys, aeon_kernel, aeon_cli; print('jinja2' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    result = CliRunner().invoke(cli, ["plugin", "new", "--help"])
    assert result.exit_code == 0 and "--kind [tool|llm|memory|sink]" in result.output


# --- the template itself ---------------------------------------------------------------------------------------


def test_template_layout_and_root_symlink() -> None:
    assert (TEMPLATE / "cookiecutter.json").is_file()
    assert (TEMPLATE / "{{cookiecutter.project_slug}}" / ".gitignore").is_file()
    link = ROOT / "plugin_template"
    assert link.is_symlink() and os.readlink(link) == "aeon_cli/plugin_template"
    assert link.resolve() == TEMPLATE.resolve()


def test_template_python_files_parse_before_rendering() -> None:
    """Installing the wheel byte-compiles them, and the kernel's own checks parse every .py file in it."""
    sources = list(TEMPLATE.rglob("*.py"))
    assert len(sources) == 3
    for path in sources:
        ast.parse(path.read_text(encoding="utf-8"), str(path))


def test_cookiecutter_hook_applies_the_same_name_rule() -> None:
    hook = (TEMPLATE / "hooks" / "pre_gen_project.py").read_text(encoding="utf-8")
    assert f'r"{scaffold.NAME_PATTERN.pattern}"' in hook
    assert f"> {scaffold.MAX_NAME_LENGTH}" in hook


def test_cookiecutter_json_declares_the_current_hookspec_version() -> None:
    """``aeon plugin new`` writes this kernel's version; plain cookiecutter users get the json's default.

    When HOOKSPEC_VERSION changes, review the template's hooks and stubs, then update ``_hookspec_version``.
    """
    default = json.loads((TEMPLATE / "cookiecutter.json").read_text(encoding="utf-8"))["_hookspec_version"]
    assert default == HOOKSPEC_VERSION


@pytest.fixture
def cookiecutter_config(tmp_path: Path) -> str:
    """Keep cookiecutter's replay files and clones inside the test's directory."""
    config = tmp_path / "cookiecutter.yaml"
    config.write_text(
        f'cookiecutters_dir: "{tmp_path / "cc-templates"}"\nreplay_dir: "{tmp_path / "cc-replay"}"\n'
    )
    return str(config)


@pytest.mark.parametrize("kind", KINDS)
def test_cookiecutter_renders_the_same_files(
    rendered: dict[str, tuple[Path, str]], tmp_path: Path, cookiecutter_config: str, kind: str
) -> None:
    main = pytest.importorskip("cookiecutter.main")
    out = tmp_path / "out"
    created = main.cookiecutter(
        str(ROOT / "plugin_template"),
        no_input=True,
        output_dir=str(out),
        config_file=cookiecutter_config,
        extra_context={"project_name": f"demo-{kind}", "kind": kind, "_hookspec_version": HOOKSPEC_VERSION},
    )
    assert Path(created) == out / f"aeon-demo-{kind}"
    assert files_of(Path(created)) == files_of(rendered[kind][0])


def test_cookiecutter_defaults_render_a_tool_plugin(tmp_path: Path, cookiecutter_config: str) -> None:
    main = pytest.importorskip("cookiecutter.main")
    created = Path(
        main.cookiecutter(
            str(ROOT / "plugin_template"),
            no_input=True,
            output_dir=str(tmp_path / "out"),
            config_file=cookiecutter_config,
            extra_context={"project_name": "word-tools"},
        )
    )
    assert created.name == "aeon-word-tools"
    source = (created / "aeon_word_tools.py").read_text(encoding="utf-8")
    assert 'TOOL_NAME = "word_tools_word_count"' in source
    pyproject = tomllib.loads((created / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["entry-points"]["aeon"] == {"word_tools": "aeon_word_tools"}


def test_cookiecutter_refuses_an_invalid_name(tmp_path: Path, cookiecutter_config: str) -> None:
    main = pytest.importorskip("cookiecutter.main")
    exceptions = pytest.importorskip("cookiecutter.exceptions")
    with pytest.raises(exceptions.FailedHookException):
        main.cookiecutter(
            str(ROOT / "plugin_template"),
            no_input=True,
            output_dir=str(tmp_path / "out"),
            config_file=cookiecutter_config,
            extra_context={"project_name": "Bad_Name"},
        )
    assert not (tmp_path / "out" / "aeon-Bad_Name").exists()


def test_render_template_follows_cookiecutter_context_rules(tmp_path: Path) -> None:
    """Variables render in order, choices default to their first item, ``_`` keys are copied, unknown extra
    context is ignored, and a value outside a choice is an error."""
    template = tmp_path / "template"
    (template / "{{cookiecutter.slug}}" / "{{cookiecutter.pkg}}").mkdir(parents=True)
    (template / "cookiecutter.json").write_text(
        json.dumps(
            {
                "name": "Hello World",
                "color": ["red", "blue"],
                "slug": "{{ cookiecutter.name|lower|replace(' ', '-') }}",
                "pkg": "{{ cookiecutter.slug|replace('-', '_') }}",
                "_raw": "{{ not rendered }}",
                "flag": True,
            }
        )
    )
    (template / "{{cookiecutter.slug}}" / "{{cookiecutter.pkg}}" / "{{cookiecutter.color}}.txt").write_text(
        "{{ cookiecutter.name }} {{ cookiecutter._raw }} {{ cookiecutter.flag }}\n"
    )
    project = scaffold.render_template(template, tmp_path / "out", {"color": "blue", "unknown": 1})
    assert files_of(project) == {"hello_world/blue.txt": b"Hello World {{ not rendered }} True\n"}
    assert project.name == "hello-world"
    with pytest.raises(scaffold.ScaffoldError, match="not a choice for color"):
        scaffold.render_template(template, tmp_path / "other", {"color": "green"})


# --- the author's guide ----------------------------------------------------------------------------------------


def test_the_plugin_guide_covers_every_hook_and_its_examples_compile() -> None:
    guide = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    for hook in HOOKS:
        assert f"`{hook}`" in guide or f"def {hook}(" in guide, hook
    for block in re.findall(r"```python\n(.*?)```", guide, re.DOTALL):
        ast.parse(block)
    for suite in (
        "tool_conformance",
        "memory_conformance",
        "llm_adapter_conformance",
        "telemetry_sink_conformance",
    ):
        assert suite in guide
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(docs/plugins.md)" in readme
