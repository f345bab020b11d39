#!/usr/bin/env python3
"""Measures the layer's in-process overhead against body size and draws docs/overhead.svg.

    python3 benches/overhead_chart.py

Runs `cargo bench --bench layer` (the bare service and the layered one in the same run), takes
each median, and plots layered minus bare, in microseconds, for first executions and replays.
"""
import math
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
UNITS = {"ns": 1e-3, "µs": 1.0, "us": 1.0, "ms": 1e3, "s": 1e6}


def run_bench():
    out = subprocess.run(
        ["cargo", "bench", "--bench", "layer"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout
    medians, bench = {}, None
    for line in out.splitlines():
        name = re.match(r"^[├╰]─ (\w+)", line)
        if name:
            bench = name.group(1)
            continue
        row = re.match(r"^[│ ]\s+[├╰]─ (\d+)\s+(.*)$", line)
        if row and bench:
            cells = [c.strip() for c in row.group(2).split("│")]
            value, unit = cells[2].split()
            medians[(bench, int(row.group(1)))] = float(value) * UNITS[unit]
    return medians


def svg(series, sizes):
    width, height, left, bottom, top, right = 640, 360, 70, 50, 30, 150
    plot_w, plot_h = width - left - right, height - top - bottom
    y_max = max(v for points in series.values() for v in points) * 1.1
    x_of = lambda s: left + plot_w * (math.log(s) - math.log(sizes[0])) / (math.log(sizes[-1]) - math.log(sizes[0]))
    y_of = lambda v: top + plot_h * (1 - v / y_max)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="18" font-size="14">IdempotencyLayer overhead per request, in process (median, µs)</text>',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="black"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="black"/>',
    ]
    for i in range(6):
        v = y_max * i / 5
        y = y_of(v)
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end">{v:.0f}</text>')
    for s in sizes:
        label = f"{s // 1024} KiB" if s >= 1024 else f"{s} B"
        parts.append(f'<text x="{x_of(s):.1f}" y="{top + plot_h + 18}" text-anchor="middle">{label}</text>')
    parts.append(f'<text x="{left + plot_w / 2}" y="{height - 10}" text-anchor="middle">JSON body size</text>')
    colours = ["#1f77b4", "#d62728", "#2ca02c"]
    for (name, points), colour, n in zip(series.items(), colours, range(len(series))):
        path = " ".join(f"{'M' if i == 0 else 'L'}{x_of(s):.1f},{y_of(v):.1f}" for i, (s, v) in enumerate(zip(sizes, points)))
        parts.append(f'<path d="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for s, v in zip(sizes, points):
            parts.append(f'<circle cx="{x_of(s):.1f}" cy="{y_of(v):.1f}" r="3" fill="{colour}"/>')
        ly = top + 20 + 20 * n
        parts.append(f'<line x1="{left + plot_w + 15}" y1="{ly}" x2="{left + plot_w + 35}" y2="{ly}" stroke="{colour}" stroke-width="2"/>')
        parts.append(f'<text x="{left + plot_w + 40}" y="{ly + 4}">{name}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main():
    medians = run_bench()
    sizes = sorted({size for (_, size) in medians})
    series = {}
    print("| body | bare | first execution | replay | first overhead | replay overhead |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for size in sizes:
        bare = medians[("bare_service", size)]
        first = medians[("layered_first_execution", size)]
        replay = medians[("layered_replay", size)]
        print(f"| {size} B | {bare:.1f} µs | {first:.1f} µs | {replay:.1f} µs | +{first - bare:.1f} µs | +{replay - bare:.1f} µs |")
        series.setdefault("first execution", []).append(max(first - bare, 0.0))
        series.setdefault("replay", []).append(max(replay - bare, 0.0))
    (ROOT / "docs").mkdir(exist_ok=True)
    (ROOT / "docs" / "overhead.svg").write_text(svg(series, sizes))
    print("wrote docs/overhead.svg", file=sys.stderr)


if __name__ == "__main__":
    main()
