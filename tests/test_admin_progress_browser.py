"""Live progress in a real browser: a real run_jobs worker runs a long job; the admin's bar moves, no reload.

The admin is the test project's, served by pytest-django's live_server; headless Chromium
reads the list and the job's page while the job reports, then sees it finish. Takes the
docs' screenshot of a job's progress (``make screenshots`` writes it to docs/_static).
Skipped without chromium and playwright, like tests/test_admin_browser.py.
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest
from django.contrib import admin
from django.contrib.auth.models import User

import django_dbjobs
from django_dbjobs import enqueue
from django_dbjobs.models import Job

from . import long_jobs
from .admin_browser import PASSWORD, chromium_or_skip, horizontal_overflow, screenshot, submit
from .conftest import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

JOBS = "/admin/django_dbjobs/job/"


def values_seen(page, selector: str, count: int, timeout: float = 20) -> list[str]:
    """The values the bar at `selector` took, read until `count` different ones (the page never reloaded)."""
    seen: list[str] = []
    deadline = page.evaluate("Date.now()") + timeout * 1000
    while len(set(seen)) < count:
        assert page.evaluate("Date.now()") < deadline, f"the bar did not move: {seen}"
        value = (
            page.locator(selector).first.get_attribute("value") if page.locator(selector).count() else None
        )
        if value is not None and (not seen or value != seen[-1]):
            seen.append(value)
        page.wait_for_timeout(200)
    assert page.evaluate("window.dbjobsNotReloaded") is True, "the page was reloaded"
    return seen


def served_static(root: Path) -> Path:
    """The admin's and this app's static files in `root`, which the live server serves as STATIC_ROOT."""
    for app in (admin, django_dbjobs):
        shutil.copytree(Path(app.__file__).parent / "static", root, dirs_exist_ok=True)
    return root


def test_a_running_jobs_bar_moves_on_the_list_and_its_page_then_shows_it_finished(
    live_server, run_jobs, settings, tmp_path
):
    chromium = chromium_or_skip()
    settings.STATIC_ROOT = served_static(tmp_path / "static")  # the tests' settings have no staticfiles app
    from playwright.sync_api import expect, sync_playwright

    shots = Path(os.environ.get("DBJOBS_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    User.objects.create_superuser("admin", "admin@example.com", PASSWORD)
    job = enqueue(long_jobs.count_slowly, 24, "catalogue page")
    worker = run_jobs()
    base = live_server.url
    # Before the browser: playwright's sync API runs an event loop, where the ORM refuses to run.
    assert wait_for(lambda: Job.objects.filter(pk=job.pk, progress_state__isnull=False).exists(), 30), (
        worker.output()
    )
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.set_default_timeout(20_000)
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(f"{base}/admin/login/?next={JOBS}")
            page.fill("input[name=username]", "admin")
            page.fill("input[name=password]", PASSWORD)
            submit(page, "input[type=submit]")

            # The list: the running job's bar moves in place.
            page.goto(f"{base}{JOBS}")
            row = f"tr:has(input.action-select[value='{job.pk}'])"
            expect(page.locator(f"{row} td.field-status_and_attempts progress")).to_have_count(1)
            page.evaluate("window.dbjobsNotReloaded = true")
            values_seen(page, f"{row} td.field-status_and_attempts progress", 2)
            expect(page.locator(f"{row} td.field-status_and_attempts")).to_contain_text("catalogue page")
            assert horizontal_overflow(page) == {}, "the list scrolls sideways at 1280 px"

            # Its page: the bar moves, with its numbers, note, pace and time left.
            page.goto(f"{base}{JOBS}{job.pk}/change/")
            bar = ".field-progress_display progress"
            page.evaluate("window.dbjobsNotReloaded = true")
            seen = values_seen(page, bar, 2)
            assert [float(value) for value in seen] == sorted(float(value) for value in seen), seen
            block = page.locator(".field-progress_display")
            expect(block).to_contain_text("of 120 (")
            expect(block).to_contain_text("per second")
            expect(block).to_contain_text("left")
            assert page.locator(bar).get_attribute("max") == "100"
            assert page.locator(bar).get_attribute("aria-label").endswith("%)")
            expect(page.locator(".field-checkpoint_display pre")).to_contain_text('"step"')
            screenshot(page, shots / "admin-progress.png")

            # Then the finished state, still without a reload: the status, the last report, polling over.
            expect(page.locator(".field-status_display")).to_contain_text("Successful", timeout=40_000)
            expect(block).to_contain_text("120 of 120 (100%)")
            expect(block).to_contain_text("all done")
            expect(block).to_contain_text("its last report before it finished")
            expect(page.locator(f"{bar}.dbjobs-muted")).to_have_count(1)
            expect(page.locator(".field-checkpoint_display pre")).to_contain_text('"step": 24')
            expect(page.locator("[data-dbjobs-running]")).to_have_count(0)
            assert page.evaluate("window.dbjobsNotReloaded") is True, "the page was reloaded"
            assert not errors, f"JavaScript errors: {errors}"
        finally:
            browser.close()
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
