"""Whether jobs are traced, and their tracer: OpenTelemetry is used only if the project set it up.

Tracing is on when ``opentelemetry.trace`` has been imported (by the project: nothing here
imports it), a real tracer provider is set (the API's default proxy or a no-op provider
means off) and DBJOBS_TRACING is not False. The check is a dictionary look-up and two
attribute reads (tracer()), made on every enqueue and run, so a provider set late is
still seen.
"""

from __future__ import annotations

import sys
from typing import Any

from ..conf import settings

#: ``messaging.system`` of every span.
SYSTEM = "django_dbjobs"
#: A key of ``Job.trace_context`` beside the W3C fields: its run links to the enqueuer's
#: span instead of continuing its trace (a batch callback: it runs for the whole batch).
LINK = "dbjobs_link"
#: Longest tracestate stored: what the W3C spec asks propagators to keep at least (in
#: practice a few dozen characters). A longer one is left out whole, the traceparent kept.
MAX_TRACESTATE = 512

# The provider seen last and its tracer (None: off). A provider, once set, stays for the
# life of the process; comparing it is cheaper than asking the API which kind it is.
_seen: Any = None
_tracer: Any = None
# Whether the API was asked once: then an unset global means no provider (see tracer()).
_asked = False
_UNKNOWN = object()


def tracer() -> Any:
    """The tracer of jobs' spans, or None when tracing is off."""
    global _seen, _tracer, _asked
    api = sys.modules.get("opentelemetry.trace")
    if api is None or not settings.TRACING:
        return None
    # The API's global, read: get_tracer_provider() looks in os.environ on every call while
    # no provider is set (a microsecond or two). It is asked once, for the provider the
    # environment may name (OTEL_PYTHON_TRACER_PROVIDER), which it then sets as the global.
    provider = getattr(api, "_TRACER_PROVIDER", _UNKNOWN)
    if provider is None and _asked:
        return None
    if provider is None or provider is _UNKNOWN:
        provider = api.get_tracer_provider()
        _asked = True
    if provider is not _seen:
        _tracer = _tracer_of(api, provider)
        _seen = provider
    return _tracer


def _tracer_of(api: Any, provider: Any) -> Any:
    if isinstance(provider, api.ProxyTracerProvider | api.NoOpTracerProvider):
        return None
    return provider.get_tracer("django_dbjobs")


def W3C() -> Any:
    """The W3C Trace Context propagator: what a job's ``trace_context`` is written and read with."""
    global _w3c
    if _w3c is None:
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        _w3c = TraceContextTextMapPropagator()
    return _w3c


_w3c: Any = None


def flush(timeout: float = 2.0) -> None:
    """Export the spans the provider still holds, for a process about to end without atexit."""
    if tracer() is not None:
        force_flush = getattr(_seen, "force_flush", None)
        if force_flush is not None:
            force_flush(int(timeout * 1000))
