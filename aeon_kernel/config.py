"""``aeon.toml``: which registered component to use for each role, with its options.

Lookup order: an explicit path (``--config``), then ``$AEON_CONFIG``, then ``./aeon.toml``, then built-in
defaults. Components are chosen by registered name, never by import path (DESIGN rule 6). Secrets are
references — ``{ "$env" = "NAME" }`` or ``{ "$file" = "path" }`` — resolved only when the component is built,
into ``pydantic.SecretStr`` so they print as ``**********``: stripped of surrounding whitespace, refused with a
ConfigError if a control character is inside, and registered with :mod:`aeon_kernel.secrets`, so that no output
shows them in any form. A ``$file`` must be a regular UTF-8 file of at most 8 KiB.

```toml
[run]
ttl = 50

[llm]
use = "scripted"
responses = "responses.json"

[memory]
use = "in_memory"

[telemetry]
use = ["jsonl"]
[telemetry.jsonl]
path = "run.jsonl"

[tools]
enabled = ["calculator", "echo"]     # default: every registered tool

[plugins]
block = ["some-plugin"]
```
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from aeon_kernel.errors import ConfigError
from aeon_kernel.kinds import BY_SECTION, ROLES
from aeon_kernel.memory_values import is_utf8
from aeon_kernel.schemas import canonical_json

if TYPE_CHECKING:
    from aeon_kernel.contracts import SecretProvider

CONFIG_ENV: Final = "AEON_CONFIG"
DEFAULT_FILE: Final = "aeon.toml"

_TOP_LEVEL: Final = {*BY_SECTION, "run", "plugins", "reasoning", "retention"}
#: ``[reasoning]``: ``mode`` ("single", the default, or "multipass") and the multi-pass scheduler's options
REASONING_KEYS: Final = frozenset(
    {
        "completeness_threshold",
        "coherence_threshold",
        "consistency_threshold",
        "max_passes",
        "refinements_per_fragment",
        "max_refinements",
        "max_depth",
        "shallow_depth",
        "shallow_plan_steps",
        "ttl_cap",
    }
)
_RUN_KEYS: Final = {"ttl", "max_tokens", "temperature"}
_PLUGIN_KEYS: Final = {"allow", "block"}
#: ``[retention]``: how many recorded runs the CLI keeps (``keep``) and for how long (``older_than``, "30d")
_RETENTION_KEYS: Final = {"keep", "older_than"}
#: No option nests anywhere near this; deeper is a mistake (or an attack on the checks that walk it).
_MAX_CONFIG_DEPTH: Final = 32


@dataclass(frozen=True)
class Choice:
    """A component chosen by registered name, with the options its factory receives."""

    use: str
    options: dict[str, Any] = field(default_factory=dict)

    def resolved_options(self, providers: Providers | None = None) -> dict[str, Any]:
        """Options with secret references replaced by their values (as SecretStr)."""
        return {
            key: resolve_secrets(value, f"{self.use}.{key}", providers) for key, value in self.options.items()
        }


@dataclass(frozen=True)
class AeonConfig:
    """The parsed configuration. Every field has a default, so ``AeonConfig()`` is a working setup."""

    #: one chosen component per role (``[llm]``, ``[memory]``, ... — the ``one`` kinds of :mod:`aeon_kernel.kinds`)
    choices: dict[str, Choice] = field(
        default_factory=lambda: {role: Choice(kind.default or "") for role, kind in ROLES.items()}
    )
    telemetry: tuple[Choice, ...] = ()
    #: the policies ``[policy] use`` names (``["rules"]`` once the section exists), each with its options
    policies: tuple[Choice, ...] = ()
    tools_enabled: tuple[str, ...] | None = None
    tool_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    ttl: int = 50
    max_tokens: int = 512
    temperature: float = 0.0
    allow: tuple[str, ...] | None = None
    block: tuple[str, ...] = ()
    state: Choice | None = None  # durable runs: off unless [state] names a store
    artifacts: Choice | None = (
        None  # every output kept (spec 004 §10.1): off unless [artifacts] names a store
    )
    #: ``[retention]``: the CLI prunes its state store to these before each recorded run (``aeon runs prune``)
    retention: dict[str, Any] = field(default_factory=dict)
    source: Path | None = None
    #: the sections the file set itself (a default may follow another setting only where the user left it open)
    explicit: frozenset[str] = frozenset()

    def choice(self, role: str) -> Choice:
        return self.choices[role]

    def optional(self, section: str) -> Choice | None:
        """The component an ``optional`` section (``[state]``, ``[artifacts]``) names, or None without it."""
        return {"state": self.state, "artifacts": self.artifacts}[section]

    def chosen(self, section: str) -> tuple[Choice, ...]:
        """The components a ``many`` section (``[telemetry]``, ``[policy]``) names."""
        return {"telemetry": self.telemetry, "policy": self.policies}[section]

    def multipass(self, **options: Any) -> AeonConfig:
        """A copy that reasons in several passes (spec 003): the ``multipass`` scheduler with ``options`` (the
        ``[reasoning]`` keys), and, where ``aeon.toml`` chose none, the ``recursive`` planner and the ``model``
        convergence engine."""
        bad = set(options) - REASONING_KEYS
        if bad:
            raise ConfigError(
                f"unknown key(s) {sorted(bad)} in [reasoning]; valid: {sorted(REASONING_KEYS | {'mode'})}"
            )
        changes = {"scheduler": Choice("multipass", dict(options))}
        if "planner" not in self.explicit:
            changes["planner"] = Choice("recursive")
        if "convergence" not in self.explicit:
            changes["convergence"] = Choice("model")
        if "scheduler" in self.explicit:
            del changes["scheduler"]  # the user's own scheduler wins
        from dataclasses import replace

        return replace(self, choices={**self.choices, **changes})

    def with_choice(self, role: str, use: str, **options: Any) -> AeonConfig:
        """A copy with ``role`` switched to another component (used by CLI flags and tests); chosen, like a table
        in aeon.toml, so that :meth:`multipass` keeps it."""
        from dataclasses import replace

        if role == "state":
            return replace(self, state=Choice(use, options))
        choices = {**self.choices, role: Choice(use, options)}
        return replace(self, choices=choices, explicit=self.explicit | {role})

    def fingerprint(self) -> str:
        """A hash of the configuration with secret references left unresolved: safe to log."""
        data = {
            "choices": {r: [c.use, c.options] for r, c in self.choices.items()},
            "telemetry": [[c.use, c.options] for c in self.telemetry],
            "policy": [[c.use, c.options] for c in self.policies],
            "tools": [self.tools_enabled, self.tool_options],
            "run": [self.ttl, self.max_tokens, self.temperature],
            "state": [self.state.use, self.state.options] if self.state else None,
            "artifacts": [self.artifacts.use, self.artifacts.options] if self.artifacts else None,
        }
        import hashlib  # here, not at the top: importing the config stays light

        return hashlib.sha256(canonical_json(data).encode()).hexdigest()[:16]


def find_config(path: str | Path | None = None) -> Path | None:
    """The file to read, by the lookup order above; None means built-in defaults."""
    if path is not None:
        candidate = Path(path)
        if not candidate.is_file():
            raise ConfigError(f"config file {str(candidate)!r} does not exist")
        return candidate
    from_env = os.environ.get(CONFIG_ENV)
    if from_env:
        candidate = Path(from_env)
        if not candidate.is_file():
            raise ConfigError(f"${CONFIG_ENV} points to {from_env!r}, which does not exist")
        return candidate
    local = Path(DEFAULT_FILE)
    return local if local.is_file() else None


def load_config(path: str | Path | None = None) -> AeonConfig:
    """Find and parse the configuration; raises ConfigError saying which key is wrong and how to fix it."""
    found = find_config(path)
    if found is None:
        return AeonConfig()
    import tomllib

    try:
        data = tomllib.loads(found.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{found}: not valid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {found}: {exc}") from None
    return parse_config(data, source=found)


def parse_config(data: dict[str, Any], source: Path | None = None) -> AeonConfig:
    where = str(source) if source else "config"
    _check_values(data, where)
    unknown = set(data) - _TOP_LEVEL
    if unknown:
        raise ConfigError(
            f"{where}: unknown section(s) {sorted(unknown)}; valid sections: {sorted(_TOP_LEVEL)}"
        )
    choices = {}
    for role, kind in ROLES.items():
        table = _table(data, role, where)
        use = table.pop("use", kind.default)
        if not isinstance(use, str) or not use:
            raise ConfigError(f"{where}: [{role}] use must be a component name, got {use!r}")
        choices[role] = Choice(use, table)
    run = _table(data, "run", where)
    bad_run = set(run) - _RUN_KEYS
    if bad_run:
        raise ConfigError(f"{where}: unknown key(s) {sorted(bad_run)} in [run]; valid: {sorted(_RUN_KEYS)}")
    ttl = run.get("ttl", 50)
    if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl < 1:
        raise ConfigError(f"{where}: [run] ttl must be a positive integer, got {ttl!r}")
    max_tokens = run.get("max_tokens", 512)
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise ConfigError(f"{where}: [run] max_tokens must be a positive integer, got {max_tokens!r}")
    temperature = run.get("temperature", 0.0)
    if (
        not isinstance(temperature, (int, float))
        or isinstance(temperature, bool)
        or not math.isfinite(temperature)
        or temperature < 0
    ):
        raise ConfigError(f"{where}: [run] temperature must be a finite number >= 0, got {temperature!r}")
    telemetry = _table(data, "telemetry", where)
    sinks = telemetry.pop("use", [])
    sinks = [sinks] if isinstance(sinks, str) else sinks
    if not isinstance(sinks, list) or not all(isinstance(s, str) for s in sinks):
        raise ConfigError(f"{where}: [telemetry] use must be a list of sink names")
    policies = _many(data, "policy", ["rules"], where)
    tools = _table(data, "tools", where)
    enabled = tools.pop("enabled", None)
    if enabled is not None and (
        not isinstance(enabled, list) or not all(isinstance(t, str) for t in enabled)
    ):
        raise ConfigError(f"{where}: [tools] enabled must be a list of tool names")
    plugins = _table(data, "plugins", where)
    bad_plugins = set(plugins) - _PLUGIN_KEYS
    if bad_plugins:
        raise ConfigError(
            f"{where}: unknown key(s) {sorted(bad_plugins)} in [plugins]; valid: {sorted(_PLUGIN_KEYS)}"
        )
    allow, block = plugins.get("allow"), plugins.get("block")  # None (from code) means "not set"
    for name, value in (("allow", allow), ("block", block)):
        if value is not None and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
            raise ConfigError(f"{where}: [plugins] {name} must be a list of plugin names")
    state, artifacts = (_optional(data, section, where) for section in ("state", "artifacts"))
    retention = _table(data, "retention", where)
    bad = set(retention) - _RETENTION_KEYS
    keep, older = retention.get("keep"), retention.get("older_than")
    if bad or (keep is not None and (not isinstance(keep, int) or isinstance(keep, bool) or keep < 0)):
        raise ConfigError(
            f'{where}: [retention] takes keep = N (runs, newest first) and older_than = "30d" (s, m, h, d or w); '
            f"got {retention}"
        )
    if older is not None and not isinstance(older, str):
        raise ConfigError(f'{where}: [retention] older_than must be a duration such as "30d", got {older!r}')
    config = AeonConfig(
        choices=choices,
        telemetry=tuple(Choice(name, _sub_table(telemetry, name, "telemetry", where)) for name in sinks),
        policies=policies,
        tools_enabled=tuple(enabled) if enabled is not None else None,
        tool_options={name: _sub_table(tools, name, "tools", where) for name in list(tools)},
        ttl=ttl,
        max_tokens=max_tokens,
        temperature=float(temperature),
        allow=tuple(allow) if allow is not None else None,
        block=tuple(block or ()),
        state=state,
        artifacts=artifacts,
        retention=retention,
        source=source,
        explicit=frozenset(data),
    )
    reasoning = _table(data, "reasoning", where)
    mode = reasoning.pop("mode", "single")
    if mode not in ("single", "multipass"):
        raise ConfigError(f'{where}: [reasoning] mode must be "single" or "multipass", got {mode!r}')
    if mode == "multipass":
        return config.multipass(**reasoning)
    if reasoning:
        raise ConfigError(f'{where}: [reasoning] options need mode = "multipass" (got {sorted(reasoning)})')
    return config


def _check_values(value: Any, where: str, key: str = "", depth: int = 0) -> None:
    """Every value must be one an option can mean and a log can carry: TOML allows ``nan`` and ``inf`` (no option
    means them, and JSON cannot carry them); a configuration built in Python may also hold a lone surrogate (no
    UTF-8 form: no file, log or fingerprint can hold it), a key that is not a string, or unbounded nesting."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{where}: {key} = {value} is not a finite number (no option takes nan or inf)")
    if isinstance(value, str) and not is_utf8(value):
        raise ConfigError(f"{where}: {key} holds a lone surrogate, which no file or log can carry")
    if depth > _MAX_CONFIG_DEPTH and isinstance(value, (dict, list)):
        raise ConfigError(f"{where}: {key} nests deeper than {_MAX_CONFIG_DEPTH} levels")
    if isinstance(value, dict):
        for name, item in value.items():
            if not isinstance(name, str) or not is_utf8(name):
                raise ConfigError(f"{where}: the key {name!r} under {key or 'the top level'} is not a name")
            _check_values(item, where, f"{key}.{name}" if key else name, depth + 1)
    elif isinstance(value, list):
        for number, item in enumerate(value):
            _check_values(item, where, f"{key}[{number}]", depth + 1)


def _optional(data: dict[str, Any], section: str, where: str) -> Choice | None:
    """An ``optional`` kind's choice: None without its section, else ``use`` (or the kind's default)."""
    if section not in data:
        return None
    table = _table(data, section, where)
    kind = BY_SECTION[section]
    use = table.pop("use", kind.default)
    if not isinstance(use, str) or not use:
        raise ConfigError(f"{where}: [{section}] use must be the name of a {kind.label}, got {use!r}")
    return Choice(use, table)


def _many(data: dict[str, Any], section: str, default: list[str], where: str) -> tuple[Choice, ...]:
    """``[section] use = [NAMES]`` (``default`` when the section exists without it), each with the options of
    its ``[section.NAME]`` table; any other key is a mistake."""
    if section not in data:
        return ()
    table = _table(data, section, where)
    names = table.pop("use", default)
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise ConfigError(f"{where}: [{section}] use must be a list of names")
    chosen = tuple(Choice(name, _sub_table(table, name, section, where)) for name in names)
    unknown = set(table) - set(names)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {sorted(unknown)} in [{section}]: options go in the table of the "
            f"{section} they are for, e.g. [{section}.{names[0] if names else 'NAME'}]"
        )
    return chosen


def _table(data: dict[str, Any], name: str, where: str) -> dict[str, Any]:
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: [{name}] must be a table")
    return dict(value)


def _sub_table(parent: dict[str, Any], name: str, section: str, where: str) -> dict[str, Any]:
    value = parent.get(name, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: [{section}.{name}] must be a table of options")
    return dict(value)


#: The most a ``$file`` secret may hold, in bytes (= secrets.MAX_SECRET, not imported: a config may have no secrets)
SECRET_FILE_LIMIT: Final = 8 * 1024


#: A secret provider by name (``vault`` for ``{ "$vault" = ... }``), or None when no plugin registers one.
Providers = Callable[[str], "SecretProvider | None"]


def resolve_secrets(value: Any, where: str = "option", providers: Providers | None = None) -> Any:
    """Replace ``{"$env": NAME}``, ``{"$file": path}`` and ``{"$<provider>": reference}`` references, at any
    depth, with SecretStr values (``providers`` finds a plugin's provider by name; without it only ``$env`` and
    ``$file`` resolve).

    A secret is one line of text: surrounding whitespace (the newline ``echo`` or an editor leaves) is stripped,
    and a control character inside it (a line break, NUL, escape) is a ConfigError, never sent on. Each value is
    registered with :mod:`aeon_kernel.secrets`, so no output shows it, in any form. No error quotes the value.
    """
    if isinstance(value, dict):
        if set(value) == {"$env"}:
            name = value["$env"]
            if not isinstance(name, str) or not name:
                raise ConfigError(f"{where}: $env must name an environment variable, got {name!r}")
            if name not in os.environ:
                raise ConfigError(f"{where}: the environment variable {name!r} is not set")
            return _secret(os.environ[name], where, f"the environment variable {name!r}")
        if set(value) == {"$file"}:
            path = value["$file"]
            if not isinstance(path, str) or not path:
                raise ConfigError(f"{where}: $file must be a path, got {path!r}")
            return _secret(_read_secret_file(path, where), where, f"the secret file {path!r}")
        if len(value) == 1 and next(iter(value)).startswith("$"):
            return _provided(next(iter(value)), next(iter(value.values())), where, providers)
        return {key: resolve_secrets(item, f"{where}.{key}", providers) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve_secrets(item, where, providers) for item in value]
    return value


def _provided(key: str, reference: Any, where: str, providers: Providers | None) -> Any:
    """``{ "$<name>" = reference }``: the secret the provider registered as ``name`` gives for ``reference``."""
    name = key[1:]
    provider = providers(name) if providers is not None and name else None
    if provider is None:
        raise ConfigError(
            f"{where}: {key} names no secret provider; use $env or $file, or install the plugin that provides "
            f"{name!r} (aeon plugins lists the secret providers)"
        )
    if not isinstance(reference, str) or not reference:
        raise ConfigError(
            f"{where}: {key} must be a reference (a non-empty string), got {type(reference).__name__}"
        )
    try:
        raw = provider.get(reference)
    except ConfigError:
        raise
    except Exception as exc:  # its message may hold what it fetched: name the failure, not the text
        raise ConfigError(
            f"{where}: the secret provider {name!r} failed for {reference!r}: {type(exc).__name__}"
        ) from None
    if not isinstance(raw, str):
        raise ConfigError(f"{where}: the secret provider {name!r} gave {type(raw).__name__}, not text")
    return _secret(raw, where, f"the secret {reference!r} of provider {name!r}")


def _secret(raw: str, where: str, source: str) -> Any:
    """``raw`` stripped, checked and registered, as a SecretStr; a ConfigError (never quoting it) if unusable."""
    from pydantic import SecretStr  # only a config with secrets pays for importing pydantic here

    from aeon_kernel.secrets import clean_secret

    return SecretStr(clean_secret(raw, f"{where}: {source}"))


def _read_secret_file(path: str, where: str) -> str:
    """The text of a secret file: a regular file (a FIFO, a device or a directory is refused without waiting on
    it), at most SECRET_FILE_LIMIT bytes, UTF-8."""
    import stat

    def refuse(reason: str) -> ConfigError:
        return ConfigError(f"{where}: cannot read secret file {path!r}: {reason}")

    try:
        # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer (a regular file ignores it)
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
        if not stat.S_ISREG(os.stat(path).st_mode):  # refuse before opening: opening a device may act
            raise refuse("it is not a regular file")
        fd = os.open(path, flags)
    except OSError as exc:
        raise refuse(exc.strerror or type(exc).__name__) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced between the check and the open
            raise refuse("it is not a regular file")
        data = b""
        while len(data) <= SECRET_FILE_LIMIT:
            chunk = os.read(fd, SECRET_FILE_LIMIT + 1 - len(data))
            if not chunk:
                break
            data += chunk
    except OSError as exc:
        raise refuse(exc.strerror or type(exc).__name__) from None
    finally:
        os.close(fd)
    if len(data) > SECRET_FILE_LIMIT:
        raise refuse(
            f"it is larger than {SECRET_FILE_LIMIT // 1024} KiB; a secret file holds one key or token"
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise refuse("it is not UTF-8 text") from None
