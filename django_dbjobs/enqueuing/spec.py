"""JobSpec: what a job is asked to be (queue, priority, when, keys, limits, batch...), one frozen value.

Every way in builds one: enqueue(), prepare(), enqueue_many(), the ``django.tasks``
backend, schedules, batch callbacks and the django-tasks-db import. It is validated once,
against the job's own defaults and the settings, by columns(), and passed whole to the
row builder (api.job_fields()). A new option is a field here, a key of the matching
``...Options`` below, a line in columns(), and the Job column it fills.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from typing import Any, TypedDict

from ..conf import settings
from ..exceptions import UnknownOption
from ..flow import keys
from ..models import Blocked
from ..models.states import rated_queues
from ..registry.registered import RegisteredJob
from . import enqueuer_context, validation


class RowOptions(TypedDict, total=False):
    """The options every way of enqueueing takes: they go into the job's row."""

    queue: str | None
    priority: int | None
    run_at: datetime.datetime | None
    delay: datetime.timedelta | float | None
    max_attempts: int | None
    using: str | None


class PrepareOptions(RowOptions, total=False):
    """prepare()'s options: those of a job's row, and its unique and concurrency keys."""

    unique_key: str | None
    concurrency_key: str | None
    concurrency_limit: int | None


class EnqueueManyOptions(RowOptions, total=False):
    """enqueue_many()'s options: those of a job's row, and its batch and the jobs it waits for."""

    batch: Any
    after: Any
    after_failure: str | None


class EnqueueOptions(PrepareOptions, EnqueueManyOptions, total=False):
    """enqueue()'s (and aenqueue()'s) options: all of them."""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class JobSpec:
    """What a job is asked to be: None means the job's own default, else the setting's.

    Compared field by field as Python compares values (``priority=True`` equals
    ``priority=1``, which validate differently): never key a cache on a JobSpec.
    """

    queue: str | None = None
    priority: int | None = None
    #: When it becomes due: an aware datetime, or `delay` (seconds or timedelta) from now.
    run_at: datetime.datetime | None = None
    delay: datetime.timedelta | float | None = None
    max_attempts: int | None = None
    #: At most one READY or RUNNING job of its name holds this key (docs/enqueueing.rst).
    unique_key: str | None = None
    #: The database alias; None: the router's choice for writing Job.
    using: str | None = None
    #: Over the job's own: at most `concurrency_limit` jobs of the key run at once.
    concurrency_key: str | None = None
    concurrency_limit: int | None = None
    #: A Batch or its id; None: the open ``batch()`` block's, if any.
    batch: Any = None
    #: Jobs (or ids) it waits for; None: the open ``after()`` block's, if any.
    after: Any = None
    #: "cancel" (the default) or "run": what it does when a job it waits for fails.
    after_failure: str | None = None
    #: Not an enqueue() option: whether the enqueuer's context (language, timezone,
    #: DBJOBS_CONTEXT_CAPTURE) goes with it. A schedule's or an import's job has no enqueuer.
    capture_context: bool = True
    #: Not an enqueue() option: the W3C trace context of the span that sends it
    #: (observability/producing.py); None: not traced.
    trace_context: dict[str, Any] | None = None

    @classmethod
    def of(cls, function: str, args: tuple, options: Mapping[str, Any], allowed: frozenset[str]) -> JobSpec:
        """The spec of `function`'s keyword `options`; UnknownOption for one it does not take."""
        if not options:
            return DEFAULT_SPEC
        if not allowed.issuperset(options):
            _refuse_unknown_options(function, args, {k: v for k, v in options.items() if k not in allowed})
        return cls(**options)

    def traced(self, carrier: dict[str, Any] | None) -> JobSpec:
        """This spec with the trace context `carrier` (producing.send()'s); itself for None."""
        return self if carrier is None else dataclasses.replace(self, trace_context=carrier)

    def columns(
        self, registered: RegisteredJob, args: list, kwargs: dict, reject_nul: bool
    ) -> dict[str, Any]:
        """The job's row fields this spec sets, over the job's defaults over the settings; validated.

        `args` and `kwargs` are the job's, validated (a concurrency key is made from them).
        Raises an InvalidJob subclass naming the bad option.
        """
        queue, priority, max_attempts = _defaults(registered, self.queue, self.priority, self.max_attempts)
        fields: dict[str, Any] = {"queue": queue, "priority": priority, "max_attempts": max_attempts}
        if self.unique_key is not None:
            fields["unique_key"] = fields["active_key"] = validation.unique_key(self.unique_key, reject_nul)
        options = registered.options
        key, limit = keys.resolve(
            registered.func,
            options.concurrency_key,
            self.concurrency_key,
            options.concurrency_limit if self.concurrency_limit is None else self.concurrency_limit,
            registered.default_concurrency_limit,
            args,
            kwargs,
        )
        if key is not None:
            # Not claimable until the admission gives it one of its key's slots (flow/admission.py).
            fields.update(concurrency_key=key, concurrency_limit=limit, blocked=Blocked.CONCURRENCY)
        elif queue in rated_queues():  # claimed only within its queue's rate (flow/rates.py)
            fields["blocked"] = Blocked.RATE
        when = validation.run_at(self.run_at, self.delay)
        if when is not None:
            fields["run_at"] = when
        if self.capture_context:
            context = enqueuer_context.capture()
            if context is not None:
                fields["context"] = context
        if self.trace_context is not None:
            fields["trace_context"] = self.trace_context
        return fields


#: The spec of a call without options, made once.
DEFAULT_SPEC = JobSpec()
#: The keyword options each public function takes.
ENQUEUE_OPTIONS = frozenset(EnqueueOptions.__optional_keys__)
PREPARE_OPTIONS = frozenset(PrepareOptions.__optional_keys__)
ENQUEUE_MANY_OPTIONS = frozenset(EnqueueManyOptions.__optional_keys__)


def _defaults(
    registered: RegisteredJob, queue: Any, priority: Any, max_attempts: Any
) -> tuple[str, int, int]:
    """The job's queue, priority and maximum attempts: as given, else the job's own, else the
    settings'; validated (InvalidJob). Kept per combination, types included (True is not 1)."""
    key = (registered, queue, type(queue), priority, type(priority), max_attempts, type(max_attempts))
    try:
        found = _validated_defaults.get(key)
        kept = True
    except TypeError:  # an unhashable value, and so an invalid one: refused below
        found, kept = None, False
    if found is None:
        defaults = registered.options
        found = (
            validation.queue(_first(queue, defaults.queue, settings.DEFAULT_QUEUE)),
            validation.priority(_first(priority, defaults.priority, settings.DEFAULT_PRIORITY)),
            validation.max_attempts(
                _first(max_attempts, defaults.max_attempts, settings.DEFAULT_MAX_ATTEMPTS)
            ),
        )
        if kept:
            if len(_validated_defaults) >= 1024:
                _validated_defaults.clear()
            _validated_defaults[key] = found
    return found


#: _defaults()'s results; read again when the settings change (override_settings).
_validated_defaults: dict[tuple, tuple[str, int, int]] = {}
settings.on_reload(_validated_defaults.clear)


def _first(*values: Any) -> Any:
    return next(v for v in values if v is not None)


def _refuse_unknown_options(function: str, args: tuple, unknown: dict[str, Any]) -> None:
    """Say how to pass a job's keyword arguments when they were given as options."""
    names = ", ".join(sorted(unknown))
    if function == "enqueue_many":  # it takes no kwargs=: its jobs have positional arguments only
        if set(unknown) <= ENQUEUE_OPTIONS:  # options only enqueue() and prepare() take
            raise UnknownOption(
                f"enqueue_many() has no option {names}. For jobs with keyword arguments or this option, "
                "use enqueue(), or prepare() and bulk_enqueue()."
            )
        raise UnknownOption(f"enqueue_many() has no option {names}.")
    given = ", ".join(
        [*(repr(a) for a in args[:3]), f"kwargs={{{', '.join(f'{k!r}: ...' for k in unknown)}}}"]
    )
    raise UnknownOption(
        f"{function}() has no option {names}. The job's own keyword arguments go in kwargs={{...}}: "
        f"{function}(job, {given})."
    )
