"""The view that serves the database gauges to Prometheus: ``path("dbjobs/metrics", metrics_view)``.

Only a logged-in active staff user, or a request carrying ``Authorization: Bearer
<DBJOBS_METRICS_TOKEN>``, gets the gauges; anyone else gets 401 or 403 and no data.
prometheus_client (the ``django-dbjobs[prometheus]`` extra) is imported on the first
request, never before.
"""

from __future__ import annotations

import hmac
import logging

from django.core.exceptions import ImproperlyConfigured
from django.db import router
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from ..conf import settings
from ..models import Job
from .gauges import read_gauges

logger = logging.getLogger("django_dbjobs.metrics")


@never_cache
@require_safe
def metrics_view(request: HttpRequest, using: str | None = None) -> HttpResponse:
    """The gauges in Prometheus's text format, read from the job table's database (or `using`)."""
    refused = refusal(request)
    if refused is not None:
        return refused
    try:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
        from prometheus_client.core import CollectorRegistry, GaugeMetricFamily
    except ImportError as exc:
        raise ImproperlyConfigured(
            "The database gauges need prometheus_client: pip install 'django-dbjobs[prometheus]'."
        ) from exc
    gauges = read_gauges(using or router.db_for_write(Job))

    class Collector:
        def collect(self):
            for gauge in gauges:
                family = GaugeMetricFamily(gauge.name, gauge.documentation, labels=gauge.labels)
                for labels, value in gauge.samples:
                    family.add_metric(labels, value)
                yield family

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)


def refusal(request: HttpRequest) -> HttpResponse | None:
    """None if `request` may read the gauges; otherwise the 401 or 403 response to send."""
    scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
    # Only a Bearer header is a scraper's: a proxy's Basic credentials leave the staff session in charge.
    if scheme.lower() == "bearer":
        if token_matches(scheme, credentials.strip()):
            return None
        logger.warning(
            "Metrics request refused: wrong or unexpected token path=%s remote=%s",
            request.path,
            request.META.get("REMOTE_ADDR", ""),
        )
        return _unauthorized()
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return _unauthorized()
    if not (user.is_active and user.is_staff):
        return HttpResponse("Staff only.\n", status=403, content_type="text/plain; charset=utf-8")
    return None


def token_matches(scheme: str, credentials: str) -> bool:
    """Whether the credentials are the DBJOBS_METRICS_TOKEN (never, when it is empty or None)."""
    token = settings.METRICS_TOKEN
    if not token or not isinstance(token, str) or scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(credentials.encode(), token.encode())


def _unauthorized() -> HttpResponse:
    response = HttpResponse(
        "Log in as staff, or send Authorization: Bearer <DBJOBS_METRICS_TOKEN>.\n",
        status=401,
        content_type="text/plain; charset=utf-8",
    )
    response["WWW-Authenticate"] = 'Bearer realm="dbjobs metrics"'
    return response
