"""``aeon plugin new``: render the plugin template shipped in ``aeon_cli/plugin_template``.

The template is a cookiecutter template (``cookiecutter.json`` and a ``{{cookiecutter.project_slug}}/``
directory), so ``cookiecutter plugin_template`` works from a checkout. This module renders it with the same
semantics without needing cookiecutter: the variables of ``cookiecutter.json`` are rendered in order, each
seeing the ones before it under ``cookiecutter``; a list is a choice whose first item is the default; keys
starting with ``_`` are copied as they are; ``_jinja2_env_vars`` configures the Jinja2 environment; then every
path name and every text file below the project directory is rendered with Jinja2. Template hooks are not run:
:func:`check_name` applies the rule of the template's ``pre_gen_project`` hook itself.

Jinja2 is imported only when a template is rendered, so ``aeon --help`` stays light (DESIGN rule 5).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from aeon_kernel.errors import AeonError
from aeon_kernel.hookspecs import HOOKSPEC_VERSION

if TYPE_CHECKING:
    import jinja2

#: What the example in the generated module implements; the other hooks stay as commented stubs.
KINDS: Final = ("tool", "llm", "memory", "sink")
#: The plugin name rule; the template's hooks/pre_gen_project.py applies the same one for cookiecutter users.
NAME_PATTERN: Final = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
MAX_NAME_LENGTH: Final = 40
TEMPLATE_DIR: Final = Path(__file__).resolve().parent / "plugin_template"


class ScaffoldError(AeonError):
    """A plugin package cannot be created as asked (an invalid name, an existing directory, a broken template)."""


def check_name(name: str) -> str:
    """Return ``name`` when it is a valid plugin name; raise ScaffoldError saying what a valid one looks like."""
    if name.startswith(("aeon-", "aeon_")) and len(name) > 5:
        raise ScaffoldError(
            f"give the name without the 'aeon-' prefix ({name[5:]!r}): the package is aeon-<name>"
        )
    if NAME_PATTERN.fullmatch(name) and len(name) <= MAX_NAME_LENGTH:
        return name
    suggestion = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    hint = (
        f"; did you mean {suggestion!r}?"
        if NAME_PATTERN.fullmatch(suggestion) and len(suggestion) <= MAX_NAME_LENGTH
        else ""
    )
    raise ScaffoldError(
        f"invalid plugin name {name!r}: use lower-case letters, digits and single hyphens, starting with a "
        f"letter, at most {MAX_NAME_LENGTH} characters (the package is aeon-<name>, the module aeon_<name>)"
        + hint
    )


def names(name: str) -> dict[str, str]:
    """The names derived from a plugin name, as the template derives them."""
    return {
        "project_slug": f"aeon-{name}",
        "module_name": f"aeon_{name.replace('-', '_')}",
        "plugin_name": name.replace("-", "_"),
    }


def new_plugin(name: str, parent: str | Path = ".", kind: str = "tool") -> Path:
    """Create the package ``aeon-<name>`` in ``parent`` (created when missing) and return its directory.

    The generated module declares the hook specification version of this kernel (``AEON_HOOKSPEC_VERSION``).

    Refuses to touch an existing directory. The project is rendered next to its destination and moved into
    place at the end, so a failure never leaves a half-written package behind.
    """
    check_name(name)
    if kind not in KINDS:
        raise ScaffoldError(f"unknown kind {kind!r}: choose one of {', '.join(KINDS)}")
    parent = Path(parent)
    target = parent / names(name)["project_slug"]
    if target.exists() or target.is_symlink():
        raise ScaffoldError(
            f"{target} already exists; remove it, or choose another NAME or --dir (nothing was overwritten)"
        )
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=parent))
    except OSError as exc:
        raise ScaffoldError(f"cannot create a directory in {parent}: {exc.strerror or exc}") from None
    try:
        context = {"project_name": name, "kind": kind, "_hookspec_version": HOOKSPEC_VERSION}
        rendered = render_template(TEMPLATE_DIR, staging, context)
        try:
            rendered.rename(target)
        except OSError as exc:
            raise ScaffoldError(f"cannot create {target}: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def render_template(template: Path, output_dir: Path, extra_context: Mapping[str, Any] | None = None) -> Path:
    """Render a cookiecutter template into ``output_dir`` without prompting; return the project directory."""
    context = build_context(template, extra_context or {})
    env = _environment(context)
    project = _project_dir(template)
    target = output_dir / _render(env, project.name, context)
    if target.exists():
        raise ScaffoldError(f"{target} already exists")
    target.mkdir(parents=True)
    for source in sorted(project.rglob("*")):
        relative = source.relative_to(project).as_posix()
        if "__pycache__" in source.relative_to(project).parts or source.suffix in {".pyc", ".pyo"}:
            continue  # byte code that installing the wheel compiled from the template's .py files
        destination = target / _render(env, relative, context)
        if source.is_dir():
            destination.mkdir(parents=True, exist_ok=True)
            continue
        if destination.is_dir():  # the file name rendered empty: cookiecutter skips such files
            continue
        destination.parent.mkdir(parents=True, exist_ok=True)
        data = source.read_bytes()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:  # a binary file is copied as it is
            destination.write_bytes(data)
        else:
            with destination.open("w", encoding="utf-8", newline="") as out:
                out.write(_render(env, text, context))
        shutil.copymode(source, destination)
    return target


def build_context(template: Path, extra_context: Mapping[str, Any]) -> dict[str, Any]:
    """The ``cookiecutter`` dict, as ``cookiecutter --no-input template key=value ...`` computes it."""
    try:
        raw: dict[str, Any] = json.loads((template / "cookiecutter.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ScaffoldError(f"{template} is not a usable cookiecutter template: {exc}") from None
    for key, value in extra_context.items():
        if key not in raw:
            continue  # cookiecutter ignores unknown variables too
        if isinstance(raw[key], list):
            if value not in raw[key]:
                raise ScaffoldError(f"{value!r} is not a choice for {key}: choose one of {raw[key]}")
            raw[key] = [value, *(item for item in raw[key] if item != value)]
        else:
            raw[key] = value
    env = _environment({"cookiecutter": raw})
    rendered: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "__prompts__":
            continue
        if key.startswith("_") and not key.startswith("__"):
            rendered[key] = value
        elif isinstance(value, list):
            rendered[key] = _render_value(env, value[0], rendered)
        else:
            rendered[key] = _render_value(env, value, rendered)
    return {"cookiecutter": rendered}


def _render_value(env: jinja2.Environment, value: Any, rendered: dict[str, Any]) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, dict):
        return {_render_value(env, k, rendered): _render_value(env, v, rendered) for k, v in value.items()}
    if isinstance(value, list):
        return [_render_value(env, item, rendered) for item in value]
    return env.from_string(str(value)).render(cookiecutter=rendered)


def _environment(context: Mapping[str, Any]) -> jinja2.Environment:
    import jinja2

    options = context["cookiecutter"].get("_jinja2_env_vars", {})
    return jinja2.Environment(  # noqa: S701 - renders source code and Markdown, never HTML
        undefined=jinja2.StrictUndefined, keep_trailing_newline=True, **options
    )


def _render(env: jinja2.Environment, source: str, context: Mapping[str, Any]) -> str:
    import jinja2

    try:
        return env.from_string(source).render(**context)
    except jinja2.TemplateError as exc:
        raise ScaffoldError(f"the plugin template cannot be rendered: {exc}") from None


def _project_dir(template: Path) -> Path:
    for path in sorted(template.iterdir()):
        if path.is_dir() and "cookiecutter" in path.name and "{{" in path.name and "}}" in path.name:
            return path
    raise ScaffoldError(f"{template} has no {{{{cookiecutter.*}}}} project directory")


def report(target: Path, name: str, kind: str) -> str:
    """What ``aeon plugin new`` prints: the files it created, what each is for, and the next steps."""
    derived = names(name)
    module, test = f"{derived['module_name']}.py", f"tests/test_{derived['module_name']}.py"
    notes = {
        "pyproject.toml": f"the package; entry point {derived['plugin_name']} = {derived['module_name']}",
        module: f"the plugin: the {kind} example, and every other hook as a commented stub",
        test: "its tests: Aeon's pytest fixtures and the conformance suite",
    }
    files = sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file())
    lines = [f"Created {derived['project_slug']}, an Aeon {kind} plugin, in {target.resolve()}:"]
    lines += [f"  {path:<{len(test) + 2}}{notes.get(path, '')}".rstrip() for path in files]
    lines += [
        "Next steps:",
        f"  cd {shlex.quote(_relative_to_cwd(target))}",
        '  pip install -e ".[test]"',
        f"  aeon plugins        # lists {derived['plugin_name']!r} with its hooks and components",
        "  python -m pytest",
    ]
    return "\n".join(lines)


def _relative_to_cwd(path: Path) -> str:
    """``path`` as the user would type it from here: relative when it is below the working directory."""
    absolute = path.resolve()
    try:
        return str(absolute.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(absolute)
