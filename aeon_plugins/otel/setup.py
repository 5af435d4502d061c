"""The ``otel`` sink's options, checked, and the OpenTelemetry pieces they build (imported only here and now).

A header value given as a secret (``{ "$env" = ... }`` arrives as a ``SecretStr``) is checked, stripped and
registered with the scrubbers, and goes to the exporter only; no error quotes it.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from pydantic import SecretStr

from aeon_kernel import ConfigError, __version__
from aeon_kernel.kit import clean_secret

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

DEFAULT_ENDPOINT: Final = "http://127.0.0.1:4318/v1/traces"
EXPORTERS: Final = ("otlp", "console", "memory")
INSTALL: Final = "pip install 'aeon-core[otel]'"


def check(**options: Any) -> None:
    """Raise a ConfigError naming the first option that cannot work."""
    for name in ("service_name", "provider_name", "agent_name"):
        value = options[name]
        if name == "provider_name" and value is None:
            continue  # the run's adapter
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"otel sink: {name} must be a non-empty string")
    if not isinstance(options["capture_content"], bool):
        raise ConfigError("otel sink: capture_content must be true or false")
    limit = options["max_content_length"]
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ConfigError("otel sink: max_content_length must be a positive integer")
    timeout = options["timeout"]
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ConfigError("otel sink: timeout must be a positive number of seconds")
    exporter, endpoint = options["exporter"], options["endpoint"]
    if exporter not in EXPORTERS:
        raise ConfigError(f"otel sink: exporter must be one of {list(EXPORTERS)}, got {exporter!r}")
    if exporter == "otlp" and (
        not isinstance(endpoint, str) or not endpoint.startswith(("http://", "https://"))
    ):
        raise ConfigError(f"otel sink: endpoint must be an http(s) URL, got {endpoint!r}")


def headers(given: Mapping[str, str | SecretStr] | None) -> dict[str, str]:
    """The headers to send with each export; a secret one checked, stripped and registered, never quoted."""
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise ConfigError("otel sink: headers must be a table of header names and values")
    sent = {}
    for name, value in given.items():
        if not isinstance(name, str) or not name.strip():
            raise ConfigError("otel sink: header names must be non-empty strings")
        if isinstance(value, SecretStr):
            sent[name] = clean_secret(value.get_secret_value(), f"[telemetry.otel] headers.{name}")
        elif isinstance(value, str):
            sent[name] = value
        else:
            raise ConfigError(f"otel sink: header {name!r} must be a string or a secret reference")
    return sent


def require_sdk() -> None:
    """A ConfigError naming the extra to install when OpenTelemetry's SDK cannot be imported."""
    try:
        importlib.import_module("opentelemetry.trace")
        importlib.import_module("opentelemetry.sdk.trace")
    except ImportError:
        raise ConfigError(f"the otel telemetry sink needs OpenTelemetry's SDK: {INSTALL}") from None


def provider(
    kind: str, endpoint: str, sent: dict[str, str], timeout: float, service_name: str
) -> tuple[TracerProvider, SpanExporter]:
    """A provider of the sink's own (the global one is left alone), with the exporter it sends to."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    exporter = _exporter(kind, endpoint, sent, timeout)
    built = TracerProvider(
        resource=Resource.create({"service.name": service_name, "service.version": __version__})
    )
    # memory: each span is there as soon as it ends, for tests and embedders; the others send in batches
    built.add_span_processor(
        SimpleSpanProcessor(exporter) if kind == "memory" else BatchSpanProcessor(exporter)
    )
    return built, exporter


def _exporter(kind: str, endpoint: str, sent: dict[str, str], timeout: float) -> SpanExporter:
    if kind == "memory":
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        return InMemorySpanExporter()
    if kind == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter(out=sys.stderr)  # stdout is the CLI's (``aeon run --json``)
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        raise ConfigError(
            f"the otel sink's OTLP exporter needs opentelemetry-exporter-otlp-proto-http: {INSTALL}"
        ) from None
    return OTLPSpanExporter(endpoint=endpoint, headers=sent, timeout=timeout)
