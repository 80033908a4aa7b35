"""bench/sustained.py's verdict on its samples, and their plot as an SVG (no plotting library)."""

from __future__ import annotations

import statistics
from html import escape

#: How far sizes may stray from their median after the warm-up, and the claim p99 may grow.
SIZE_BAND = 0.15
CLAIM_GROWTH = 1.3
WIDTH, PANEL, MARGIN = 760, 170, 56


def verdict(samples: list[dict], warm_up: int) -> list[str]:
    """Lines saying whether the targets were met (sizes flat, claim p99 not grown)."""
    settled = [row for row in samples if row["minute"] > warm_up]
    lines = []
    for key in ("table_mib", "indexes_mib", "total_mib"):
        values = [row[key] for row in settled if row.get(key) is not None]
        if not values:
            continue
        middle = statistics.median(values)
        low, high = min(values) / middle - 1, max(values) / middle - 1
        met = -SIZE_BAND <= low and high <= SIZE_BAND
        lines.append(
            f"{key}: median {middle:.1f} MiB after minute {warm_up}, {low:+.1%} to {high:+.1%} "
            f"({'met' if met else 'NOT met'}: within ±{SIZE_BAND:.0%})"
        )
        if len(values) >= 20:  # growth, not the swing of a vacuum truncating the table's end
            first, last = statistics.median(values[:10]), statistics.median(values[-10:])
            lines.append(
                f"{key}: the last ten minutes' median {last:.1f} MiB against the ten after the "
                f"warm-up {first:.1f} MiB: {last / first - 1:+.1%}"
            )
    claims = [row for row in samples if "claim_p99_ms" in row]
    if len(claims) >= 20:
        for label, first in (
            ("the run's first ten minutes", claims[:10]),
            ("the ten after the warm-up", None),
        ):
            first = first or [row for row in claims if row["minute"] > warm_up][:10]
            before = statistics.median(row["claim_p99_ms"] for row in first)
            after = statistics.median(row["claim_p99_ms"] for row in claims[-10:])
            met = after <= CLAIM_GROWTH * before
            lines.append(
                f"claim p99, last ten minutes {after:.2f} ms against {label} {before:.2f} ms: "
                f"{after / before:.2f}x ({'met' if met else 'NOT met'}: at most {CLAIM_GROWTH}x)"
            )
    return lines


#: The plot's panels: (title, unit, [(sample key, colour)]).
PANELS = [
    ("Claim latency (prober, 10 jobs)", "ms", [("claim_p50_ms", "#1f77b4"), ("claim_p99_ms", "#d62728")]),
    ("enqueue() latency", "ms", [("enqueue_p50_ms", "#1f77b4"), ("enqueue_p99_ms", "#d62728")]),
    ("Job table on disk", "MiB", [("table_mib", "#2ca02c"), ("indexes_mib", "#9467bd")]),
    (
        "Dead rows (PostgreSQL) / undo history (InnoDB)",
        "rows",
        [("dead_rows", "#8c564b"), ("history_length", "#8c564b")],
    ),
]


def plot(samples: list[dict], title: str) -> str:
    """An SVG of PANELS over the run's minutes; minutes with the long transaction open shaded."""
    panels = []
    for name, unit, keys in PANELS:
        present = [(key, colour) for key, colour in keys if any(row.get(key) is not None for row in samples)]
        if present:
            panels.append((name, unit, present))
    height = MARGIN + len(panels) * (PANEL + MARGIN)
    last = max(row["minute"] for row in samples)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}"'
        ' font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
        f'<text x="{WIDTH / 2}" y="22" text-anchor="middle" font-size="15">{escape(title)}</text>',
    ]
    for index, (name, unit, keys) in enumerate(panels):
        top = MARGIN + index * (PANEL + MARGIN)
        parts += _panel(samples, name, unit, keys, top, last)
    parts.append("</svg>")
    return "\n".join(parts)


def _panel(samples, name, unit, keys, top, last) -> list[str]:
    left, right = 70, WIDTH - 20
    values = [row[key] for row in samples for key, _ in keys if row.get(key) is not None]
    high = max(values) * 1.1 or 1.0

    def x(minute):
        return left + (right - left) * minute / last

    def y(value):
        return top + PANEL - PANEL * value / high

    out = [f'<text x="{left}" y="{top - 8}" font-size="13">{escape(name)} ({unit})</text>']
    for row in samples:
        if row.get("long_transaction"):
            out.append(
                f'<rect x="{x(row["minute"] - 1):.1f}" y="{top}" width="{x(1) - left:.1f}"'
                f' height="{PANEL}" fill="#fde9c8"/>'
            )
    out.append(
        f'<rect x="{left}" y="{top}" width="{right - left}" height="{PANEL}" fill="none" stroke="#999"/>'
    )
    for step in range(5):
        value = high * step / 4
        out.append(f'<text x="{left - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{value:.3g}</text>')
    for minute in range(0, int(last) + 1, max(1, int(last) // 6)):
        out.append(
            f'<text x="{x(minute):.1f}" y="{top + PANEL + 14}" text-anchor="middle">{minute} min</text>'
        )
    for slot, (key, colour) in enumerate(keys):
        points = " ".join(
            f"{x(row['minute']):.1f},{y(row[key]):.1f}" for row in samples if row.get(key) is not None
        )
        out.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="1.6"/>')
        out.append(f'<text x="{right - 150}" y="{top + 16 + 14 * slot}" fill="{colour}">{key}</text>')
    return out
