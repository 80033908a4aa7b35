"""Views the tests request through Django's test client."""

from django.http import JsonResponse

from django_dbjobs import enqueue
from tests.jobs import opens_a_span


def enqueue_a_job(request):
    """Enqueue opens_a_span, as a checkout view enqueues its email, and return the job's id."""
    return JsonResponse({"id": enqueue(opens_a_span, "inside").pk})
