"""The admin in a real browser: the example project served by runserver, driven by headless Chromium.

Logs in, retries and deletes dead letters through the pages (actions, confirmation pages and
the buttons of the detail page), pauses a queue, checks what the database holds afterwards, and
takes the screenshots of the docs (``make screenshots`` writes them to docs/_static).

Needs Debian's chromium (``apt-get install chromium``) and the playwright package (the ``test``
extra); it is skipped without them unless DBJOBS_REQUIRE_BROWSER=1 (CI), which makes it fail.
"""

from __future__ import annotations

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

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "example_project"
PASSWORD = "browser-test-password"
DEAD_LETTERS = "/admin/django_dbjobs/failedjob/"
QUEUES = "/admin/django_dbjobs/queue/"
OVERVIEW = "/admin/django_dbjobs/overview/"
#: Printed in front of the JSON a `manage.py shell -c` script prints, to find it in the output.
MARK = "DBJOBS-JSON:"

_database_url = os.environ.get("DBJOBS_TEST_DATABASE_URL", "")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        bool(_database_url) and not _database_url.startswith("sqlite"),
        reason="the browser test drives the example project on its own SQLite file; "
        "it runs in the SQLite session",
    ),
]

# Run by `manage.py shell -c` in the example project: a superuser, dead letters with their
# error history, READY jobs in three queues, and an hour of finished jobs for the chart.
SEED = r"""
import datetime, json, math, random
from django.contrib.auth.models import User
from django.utils import timezone
from django_dbjobs.models import Job

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
        errors=errors, last_error=errors[-1]["summary"], finished_at=finished,
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
print(MARK + json.dumps({"dead": [job.pk for job in dead], "ready": len(ready), "succeeded": len(successes)}))
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


def example_env(database: Path) -> dict:
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "DBJOBS_TEST_")) and key != "PYTHONPATH"
    }
    return {
        **environment,
        "DJANGO_SETTINGS_MODULE": "example_project.settings",  # pytest-django set tests.settings
        "DATABASE_URL": f"sqlite:///{database}",
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


def test_admin_in_a_browser(tmp_path):
    chromium = chromium_or_skip()
    from playwright.sync_api import expect, sync_playwright

    shots = Path(os.environ.get("DBJOBS_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    env = example_env(tmp_path / "browser.sqlite3")
    manage(env, "migrate", "--noinput", "-v", "0")
    seeded = shell_json(env, SEED, PASSWORD=PASSWORD)
    dead = seeded["dead"]
    # One dead letter per way of retrying and deleting; every kind of job keeps some for the screenshot.
    retried, detail_retried, detail_deleted, action_deleted = dead[0], dead[3], dead[7], dead[4]
    kept = [pk for pk in dead if pk not in (retried, detail_retried, detail_deleted, action_deleted)]

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "runserver.log"
    with log.open("w") as log_file:
        server = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload", "--skip-checks"],
            cwd=EXAMPLE,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until_served(f"{base}/admin/login/", server, log)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, headless=True)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                page.set_default_timeout(10_000)
                expect.set_options(timeout=10_000)
                errors = []
                page.on("pageerror", lambda error: errors.append(str(error)))

                # Log in.
                page.goto(f"{base}/admin/login/?next={DEAD_LETTERS}")
                page.fill("input[name=username]", "admin")
                page.fill("input[name=password]", PASSWORD)
                submit(page, "input[type=submit]")
                assert page.url == f"{base}{DEAD_LETTERS}", "the login did not succeed"

                # The dead letters: all of them, newest first, with their last error.
                rows = page.locator("#result_list tbody tr")
                expect(rows).to_have_count(len(seeded["dead"]))
                expect(rows.first).to_contain_text("ValueError: report 24 has no data source")
                expect(page.locator("#result_list")).to_contain_text("ConnectionError: SMTP server busy")

                # Retry one with the action: tick its row, pick the action, Go.
                page.check(f"input.action-select[value='{retried}']")
                expect(page.locator(".action-counter")).to_contain_text("1 of")
                page.select_option("select[name=action]", "retry")
                submit(page, "button[name=index]")
                assert messages(page) == ["1 job queued again."]
                expect(rows).to_have_count(len(seeded["dead"]) - 1)
                expect(page.locator(f"input.action-select[value='{retried}']")).to_have_count(0)

                # Retry another with the Retry button of its detail page.
                page.goto(f"{base}{DEAD_LETTERS}{detail_retried}/change/")
                expect(page.locator(".field-attempts_table")).to_contain_text("Traceback")
                submit(page, ".object-tools button[name=retry]")
                assert page.url == f"{base}{DEAD_LETTERS}"
                assert messages(page) == ["1 job queued again."]

                # Delete one from its detail page: Delete, then confirm.
                page.goto(f"{base}{DEAD_LETTERS}{detail_deleted}/change/")
                submit(page, ".object-tools a.deletelink")
                assert page.url == f"{base}{DEAD_LETTERS}{detail_deleted}/delete/"
                expect(page.locator("#content")).to_contain_text(detail_deleted)
                submit(page, "input[type=submit][value='Yes, delete it']")
                assert page.url == f"{base}{DEAD_LETTERS}"
                assert messages(page) == ["The job was deleted."]

                # Delete another with the action: a confirmation page first, nothing deleted yet.
                page.check(f"input.action-select[value='{action_deleted}']")
                page.select_option("select[name=action]", "delete_dead_letters")
                submit(page, "button[name=index]")
                expect(page.locator("h1")).to_have_text("Delete dead letters?")
                expect(page.locator("#content ul")).to_contain_text(action_deleted)
                submit(page, "input[type=submit][value='Yes, delete them']")
                assert page.url == f"{base}{DEAD_LETTERS}"
                assert messages(page) == ["1 dead letter deleted."]
                expect(rows).to_have_count(len(kept))

                # Pause a queue.
                page.goto(f"{base}{QUEUES}")
                emails = page.locator("tr[data-queue='emails']")
                expect(emails).to_contain_text("Active")
                with page.expect_navigation():
                    emails.locator("button", has_text="Pause").click()
                assert page.url == f"{base}{QUEUES}"
                assert messages(page) == [
                    "Queue emails paused: workers stop claiming from it within a second or two."
                ]
                expect(emails).to_contain_text("Paused")
                expect(emails.locator("button")).to_have_text("Resume")
                expect(page.locator("tr[data-queue='default']")).to_contain_text("Active")

                # The screenshots: the overview with its chart, and the dead letters; the
                # navigation sidebar closed (remembered by the browser) to leave room for the tables.
                page.set_viewport_size({"width": 1280, "height": 640})  # full page: no blank below
                page.goto(f"{base}{OVERVIEW}")
                page.click("#toggle-nav-sidebar")
                expect(page.locator("#nav-sidebar")).to_be_hidden()
                bars = page.locator("svg.dbjobs-chart rect[height]:not([height='0.0'])")
                assert bars.count() >= 55, "the chart should draw a bar for (nearly) every minute"
                expect(
                    page.locator("svg.dbjobs-chart rect[fill='#ba2121']:not([height='0.0'])")
                ).not_to_have_count(0)
                expect(page.locator("tr[data-queue='emails']")).to_contain_text("Paused")
                screenshot(page, shots / "admin-overview.png")
                page.goto(f"{base}{DEAD_LETTERS}")
                expect(rows).to_have_count(len(kept))
                screenshot(page, shots / "admin-dead-letters.png")
                assert not errors, f"JavaScript errors on the admin pages: {errors}"
            finally:
                browser.close()
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        print(log.read_text())  # shown when the test fails

    # What the clicks did, read back from the database.
    state = shell_json(env, CHECK, IDS=seeded["dead"])
    jobs, queues = state["jobs"], state["queues"]
    for pk in (retried, detail_retried):
        assert jobs[pk]["status"] == "READY" and jobs[pk]["attempts"] == 0, jobs[pk]
        assert not jobs[pk]["finished"] and jobs[pk]["errors"] > 0, "the error history is kept"
    assert detail_deleted not in jobs and action_deleted not in jobs
    assert all(jobs[pk]["status"] == "FAILED" and jobs[pk]["attempts"] > 0 for pk in kept)
    assert queues["emails"]["paused_at"] and queues["emails"]["paused_by"] == "admin"
    assert set(queues) == {"emails"}, "only the paused queue gets a row"
