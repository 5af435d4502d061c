"""The AeonError hierarchy.

Every failure the spec names has its own class, each with structured fields and a message that says what went
wrong and what to do next. Names follow spec 002; ``MemoryStoreError`` replaces the spec's ``MemoryError`` so the
builtin is never shadowed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aeon_kernel.kinds import label


class AeonError(Exception):
    """Root of every error Aeon raises on purpose. Catch this to catch them all."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description, used in structured results and JSONL logs."""
        return {"type": type(self).__name__, "message": str(self)}


class ConfigError(AeonError):
    """``aeon.toml`` (or the options passed in code) cannot be used as written."""


class UnknownComponentError(ConfigError):
    """A component was selected by a name no loaded plugin registered."""

    def __init__(self, kind: str, name: str, available: dict[str, str]) -> None:
        self.kind, self.name, self.available = kind, name, dict(available)
        listing = ", ".join(f"{n!r} (from {p})" for n, p in sorted(available.items())) or "none"
        super().__init__(
            f"no {label(kind)} named {name!r} is registered. Available: {listing}. "
            f"Install the plugin that provides it, or pick one of these in aeon.toml."
        )


class ComponentBuildError(ConfigError):
    """A component's factory raised, or returned something that is not its kind's contract.

    The original exception, if any, is the ``__cause__``; the message names the component and the plugin, and
    never a secret option's value.
    """

    def __init__(self, kind: str, name: str, provider: str, problem: str) -> None:
        self.kind, self.name, self.provider, self.problem = kind, name, provider, problem
        super().__init__(
            f"the {label(kind)} {name!r} (from {provider}) could not be built: {problem}. "
            f"Check its table in aeon.toml, or fix or block the plugin {provider!r}."
        )

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "kind": self.kind, "name": self.name, "provider": self.provider}


class PluginError(AeonError):
    """A plugin could not be loaded or registered."""


class DuplicateComponentError(PluginError):
    """Two plugins registered the same name for one kind of component (never silently renamed)."""

    def __init__(self, kind: str, name: str, first: str, second: str) -> None:
        self.kind, self.name, self.first, self.second = kind, name, first, second
        super().__init__(
            f"{label(kind)} {name!r} is registered by both {first!r} and {second!r}. "
            f"Block one of them with [plugins] block = [...] in aeon.toml."
        )


class ValidationError(AeonError):
    """Data failed a schema or structural check. ``errors`` holds each problem, exactly as the validator saw it."""

    def __init__(self, message: str, errors: Sequence[str] = ()) -> None:
        self.errors: list[str] = list(errors) or [message]
        super().__init__(message)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "errors": self.errors}


class StateTransitionError(ValidationError):
    """A step status change that spec 001 forbids (backwards, skipping, or out of order, FR-052)."""


class LLMError(AeonError):
    """The model could not produce a response. Raised by adapters; the kernel ends the run per FR-049."""


class LLMTransientError(LLMError):
    """A failure worth retrying (connection, timeout, 429, 5xx). ``retry_after`` is the server's hint in seconds."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        self.retry_after = retry_after
        super().__init__(message)


class ToolError(AeonError):
    """A tool failed while running. Marks the step failed; the run continues (FR-054)."""


class PermissionDeniedError(ToolError):
    """A tool call needs a permission its tool was not granted (``[tools.<name>] grant``). The call never ran."""

    def __init__(self, tool: str, missing: Sequence[str]) -> None:
        self.tool, self.missing = tool, sorted(missing)
        needs = " and ".join(map(repr, self.missing))
        super().__init__(
            f"the call needs {needs}, which {'was' if len(self.missing) == 1 else 'were'} not granted, so it was "
            f"refused; to allow it, add {needs} to grant in [tools.{tool}] of aeon.toml"
        )

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "tool": self.tool, "permissions": self.missing}


class PolicyDeniedError(ToolError):
    """A policy refused a tool call or a stage before it ran (spec 004 §10.5); ``rule`` says which rule."""

    def __init__(self, message: str, *, policy: str, rule: str) -> None:
        self.policy, self.rule = policy, rule
        super().__init__(message)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "policy": self.policy, "rule": self.rule}


class ApprovalRequired(AeonError):
    """A call needs a person's approval that it does not have: the run waits for it (decision 0021), it has not
    failed. ``request`` is what the run records (``aeon_kernel.approvals``)."""

    def __init__(self, request: dict[str, Any]) -> None:
        self.request = request
        super().__init__(request["message"])

    def to_dict(self) -> dict[str, Any]:
        return dict(self.request)


class ToolRegistrationError(ToolError, ValueError):
    """A tool could not be registered: duplicate name or invalid schema."""


class MemoryStoreError(AeonError):
    """A memory backend failed to read, write or search."""


class SupervisorError(AeonError):
    """The supervisor could not repair an output within its attempts (FR-051)."""

    def __init__(self, message: str, attempts: int = 0, last_error: str | None = None) -> None:
        self.attempts, self.last_error = attempts, last_error
        super().__init__(message)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "attempts": self.attempts, "last_error": self.last_error}


class OrchestrationError(AeonError):
    """The orchestrator was used incorrectly (for example ``execute`` while a run is in progress)."""


class DeadlineError(AeonError):
    """Something took longer than its deadline: a tool call (``Tool.timeout``) or a run (``deadline``)."""


class RunStoreError(AeonError):
    """A stored run cannot be used: unknown, finished, corrupt, or held by another live process."""


class RefinementLimitError(AeonError):
    """Spec 003: a plan fragment (or the whole run) used up its refinement attempts (3 per fragment, 10 in all).

    The fragment is marked for manual intervention and the run goes on with the best plan it has.
    """

    def __init__(self, message: str, fragment: str | None = None) -> None:
        self.fragment = fragment
        super().__init__(message)


class NestingDepthError(AeonError):
    """Spec 003: a subplan would nest deeper than the limit (5); the fragment is marked for manual intervention."""

    def __init__(self, message: str, depth: int = 0, max_depth: int = 5) -> None:
        self.depth, self.max_depth = depth, max_depth
        super().__init__(message)
