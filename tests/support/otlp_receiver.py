"""A loopback OTLP/HTTP trace receiver for tests: what a collector at ``/v1/traces`` would get, kept as sent.

Each POST is answered ``200`` with an empty ``ExportTraceServiceResponse`` and kept: its headers, its raw body
and the decoded ``ExportTraceServiceRequest`` (``opentelemetry-proto``, which the OTLP exporter depends on).
"""

from __future__ import annotations

import gzip
import threading
import zlib
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

PATH = "/v1/traces"


@dataclass(frozen=True)
class Export:
    headers: dict[str, str]
    body: bytes
    request: ExportTraceServiceRequest


class OtlpReceiver:
    """``with OtlpReceiver() as receiver:`` listens on 127.0.0.1 (a free port) until the block ends."""

    def __init__(self) -> None:
        self.exports: list[Export] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path != PATH:
                    self.send_error(404)
                    return
                encoding = (self.headers.get("Content-Encoding") or "").lower()
                raw = gzip.decompress(body) if encoding == "gzip" else body
                raw = zlib.decompress(raw) if encoding == "deflate" else raw
                request = ExportTraceServiceRequest()
                request.ParseFromString(raw)
                with receiver._lock:
                    receiver.exports.append(
                        Export({k.lower(): v for k, v in self.headers.items()}, raw, request)
                    )
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="otlp-receiver", daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}{PATH}"

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def spans(self) -> list[dict[str, Any]]:
        """Every span received, flattened: name, ids (hex), kind, times, attributes, status, events, links."""
        found = []
        for export in self.exports:
            for resource_spans in export.request.resource_spans:
                resource = attributes(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        found.append(
                            {
                                "name": span.name,
                                "trace_id": span.trace_id.hex(),
                                "span_id": span.span_id.hex(),
                                "parent_span_id": span.parent_span_id.hex() or None,
                                "kind": span.kind,
                                "start": span.start_time_unix_nano,
                                "end": span.end_time_unix_nano,
                                "attributes": attributes(span.attributes),
                                "status": {"code": span.status.code, "message": span.status.message},
                                "events": [(e.name, attributes(e.attributes)) for e in span.events],
                                "links": [link.span_id.hex() for link in span.links],
                                "resource": resource,
                                "scope": scope_spans.scope.name,
                            }
                        )
        return found


def attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: value(pair.value) for pair in pairs}


def value(any_value: AnyValue) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [value(item) for item in any_value.array_value.values]
    if kind == "kvlist_value":
        return attributes(any_value.kvlist_value.values)
    return getattr(any_value, kind) if kind else None
