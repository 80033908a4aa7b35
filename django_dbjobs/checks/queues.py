"""Checks of the queue settings: queue names, and DBJOBS_QUEUE_LIMITS with the queues it limits."""

import difflib

from django.core import checks

from ..conf import settings
from ..enqueuing import validation
from ..flow import rates


def queue_name_errors() -> list[checks.Error]:
    """DBJOBS_QUEUES and DBJOBS_DEFAULT_QUEUE must hold queue names (the default among the queues)."""
    errors = []
    queues = settings.QUEUES
    if queues is not None and (
        not isinstance(queues, list | tuple)
        or not all(isinstance(q, str) and validation.QUEUE_NAME.match(q) for q in queues)
    ):
        errors.append(
            checks.Error(
                "DBJOBS_QUEUES must be None or a list of queue names.",
                hint="For example: DBJOBS_QUEUES = ['default', 'emails'].",
                id="dbjobs.E001",
            )
        )
    default_queue = settings.DEFAULT_QUEUE
    if (
        not isinstance(default_queue, str)
        or not validation.QUEUE_NAME.match(default_queue)
        or (isinstance(queues, list | tuple) and default_queue not in queues)
    ):
        errors.append(
            checks.Error(
                "DBJOBS_DEFAULT_QUEUE must be a queue name (and in DBJOBS_QUEUES when that is set).",
                hint="Queue names use letters, digits, '_', '.', ':' and '-'; the default is 'default'.",
                id="dbjobs.E002",
            )
        )
    return errors


def limit_errors() -> list[checks.Error]:
    """One error per problem of DBJOBS_QUEUE_LIMITS."""
    return [
        checks.Error(problem, hint="For example: {'emails': {'rate': '100/m'}}.", id="dbjobs.E031")
        for problem in rates.setting_problems(settings.QUEUE_LIMITS)
    ]


def unused_limit_warnings() -> list[checks.Warning]:
    """A DBJOBS_QUEUE_LIMITS queue that no job, schedule or setting names: a typo limits nothing."""
    from .. import registry
    from ..operations import known_queues

    limits = settings.QUEUE_LIMITS
    if not isinstance(limits, dict) or rates.setting_problems(limits):
        return []  # dbjobs.E031 says what is wrong
    if not set(limits) <= known_queues.declared():
        registry.discovered_with_errors()  # the job modules' @job(queue=...) count too
    declared = sorted(known_queues.declared())
    warnings = []
    for queue in sorted(set(limits) - set(declared)):
        close = difflib.get_close_matches(queue, declared, n=1, cutoff=0.6)
        warnings.append(
            checks.Warning(
                f"DBJOBS_QUEUE_LIMITS limits queue {queue!r}, which no registered job, schedule or "
                "setting names (nor DBJOBS_QUEUES): the limit may apply to nothing.",
                hint=(f"Did you mean {close[0]!r}? " if close else "")
                + "A queue named only in enqueue(queue=...) is not seen here: list it in DBJOBS_QUEUES "
                "or silence dbjobs.W005.",
                obj=queue,
                id="dbjobs.W005",
            )
        )
    return warnings
