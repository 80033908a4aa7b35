"""The demo's jobs: one that succeeds, one that fails twice then succeeds, one that always fails."""

from django_dbjobs import current_job, job


@job
def resize_image(image_id: int, width: int = 640) -> dict:
    return {"image": image_id, "width": width}


@job(queue="emails", priority=10, max_attempts=5)
def send_welcome_email(address: str) -> str:
    attempt = current_job().attempts
    if attempt < 3:
        raise ConnectionError(f"SMTP server busy (attempt {attempt})")
    return f"sent to {address}"


@job(queue="reports", max_attempts=3)
def build_broken_report(report_id: int) -> None:
    raise ValueError(f"report {report_id} has no data source")


@job
def nap(seconds: float) -> float:
    """Sleep; bench/recovery.py kills the worker running it."""
    import time

    time.sleep(seconds)
    return seconds


@job(queue="reports")
def nightly_summary(due_time: str | None = None) -> str:
    """Run by the "nightly-summary" schedule (settings.DBJOBS_SCHEDULES) for each due time."""
    return f"summary for the day before {due_time or current_job().scheduled_for.isoformat()}"
