"""Helpers for the admin tests: staff clients with CSRF checks on, and rows to look at."""

from __future__ import annotations

import datetime
import html
import re

from django.contrib.auth.models import Permission, User
from django.test import Client
from django.utils import timezone

from django_dbjobs.models import Job, JobStatus


class StaffClient(Client):
    """A logged-in client that enforces CSRF like a browser does; post() sends the token."""

    def __init__(self, user: User):
        super().__init__(enforce_csrf_checks=True)
        self.force_login(user)
        self.user = user

    def token(self) -> str:
        if "csrftoken" not in self.cookies:
            self.get("/admin/")
        return self.cookies["csrftoken"].value

    def post(self, path, data=None, *, csrf: bool = True, **kwargs):
        data = dict(data or {})
        if csrf:
            data["csrfmiddlewaretoken"] = self.token()
        return super().post(path, data, **kwargs)

    def messages(self, response) -> list[str]:
        return [str(message) for message in response.context["messages"]] if response.context else []


def staff(username: str = "ops", *perms: str, superuser: bool = False) -> StaffClient:
    user = User.objects.create_user(username, password="x", is_staff=True, is_superuser=superuser)
    for perm in perms:
        app, codename = perm.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app, codename=codename))
    return StaffClient(User.objects.get(pk=user.pk))


def failed_job(name: str = "tests.jobs.always_fails", queue: str = "default", **fields) -> Job:
    now = timezone.now()
    error = {
        "exception_class_path": "builtins.RuntimeError",
        "traceback": "Traceback (most recent call last):\n  ...\nRuntimeError: boom\n",
        "summary": "RuntimeError: boom",
        "attempt": 3,
        "worker": "host:1:abcd",
        "at": now.isoformat(),
    }
    values = {
        "name": name,
        "queue": queue,
        "status": JobStatus.FAILED,
        "attempts": 3,
        "max_attempts": 3,
        "worker": "host:1:abcd",
        "worker_ids": ["host:1:abcd"] * 3,
        "errors": [error],
        "last_error": error["summary"],
        "started_at": now - datetime.timedelta(seconds=5),
        "last_attempted_at": now - datetime.timedelta(seconds=1),
        "finished_at": now,
        **fields,
    }
    return Job.objects.create(**values)


def schedule_form(**values) -> dict:
    """The schedule add form, filled in for an hourly tests.jobs.scheduled; `values` override fields."""
    return {
        "name": "hourly",
        "job": "tests.jobs.scheduled",
        "cron": "0 * * * *",
        "timezone": "UTC",
        "enabled": "on",
        "args": "[]",
        "kwargs": "{}",
        "queue": "",
        "priority": "",
        "max_attempts": "",
        "missed_runs": "latest",
        "catch_up_window": "600",
        "due_time_argument": "",
        **values,
    }


def action(client: StaffClient, url: str, name: str, jobs: list[Job], **extra):
    data = {"action": name, "_selected_action": [job.pk for job in jobs], "index": 0, **extra}
    return client.post(url, data, follow=True)


def text(response) -> str:
    return re.sub(r"\s+", " ", response.content.decode())


def visible(html_text: str) -> str:
    """What a reader sees of `html_text`: no tags (nor their titles), scripts or styles; spaces collapsed."""
    shown = re.sub(r"<(script|style)\b.*?</\1>", " ", html_text, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", shown)).split())
