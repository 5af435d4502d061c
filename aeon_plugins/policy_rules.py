"""The ``rules`` policy: declarative allow and deny rules from ``aeon.toml`` (spec 004 §10.5, issue 17).

    [policy]
    use = ["rules"]                 # the default once [policy] exists

    [policy.rules]
    default = "allow"               # or "deny": a tool call no allow rule matches is refused

    [[policy.rules.deny]]
    name = "no-secrets"
    tool = "files"
    path = "secrets/*"
    reason = "the secrets directory is off limits"

    [[policy.rules.ask]]            # the call waits for a person: aeon approve RUN_ID (decision 0021)
    name = "writes-need-a-person"
    tool = "files"
    arguments = { operation = "^write$" }
    expires_in = 3600               # seconds to answer; later, the call fails (optional)

A rule matches an action when every condition it sets holds: ``tool`` and ``node`` (globs, ``*`` and ``?``),
``path`` and ``host`` (globs against what the call touches, as the tool reports it — a path already normalised
relative to its root — where ``*`` also crosses ``/``; hosts ignore case), and ``arguments`` (argument name ->
regular expression searched in the value, text as it is, anything else as JSON). A deny rule that matches wins;
then an ask rule, which holds a tool call or a flow stage until a person answers (on a model step it refuses);
``default`` applies to tool calls only, so a flow stage is refused only by a deny rule naming its ``node``.

A path rule binds only what a tool can name, so while one applies to a call (its ``tool`` and ``node``, if set,
match it) the call is also refused when the tool reports a path it could not resolve (``unresolved``: rule
``unresolved-path``) or a path outside its root (an absolute path: rule ``outside-root``) that no allow rule's
``path`` names — ``[[policy.rules.allow]] path = "/usr/share/dict/*"`` lets a program read there.
"""

from __future__ import annotations

import json
import re
from fnmatch import fnmatchcase
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from aeon_kernel import ConfigError, Policy, PolicyAction, PolicyDecision, Register, hookimpl


class Rule(BaseModel):
    """One rule; the conditions it sets must all hold."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    tool: str | None = None
    node: str | None = None
    path: str | None = None
    host: str | None = None
    arguments: dict[str, str] = {}
    reason: str = ""
    #: an ask rule's seconds to answer
    expires_in: float | None = Field(default=None, gt=0)

    def applies_to(self, action: PolicyAction) -> bool:
        """Whether the rule's ``tool`` and ``node`` hold for ``action`` (its other conditions aside)."""
        if self.tool is not None and not (action.tool and fnmatchcase(action.tool, self.tool)):
            return False
        return self.node is None or bool(action.node and fnmatchcase(action.node, self.node))

    def matches(self, action: PolicyAction) -> bool:
        if not self.applies_to(action):
            return False
        if self.path is not None and not any(
            fnmatchcase(path, self.path) for path in action.resources.get("path", ())
        ):
            return False
        if self.host is not None and not any(
            fnmatchcase(host.lower(), self.host.lower()) for host in action.resources.get("host", ())
        ):
            return False
        return all(
            name in action.arguments and re.search(pattern, _text(action.arguments[name])) is not None
            for name, pattern in self.arguments.items()
        )


class RulesPolicy(Policy):
    def __init__(
        self,
        deny: list[dict[str, Any]] | None = None,
        allow: list[dict[str, Any]] | None = None,
        default: Literal["allow", "deny"] = "allow",
        ask: list[dict[str, Any]] | None = None,
    ) -> None:
        if default not in ("allow", "deny"):
            raise ConfigError(f'[policy.rules] default must be "allow" or "deny", got {default!r}')
        self.deny = _rules(deny or [], "deny")
        self.allow = _rules(allow or [], "allow")
        self.ask = _rules(ask or [], "ask")
        if timed := [rule.name for rule in (*self.deny, *self.allow) if rule.expires_in is not None]:
            raise ConfigError(f"[policy.rules] expires_in is for ask rules; {timed[0]!r} is not one")
        self.default = default
        self._path_rules = tuple(rule for rule in (*self.deny, *self.allow) if rule.path is not None)

    def evaluate(self, action: PolicyAction) -> PolicyDecision | None:
        for rule in self.deny:
            if rule.matches(action):
                return PolicyDecision(allowed=False, rule=rule.name, reason=rule.reason)
        if action.kind == "tool_call" and (unbound := self._unbound_paths(action)) is not None:
            return unbound
        for rule in self.ask:
            if rule.matches(action):
                return PolicyDecision(
                    allowed=False, ask=True, rule=rule.name, reason=rule.reason, expires_in=rule.expires_in
                )
        if action.kind != "tool_call":  # default = "deny" is about tool calls: stages and model steps run
            return None
        if self.default == "allow":
            return None
        for rule in self.allow:
            if rule.matches(action):
                return PolicyDecision(allowed=True, rule=rule.name, reason=rule.reason)
        return PolicyDecision(
            allowed=False,
            rule="default",
            reason='no allow rule matches it, and [policy.rules] default = "deny"',
        )

    def _unbound_paths(self, action: PolicyAction) -> PolicyDecision | None:
        """The refusal of a call whose paths a path rule that applies to it cannot judge: unresolved ones, and
        ones outside the tool's root that no allow rule names."""
        applying = [rule.name for rule in self._path_rules if rule.applies_to(action)]
        if not applying:
            return None
        because = f"and the path rule {applying[0]!r} applies to this call"
        unresolved = action.resources.get("unresolved", ())
        if unresolved:
            return PolicyDecision(
                allowed=False,
                rule="unresolved-path",
                reason=f"what {_short(unresolved[0])} names could not be worked out, {because}",
            )
        for path in action.resources.get("path", ()):
            if path.startswith("/") and not any(
                rule.matches(action.model_copy(update={"resources": {**action.resources, "path": [path]}}))
                for rule in self.allow
                if rule.path is not None
            ):
                return PolicyDecision(
                    allowed=False,
                    rule="outside-root",
                    reason=f"{_short(path)} is outside the tool's root and no allow rule's path names it, {because}",
                )
        return None


def _short(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:77] + "...")


def _rules(tables: list[dict[str, Any]], effect: str) -> tuple[Rule, ...]:
    if not isinstance(tables, list):
        raise ConfigError(
            f"[policy.rules] {effect} must be a list of rules ([[policy.rules.{effect}]] tables)"
        )
    rules = []
    for index, table in enumerate(tables):
        where = f"[[policy.rules.{effect}]] number {index + 1}"
        if not isinstance(table, dict):
            raise ConfigError(f"{where} must be a table of conditions")
        try:
            rule = Rule(**{"name": f"{effect}[{index}]", **table})
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise ConfigError(f"{where}: {problems}") from None
        if not (rule.tool or rule.node or rule.path or rule.host or rule.arguments):
            raise ConfigError(
                f'{where} sets no condition, so it would match everything; use default = "{effect}" instead'
            )
        for name, pattern in rule.arguments.items():
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ConfigError(f"{where}: arguments.{name} is not a regular expression: {exc}") from None
        rules.append(rule)
    return tuple(rules)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)


@hookimpl
def aeon_register_policies(register: Register) -> None:
    register("rules", RulesPolicy)
