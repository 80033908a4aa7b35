"""Spans exported to a file, one JSON line each: how a test reads the spans of a run_jobs subprocess.

tests/settings.py sets up an OpenTelemetry SDK provider writing here when
DBJOBS_TEST_TRACE_FILE names the file.
"""

import json
import os
import threading

from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult


class FileExporter(SpanExporter):
    """Append each span, as a dict of what the tests look at, to a file."""

    def __init__(self, path: str):
        self.path = path
        self.lock = threading.Lock()

    def export(self, spans) -> SpanExportResult:
        lines = [json.dumps(described(span)) + "\n" for span in spans]
        with self.lock, open(self.path, "a") as file:
            file.writelines(lines)
        return SpanExportResult.SUCCESS


def described(span) -> dict:
    return {
        "name": span.name,
        "kind": span.kind.name,
        "trace_id": span.context.trace_id,
        "span_id": span.context.span_id,
        "parent_id": span.parent.span_id if span.parent else None,
        "links": [link.context.span_id for link in span.links],
        "attributes": dict(span.attributes),
        "status": span.status.status_code.name,
        "pid": os.getpid(),
    }


def read(path) -> list[dict]:
    with open(path) as file:
        return [json.loads(line) for line in file if line.strip()]


def set_up(path: str) -> None:
    """Make the global provider an SDK one, batching its spans to `path` (flushed at exit)."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider()
    # A long delay: the spans reach the file only when the process flushes them at its end.
    provider.add_span_processor(BatchSpanProcessor(FileExporter(path), schedule_delay_millis=60_000))
    trace.set_tracer_provider(provider)
