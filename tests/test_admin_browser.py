"""The admin in a real browser: the example project served by runserver, driven by headless Chromium.

Looks at every page at 1280 px with the navigation sidebar open (nothing scrolls sideways),
reads the timeline's order and the whole ids, logs in, retries and deletes dead letters through
the pages (actions, confirmation pages, the buttons of the detail page, a whole cause), pauses a queue,
runs a schedule now, checks what the database holds afterwards, and takes the screenshots of
the docs (``make screenshots`` writes them to docs/_static). Runs on each database of the session.

Needs Debian's chromium (``apt-get install chromium``) and the playwright package (the ``test``
extra); it is skipped without them unless DBJOBS_REQUIRE_BROWSER=1 (CI), which makes it fail.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .admin_browser import (
    CHECK,
    PASSWORD,
    SEED,
    broken_words,
    chromium_or_skip,
    example_database,
    example_env,
    horizontal_overflow,
    manage,
    messages,
    most_lines,
    screenshot,
    served,
    shell_json,
    submit,
)

pytestmark = pytest.mark.slow

ADMIN = "/admin/django_dbjobs/"
JOBS = f"{ADMIN}job/"
DEAD_LETTERS = f"{ADMIN}failedjob/"
CAUSES = f"{ADMIN}failuregroup/"
QUEUES = f"{ADMIN}queue/"
OVERVIEW = f"{ADMIN}overview/"
SCHEDULES = f"{ADMIN}schedule/"
WORKERS = f"{ADMIN}workerprocess/"
#: Where a word must never be split over two lines ("defaul t", "Paus ed"): the tables of every page.
WHOLE_WORDS = "#dbjobs-queues td, #result_list td, #result_list th, .dbjobs-table td"
#: The cells of the lists that show a moment ("due", its date, its time).
MOMENT_CELLS = ", ".join(
    f"#result_list td.field-{name}"
    for name in ("when", "failed_at", "next_run", "last_run_display", "started_display", "created_display")
)
FRESH_HEARTBEATS = (
    "from django.db.models.functions import Now\n"
    "from django_dbjobs.models import WorkerProcess\n"
    "WorkerProcess.objects.update(heartbeat_at=Now())\n"
)


def every_page(seeded: dict) -> list[str]:
    dead, worker = seeded["dead"][0], "web-1:4127:8f3a91c2"
    return [
        OVERVIEW,
        QUEUES,
        JOBS,
        f"{JOBS}{seeded['waiting']}/change/",
        f"{JOBS}{seeded['running']}/change/",
        DEAD_LETTERS,
        f"{DEAD_LETTERS}{dead}/change/",
        f"{DEAD_LETTERS}retry-matching/",
        f"{DEAD_LETTERS}delete-matching/",
        CAUSES,
        SCHEDULES,
        f"{SCHEDULES}add/",
        f"{SCHEDULES}{seeded['schedule']}/change/",
        WORKERS,
        f"{WORKERS}{worker}/change/",
    ]


def timeline(page) -> tuple[list[str], list[str]]:
    """The timeline's events, and the UTC time of each one that has a time, top to bottom."""
    rows = page.locator(".field-timeline tbody tr")
    events = [text.strip() for text in rows.locator("td:first-child").all_inner_texts()]
    times = page.locator(".field-timeline time").evaluate_all("els => els.map(e => e.dateTime)")
    return events, times


def test_admin_in_a_browser(tmp_path, django_db_blocker):
    chromium = chromium_or_skip()
    from playwright.sync_api import expect, sync_playwright

    shots = Path(os.environ.get("DBJOBS_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    with example_database(tmp_path, django_db_blocker) as database_url:
        env = example_env(database_url)
        manage(env, "migrate", "--noinput", "-v", "0", timeout=180)
        seeded = shell_json(env, SEED, PASSWORD=PASSWORD)
        dead = seeded["dead"]
        # One dead letter per way of retrying and deleting; every kind of job keeps some for the screenshot.
        retried, detail_retried, detail_deleted, action_deleted = dead[0], dead[3], dead[7], dead[4]
        kept = [pk for pk in dead if pk not in (retried, detail_retried, detail_deleted, action_deleted)]
        report_kept = [
            pk for pk in kept if dead.index(pk) in range(3, 7)
        ]  # build_broken_report's, retried by cause

        with served(env, tmp_path / "runserver.log") as base, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, headless=True)
            try:
                context = browser.new_context(
                    viewport={"width": 1280, "height": 800}, permissions=["clipboard-read", "clipboard-write"]
                )
                page = context.new_page()
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

                # Every page fits 1280 px with the navigation sidebar open: nothing scrolls sideways.
                expect(page.locator("#nav-sidebar")).to_be_visible()
                for url in every_page(seeded):
                    response = page.goto(f"{base}{url}")
                    assert response.status == 200, url
                    assert horizontal_overflow(page) == {}, f"{url} scrolls sideways at 1280 px"
                    assert broken_words(page, WHOLE_WORDS) == [], f"{url} splits words at 1280 px"
                    # Rows stay short: a moment takes two lines at most ("Dec. 3, 2026," then
                    # "8:04:14 a.m."), three with its label ("due"), never a line per word.
                    assert most_lines(page, "#result_list time") <= 2, url
                    assert most_lines(page, MOMENT_CELLS) <= 3, url

                # The timeline in time order: a job due again (its retry) after it first started.
                page.goto(f"{base}{JOBS}{seeded['waiting']}/change/")
                events, times = timeline(page)
                assert events == [
                    "Enqueued",
                    "First started",
                    "Last attempt started",
                    "Attempt 1 failed",
                    "Due",
                ]
                assert times == sorted(times) and len(times) == len(events)
                page.goto(f"{base}{DEAD_LETTERS}{dead[1]}/change/")
                events, times = timeline(page)
                assert events[0] == "Enqueued" and events[-1] == "Finished: Failed"
                assert times == sorted(times) and len(times) == len(events)

                # The whole id: Copy on the job's page, and one click on it in the list selects all of it.
                page.goto(f"{base}{JOBS}{seeded['waiting']}/change/")
                page.click("button.dbjobs-copy")
                expect(page.locator("button.dbjobs-copy")).to_have_text("Copied")
                assert page.evaluate("navigator.clipboard.readText()") == seeded["waiting"]
                page.goto(f"{base}{JOBS}?queue=emails")
                page.locator(f"tr:has(a[href*='{seeded['waiting']}']) code.dbjobs-id").click()
                selected = page.evaluate("getSelection().toString()")
                assert selected == seeded["waiting"]
                page.fill("#searchbar", selected)
                submit(page, "#changelist-search input[type=submit]")
                expect(page.locator("#result_list tbody tr")).to_have_count(1)
                expect(page.locator("#result_list code.dbjobs-id")).to_have_text(seeded["waiting"])

                # Only deleting asks with the red button.
                colours = {}
                for name in ("retry", "delete"):
                    page.goto(f"{base}{DEAD_LETTERS}{name}-matching/")
                    colours[name] = page.locator("input[type=submit]").evaluate(
                        "button => getComputedStyle(button).backgroundColor"
                    )
                assert colours["retry"] != colours["delete"], colours

                # The dead letters: all of them, newest first, with their last error.
                page.goto(f"{base}{DEAD_LETTERS}")
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

                # Pause a queue. Its serving worker was seeded with a heartbeat that a loaded
                # machine can let go stale (30 s) before this step: "No worker serves it".
                manage(env, "shell", "-c", FRESH_HEARTBEATS)
                page.goto(f"{base}{QUEUES}")
                emails = page.locator("tr[data-queue='emails']")
                expect(emails).to_contain_text("Active")
                with page.expect_navigation():
                    emails.locator("button", has_text="Pause").click()
                assert page.url == f"{base}{QUEUES}"
                assert messages(page) == [
                    "Queue emails paused: workers stop claiming from it within a second or two."
                ]
                expect(emails).to_contain_text("Paused by admin at")  # shown, not only on hover
                expect(emails.locator("button")).to_have_text("Resume")
                assert broken_words(page, WHOLE_WORDS) == [], "the paused queue's row splits words"
                expect(page.locator("tr[data-queue='default']")).to_contain_text("Active")

                # Run a schedule now: the message keeps its name as written.
                page.goto(f"{base}{SCHEDULES}{seeded['schedule']}/change/")
                submit(page, ".object-tools button[name=run_now]")
                (message,) = messages(page)
                assert message.startswith("Schedule nightly-summary enqueued job "), message

                # The screenshots, as a user first sees the pages: the navigation sidebar open.
                manage(env, "shell", "-c", FRESH_HEARTBEATS)
                page.set_viewport_size({"width": 1280, "height": 640})  # full page: no blank below
                page.goto(f"{base}{OVERVIEW}")
                expect(page.locator("#nav-sidebar")).to_be_visible()
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
                page.goto(f"{base}{JOBS}{seeded['waiting']}/change/")
                screenshot(page, shots / "admin-job.png")

                # Dead letters by cause: one row per cause, each listing its jobs; its traceback opens.
                page.goto(f"{base}{CAUSES}")
                causes = page.locator("tr.dbjobs-cause")
                expect(causes).to_have_count(3)
                reports = causes.filter(has_text="demo.jobs.build_broken_report")
                expect(reports).to_contain_text("ValueError: report")
                expect(reports.locator("td.number")).to_have_text(str(len(report_kept)))
                expect(reports.locator("pre.dbjobs-traceback")).to_be_hidden()
                reports.locator("summary").click()
                expect(reports.locator("pre.dbjobs-traceback")).to_contain_text("build_broken_report")
                screenshot(page, shots / "admin-failure-groups.png")
                # Its count links to the dead letters of that cause alone.
                reports.locator("td.number a").click()
                expect(rows).to_have_count(len(report_kept))
                # Retry the whole cause: a confirmation listing its jobs, then the message.
                page.goto(f"{base}{CAUSES}")
                reports.locator("a.dbjobs-retry-cause").click()
                expect(page.locator("h1")).to_have_text("Retry every dead letter of this cause?")
                expect(page.locator("#content ul li")).to_have_count(len(report_kept))
                submit(page, "input[type=submit][value='Yes, retry them']")
                assert page.url == f"{base}{CAUSES}"
                assert messages(page) == [f"{len(report_kept)} jobs queued again."]
                expect(causes).to_have_count(2)
                assert not errors, f"JavaScript errors on the admin pages: {errors}"
            finally:
                browser.close()

        # What the clicks did, read back from the database.
        state = shell_json(env, CHECK, IDS=seeded["dead"])
    jobs, queues = state["jobs"], state["queues"]
    for pk in (retried, detail_retried):
        assert jobs[pk]["status"] == "READY" and jobs[pk]["attempts"] == 0, jobs[pk]
        assert not jobs[pk]["finished"] and jobs[pk]["errors"] > 0, "the error history is kept"
    assert detail_deleted not in jobs and action_deleted not in jobs
    assert all(
        jobs[pk]["status"] == "FAILED" and jobs[pk]["attempts"] > 0 for pk in kept if pk not in report_kept
    )
    assert all(jobs[pk]["status"] == "READY" and jobs[pk]["attempts"] == 0 for pk in report_kept)
    assert queues["emails"]["paused_at"] and queues["emails"]["paused_by"] == "admin"
    assert set(queues) == {"emails"}, "only the paused queue gets a row"
