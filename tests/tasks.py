"""Django Tasks framework tasks used by the tests (the `tasks` module of the tests app).

Bound to TASKS["default"], our DatabaseBackend. Defines nothing when neither
django.tasks (Django 6) nor the django-tasks backport is installed.
"""

import asyncio
import os

from asgiref.sync import sync_to_async
from django.utils import timezone, translation

from django_dbjobs import current_job
from tests import context_hooks

try:
    from django.tasks import TaskContext, task
except ImportError:
    try:
        from django_tasks import TaskContext, task
    except ImportError:
        task = None

if task is not None:

    @task
    def add(a, b):
        return a + b

    @task(priority=10, queue_name="emails")
    def send_welcome(user_id):
        return {"sent_to": user_id}

    @task
    def batch_total(batch):
        """A batch's callback: its description and how many jobs it had."""
        return f"{batch['description']}:{batch['total']}"

    @task
    def always_fails(message="boom"):
        raise ValueError(message)

    @task
    def fails_until_attempt(n):
        attempt = current_job().attempts
        if attempt < n:
            raise ConnectionError(f"attempt {attempt} failed")
        return attempt

    @task(takes_context=True)
    def with_context(context, value):
        return {"attempt": context.attempt, "id": context.task_result.id, "value": value}

    @task(takes_context=True)
    def context_fails_once(context):
        if context.attempt < 2:
            raise RuntimeError("first attempt fails")
        return context.attempt

    @task
    def record(value):
        """Append `value` to the file named by DBJOBS_TEST_RECORD."""
        with open(os.environ["DBJOBS_TEST_RECORD"], "a") as file:
            file.write(f"{value}\n")

    @task
    async def async_sleep(seconds, value):
        await asyncio.sleep(seconds)
        return value

    @task
    async def async_counts_jobs():
        from django_dbjobs.models import Job

        return await sync_to_async(Job.objects.count)()

    @task
    async def async_uses_orm_directly():
        from django_dbjobs.models import Job

        return Job.objects.count()  # SynchronousOnlyOperation: Django's async-safety rule

    @task
    def environment():
        """The language, timezone and captured data the task runs with."""
        job = current_job()
        return {
            "language": translation.get_language(),
            "timezone": timezone.get_current_timezone_name(),
            "data": (job.context or {}).get("data"),
            "request_id": context_hooks.request_id.get(),
        }

    @task(backend="immediate")
    def foreign(value):
        return value

    try:  # Django 6.1+ and the backport pass @task's extra arguments to the task_class

        @task(max_attempts=2, backoff=0)
        def fails_twice_then_gives_up():
            raise ValueError("always")

        @task(timeout=0.3, max_attempts=1)
        def spins_past_its_timeout():
            import time

            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                pass

        @task(unique_key=lambda account_id: f"account-{account_id}")
        def sync_account(account_id):
            return account_id

        @task(unique_key="the-one-report")
        def nightly_report():
            return "done"

        @task(concurrency_key="mailbox:{mailbox_id}", concurrency_limit=2)
        def fetch_mail(mailbox_id, n=0):
            return n

        @task(concurrency_key="inbox:{n}")
        def check_inbox(n):
            return n

        @task(max_attempts=3)
        def runs_until_cancelled(path):
            """Touch `path`, then run Python code for up to 60 s."""
            import time

            open(path, "w").close()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                time.sleep(0.01)

        EXTRA_ARGUMENTS = True
    except TypeError:
        EXTRA_ARGUMENTS = False

    # What Django's own tests/tasks run against a backend (test_django_tasks_contract.py).

    @task
    def takes_anything(*args, **kwargs):
        return None

    @task
    async def takes_anything_async(*args, **kwargs):
        return None

    @task
    def answer():
        return 42

    @task
    def raises_value_error():
        raise ValueError("the task raised ValueError")

    @task
    def raises_system_exit():
        raise SystemExit("the task raised SystemExit")

    @task
    def raises_keyboard_interrupt():
        raise KeyboardInterrupt("the task raised KeyboardInterrupt")

    @task
    def raises_an_exception_holding_one():
        raise ValueError(ValueError("the inner error"))

    @task
    def returns_a_function():
        return lambda: None  # neither JSON data nor picklable

    @task(takes_context=True)
    def returns_its_id(context):
        return context.task_result.id

    @task(takes_context=True)
    def checks_its_context(context, attempt):
        assert isinstance(context, TaskContext) and context.attempt == attempt

    @task(takes_context=True)
    def reports_progress(context, count):
        """The context's long-work extras (backend/task_context.py), from a task."""
        for done in range(1, count + 1):
            context.progress(done, total=count, note="task")
        stored = context.checkpoint({"done": count})
        return {
            "job": context.job.pk,
            "stored": stored,
            "resume": context.resume,
            "stopping": context.stopping,
            "done": context.progress.done,
            "is_context": isinstance(context, TaskContext),
        }

    @task(takes_context=True)
    async def async_reports_progress(context, count):
        for done in range(1, count + 1):
            context.progress(done, total=count, note="async task")
            await asyncio.sleep(0)
        stored = await context.acheckpoint({"done": count})
        return {
            "job": context.job.pk,
            "stored": stored,
            "resume": context.resume,
            "done": context.progress.done,
        }

    @task(takes_context=True)
    def keeps_its_context(context):
        """Return nothing: the test calls the context kept after the task ended."""
        kept_contexts.append(context)

    kept_contexts: list = []
