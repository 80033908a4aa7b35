"""dbjobs_status's table: the status read by status.py as lines of text."""

from __future__ import annotations

from .long_transactions import age_text
from .status import Status


def table(status: Status) -> list[str]:
    """The status as lines of text: one row per queue, then the workers (the problems are the exit's)."""
    header = ["QUEUE", "DUE", "LATER", "RUNNING", "FAILED", "OLDEST DUE", "PAUSED"]
    lines = [header]
    for row in status.queues:
        paused = "-"
        if row.paused:
            paused = f"since {row.paused_at:%Y-%m-%d %H:%M} UTC" + (
                f" by {row.paused_by}" if row.paused_by else ""
            )
        lines.append(
            [
                row.name,
                str(row.due),
                str(row.later),
                str(row.running),
                str(row.failed),
                "-" if row.lag is None else age_text(row.lag),
                paused,
            ]
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    ]
    if not status.queues:
        text.append("(no jobs waiting, running or failed)")
    text.extend(status.flow.lines())
    text.extend(status.workflows.lines())
    if status.causes:
        text.append(f"Dead letters by cause (the {len(status.causes)} most frequent):")
        for cause in status.causes:
            text.append(f"  {cause.count:>6}  {cause.fingerprint or '(none)':16}  {cause.summary[:100]}")
    if status.long_transactions is not None:
        text.extend(status.long_transactions.lines())
    if status.running is not None:
        text.extend(status.running.lines(status.checked_at))
    threads = sum(worker.concurrency for worker in status.workers)
    text.append(f"Live workers: {len(status.workers)} ({threads} job threads)")
    for worker in status.workers:
        queues = ",".join(worker.queues) if worker.queues else "all queues"
        text.append(f"  {worker.hostname} pid {worker.pid}: {queues}, {worker.concurrency} threads")
    return text
