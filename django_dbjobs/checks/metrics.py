"""Checks of the metrics settings: DBJOBS_METRICS_TOKEN."""

from django.core import checks

from ..conf import settings


def metrics_token_errors() -> list[checks.Error]:
    """DBJOBS_METRICS_TOKEN must be None or a string (empty: token auth off)."""
    token = settings.METRICS_TOKEN
    if token is None or isinstance(token, str):
        return []
    return [
        checks.Error(
            f"DBJOBS_METRICS_TOKEN must be None or a string, not a {type(token).__name__}.",
            hint="For example: DBJOBS_METRICS_TOKEN = os.environ.get('DBJOBS_METRICS_TOKEN'); "
            "None or '' lets only staff users read the gauges.",
            id="dbjobs.E033",
        )
    ]
