"""The browser test's example project: its database and data, its server, and reading its pages.

The admin runs in the example project (runserver, its settings), on a SQLite file of its own
or, in the PostgreSQL and MariaDB sessions, on a database of its own on that server.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "example_project"
PASSWORD = "browser-test-password"
#: Printed in front of the JSON a `manage.py shell -c` script prints, to find it in the output.
MARK = "DBJOBS-JSON:"

# Run by `manage.py shell -c` in the example project: a superuser, dead letters with their
# error history, READY jobs in three queues, an hour of finished jobs for the chart,
# schedules, workers, a running job and one waiting for its retry.
SEED = r"""
import datetime, json, math, random
from django.contrib.auth.models import User
from django.utils import timezone
from django_dbjobs.models import Job, Schedule, WorkerProcess
from django_dbjobs.observability.fingerprints import fingerprint
from django_dbjobs.schedules.definitions import sync_settings

User.objects.create_superuser("admin", "admin@example.com", PASSWORD)
rng = random.Random(20240611)
now = timezone.now()
workers = ["web-1:4127:8f3a91c2", "web-2:3310:1be07d54", "batch-1:902:c44a0e1f"]
FAILURES = {
    "demo.jobs.build_broken_report": ("reports", 3, "ValueError", "report {n} has no data source",
        '  File "demo/jobs.py", line 22, in build_broken_report\n'
        '    raise ValueError(f"report {{report_id}} has no data source")'),
    "demo.jobs.send_welcome_email": ("emails", 5, "ConnectionError", "SMTP server busy (attempt {a})",
        '  File "demo/jobs.py", line 15, in send_welcome_email\n'
        '    raise ConnectionError(f"SMTP server busy (attempt {{attempt}})")'),
    "demo.jobs.resize_image": ("default", 3, "OSError", "cannot identify image file 'uploads/{n}.heic'",
        '  File "PIL/Image.py", line 3498, in open\n'
        '    raise UnidentifiedImageError(msg)'),
}

def failed(name, minutes_ago, n, args):
    queue, attempts, kind, message, frame = FAILURES[name]
    finished = now - datetime.timedelta(minutes=minutes_ago, seconds=rng.randint(0, 50))
    errors = []
    for attempt in range(1, attempts + 1):
        summary = f"{kind}: " + message.format(n=n, a=attempt)
        errors.append({
            "attempt": attempt,
            "at": (finished - datetime.timedelta(seconds=30 * (attempts - attempt))).isoformat(),
            "worker": workers[attempt % len(workers)],
            "summary": summary,
            "traceback": 'Traceback (most recent call last):\n  File "django_dbjobs/execution.py", '
            f"line 61, in run\n    result = function(*job.args, **job.kwargs)\n{frame}\n{summary}\n",
        })
    return Job.objects.create(
        name=name, queue=queue, args=args, status="FAILED", attempts=attempts, max_attempts=attempts,
        errors=errors, last_error=errors[-1]["summary"], error_fingerprint=fingerprint(errors[-1]),
        finished_at=finished,
        started_at=finished - datetime.timedelta(seconds=30 * attempts),
        last_attempted_at=finished - datetime.timedelta(seconds=1),
        enqueued_at=finished - datetime.timedelta(seconds=30 * attempts + 5),
        run_at=finished - datetime.timedelta(seconds=30 * attempts),
        worker=workers[attempts % len(workers)],
    )

dead = []
for n, minutes_ago in [(4711, 52), (4712, 37), (4719, 9)]:
    dead.append(failed("demo.jobs.resize_image", minutes_ago, n, [n]))
for n, minutes_ago in [(17, 44), (18, 31), (23, 14), (24, 3)]:
    dead.append(failed("demo.jobs.build_broken_report", minutes_ago, n, [n]))
# The SMTP server was down for a few minutes: a burst of failures.
for n, user in enumerate(["ana", "bo", "chen", "dee", "eli", "fay", "gus", "hana"]):
    dead.append(failed("demo.jobs.send_welcome_email", 20 + n // 2, n, [f"{user}@example.com"]))

ready = []
for queue, name, due, later in [
    ("default", "demo.jobs.resize_image", 6, 0),
    ("emails", "demo.jobs.send_welcome_email", 3, 2),
    ("reports", "demo.jobs.nightly_summary", 2, 1),
]:
    for i in range(due + later):
        minutes = -rng.randint(1, 6) if i < due else rng.randint(10, 90)
        ready.append(Job.objects.create(
            name=name, queue=queue, args=[100 + i] if "resize" in name else [],
            run_at=now + datetime.timedelta(minutes=minutes, seconds=rng.randint(0, 59)),
        ))

successes = []
for minute in range(60):
    # A busy hour: a wave of traffic, a quiet spell while SMTP was down, a batch run.
    count = 6 + round(5 * (1 + math.sin(minute / 7))) + rng.randint(0, 3)
    if 20 <= minute <= 23:
        count //= 3
    if 40 <= minute <= 42:
        count += 12
    for _ in range(count):
        name, queue = rng.choice([("demo.jobs.resize_image", "default")] * 3 + [
            ("demo.jobs.send_welcome_email", "emails"), ("demo.jobs.nightly_summary", "reports")])
        finished = now - datetime.timedelta(minutes=minute, seconds=rng.randint(0, 59))
        started, enqueued = finished - datetime.timedelta(seconds=1), finished - datetime.timedelta(seconds=3)
        successes.append(Job(
            name=name, queue=queue, status="SUCCESSFUL", attempts=1, return_value=None,
            enqueued_at=enqueued, run_at=enqueued, started_at=started, last_attempted_at=started,
            finished_at=finished, worker=rng.choice(workers),
        ))
Job.objects.bulk_create(successes, batch_size=500)

# The settings' schedules, one with a last run; the workers, one running a job; a job that
# failed once and waits for its retry: due again after it first started (its timeline's order).
sync_settings()
Schedule.objects.filter(name="nightly-summary").update(
    last_job_id=successes[-1].pk, last_due_at=now - datetime.timedelta(hours=5),
    last_fired_at=now - datetime.timedelta(hours=5),
)
for worker, queues in zip(workers, [["default", "emails"], ["default", "emails"], ["reports"]]):
    host, pid, _ = worker.split(":")
    WorkerProcess.objects.create(id=worker, hostname=host, pid=int(pid), concurrency=4, queues=queues)
Job.objects.filter(pk=ready[0].pk).update(
    status="RUNNING", worker=workers[0], attempts=1, started_at=now, last_attempted_at=now)
started = now - datetime.timedelta(seconds=40)
waiting = Job.objects.create(
    name="demo.jobs.send_welcome_email", queue="emails", args=["ivy@example.com"], attempts=1,
    max_attempts=5, enqueued_at=started - datetime.timedelta(seconds=3), started_at=started,
    last_attempted_at=started, run_at=now + datetime.timedelta(minutes=2),
    last_error="ConnectionError: SMTP server busy (attempt 1)",
    errors=[{"attempt": 1, "at": (started + datetime.timedelta(seconds=2)).isoformat(), "worker": workers[1],
             "summary": "ConnectionError: SMTP server busy (attempt 1)", "traceback": "Traceback ..."}],
)
print(MARK + json.dumps({
    "dead": [job.pk for job in dead], "ready": len(ready), "succeeded": len(successes),
    "running": ready[0].pk, "waiting": waiting.pk,
    "schedule": Schedule.objects.get(name="nightly-summary").pk,
}))
"""

# Run after the browser is done: what the database holds now.
CHECK = r"""
import json
from django_dbjobs.models import Job, Queue
jobs = {
    job.pk: {"status": job.status, "attempts": job.attempts, "errors": len(job.errors),
             "finished": job.finished_at is not None}
    for job in Job.objects.filter(pk__in=IDS)
}
queues = {
    queue.name: {"paused_at": queue.paused_at and queue.paused_at.isoformat(), "paused_by": queue.paused_by}
    for queue in Queue.objects.all()
}
print(MARK + json.dumps({"jobs": jobs, "queues": queues}))
"""


def chromium_or_skip() -> str:
    """Chromium's path; skip (fail with DBJOBS_REQUIRE_BROWSER=1) when it or playwright is missing."""
    missing = []
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("the playwright package (pip install -e '.[test]')")
    chromium = shutil.which("chromium")
    if not chromium:
        missing.append("chromium (apt-get install chromium)")
    if missing:
        reason = "the admin browser test needs " + " and ".join(missing)
        if os.environ.get("DBJOBS_REQUIRE_BROWSER", "") not in ("", "0"):
            pytest.fail(f"{reason}; DBJOBS_REQUIRE_BROWSER is set")
        pytest.skip(reason)
    return chromium


def example_env(database_url: str) -> dict:
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "DBJOBS_TEST_")) and key != "PYTHONPATH"
    }
    return {
        **environment,
        "DJANGO_SETTINGS_MODULE": "example_project.settings",  # pytest-django set tests.settings
        "DATABASE_URL": database_url,
        "DEBUG": "true",  # runserver serves the admin's CSS and JavaScript
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "PYTHONUNBUFFERED": "1",
    }


def manage(env: dict, *args: str, timeout: float = 60) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=EXAMPLE,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, f"manage.py {args[0]} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def shell_json(env: dict, script: str, **names) -> dict:
    """Run `script` in `manage.py shell` with `names` bound; return the JSON it printed."""
    prelude = "".join(f"{name} = {json.dumps(value)}\n" for name, value in {"MARK": MARK, **names}.items())
    output = manage(env, "shell", "-c", prelude + script)
    lines = [line for line in output.splitlines() if line.startswith(MARK)]
    assert lines, f"the script printed no result:\n{output}"
    return json.loads(lines[-1][len(MARK) :])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_served(url: str, server: subprocess.Popen, log: Path, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert server.poll() is None, f"runserver exited ({server.returncode}):\n{log.read_text()}"
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.1)
    raise AssertionError(f"runserver did not answer {url} within {timeout}s:\n{log.read_text()}")


def messages(page) -> list[str]:
    return [text.strip() for text in page.locator("ul.messagelist li").all_inner_texts()]


def submit(page, selector: str) -> None:
    """Click a submit button and wait for the page the POST leads to (often the same URL)."""
    with page.expect_navigation():
        page.click(selector)


def screenshot(page, path: Path) -> None:
    page.screenshot(path=str(path), full_page=True)
    assert path.is_file() and path.stat().st_size > 10_000, f"{path} is missing or nearly empty"


@contextlib.contextmanager
def example_database(tmp_path: Path, django_db_blocker):
    """The example project's DATABASE_URL: a new SQLite file, or a new database on the session's server.

    The server's database is named after the session's (``test_<name>_browser``), made
    empty first and dropped after, so two developers' sessions never share one.
    """
    url = os.environ.get("DBJOBS_TEST_DATABASE_URL", "")
    if not url or url.startswith("sqlite"):
        yield f"sqlite:///{tmp_path / 'browser.sqlite3'}"
        return
    from django.db import connection

    parts = urlsplit(url)
    name = f"test_{parts.path.lstrip('/')}_browser"
    quoted = connection.ops.quote_name(name)
    charset = " CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci" if connection.vendor == "mysql" else ""

    def run(*statements: str) -> None:
        with django_db_blocker.unblock(), connection._nodb_cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)

    run(f"DROP DATABASE IF EXISTS {quoted}", f"CREATE DATABASE {quoted}{charset}")
    try:
        yield parts._replace(path=f"/{name}").geturl()
    finally:
        run(f"DROP DATABASE IF EXISTS {quoted}")


@contextlib.contextmanager
def served(env: dict, log: Path):
    """The example project under runserver on a free port; yields its base URL."""
    port = free_port()
    with log.open("w") as log_file:
        server = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload", "--skip-checks"],
            cwd=EXAMPLE,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_served(f"{base}/admin/login/", server, log)
        yield base
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        print(log.read_text())  # shown when the test fails


def horizontal_overflow(page) -> dict[str, int]:
    """How many pixels the page, and a list's table, are wider than the window shows: {} if none."""
    widths = page.evaluate(
        """() => {
            const over = (element) => element ? element.scrollWidth - element.clientWidth : 0;
            return {page: over(document.documentElement), list: over(document.querySelector(".results"))};
        }"""
    )
    return {where: pixels for where, pixels in widths.items() if pixels > 0}


#: The tops of the lines each text node of an element shows, for the two helpers below.
_TEXT_LINES = """
const textLines = (element) => {
    const tops = [];
    const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        const range = document.createRange();
        range.selectNodeContents(node);
        for (const rect of range.getClientRects()) if (rect.width > 0) tops.push(rect.top);
    }
    tops.sort((a, b) => a - b);
    return tops.filter((top, index) => index === 0 || top - tops[index - 1] > 6).length;
};
"""


def broken_words(page, selector: str) -> list[str]:
    """The words (letters, digits) `selector`'s elements split over two lines ("defaul t"): [] if none.

    A job's error (stored text, .dbjobs-error) may wrap anywhere, and is left out.
    """
    return page.evaluate(
        """(selector) => {
            const broken = [];
            for (const element of document.querySelectorAll(selector)) {
                const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
                for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                    if (node.parentElement.closest(".dbjobs-error")) continue;
                    for (const word of node.data.matchAll(/[\\p{L}\\p{N}]+/gu)) {
                        const range = document.createRange();
                        range.setStart(node, word.index);
                        range.setEnd(node, word.index + word[0].length);
                        const tops = new Set([...range.getClientRects()].map((rect) => Math.round(rect.top)));
                        if (tops.size > 1) broken.push(word[0]);
                    }
                }
            }
            return broken;
        }""",
        selector,
    )


def most_lines(page, selector: str) -> int:
    """The most lines of text any of `selector`'s elements takes (0 if none matches)."""
    return page.evaluate(
        f"(selector) => {{ {_TEXT_LINES} "
        "return Math.max(0, ...[...document.querySelectorAll(selector)].map(textLines)); }",
        selector,
    )
