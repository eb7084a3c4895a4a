#!/usr/bin/env python3
"""Draws initial-sync time against record count from `outpost bench --series --json FILE`.

Usage: scripts/bench-chart.py docs/bench/series.json docs/initial-sync.svg
(after scripts/bench initial-sync --series --json docs/bench/series.json)
Writes a small SVG (no dependencies): device download time and the SQLite copy
baseline, both measured in the same run, for each size.
"""
import json
import sys


def main(source, target):
    results = json.load(open(source))["results"]
    points = []
    for result in results:
        if result["name"].startswith("initial-sync-") and result["name"][13:].isdigit():
            points.append((int(result["details"]["records"]), result["figure"], result["baseline"]))
    points.sort()
    if not points:
        sys.exit("no initial-sync series in %s (run outpost bench initial-sync --series --json FILE)" % source)
    width, height, left, bottom, top, right = 640, 360, 60, 50, 30, 20
    max_x = max(p[0] for p in points)
    max_y = max(max(p[1], p[2]) for p in points) * 1.1

    def x(v):
        return left + (width - left - right) * v / max_x

    def y(v):
        return height - bottom - (height - top - bottom) * v / max_y

    parts = [
        '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">' % (width, height),
        '<rect width="100%" height="100%" fill="white"/>',
        '<text x="%d" y="18" font-size="14">Initial sync time by record count (same run, same machine)</text>' % left,
        '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (left, height - bottom, width - right, height - bottom),
        '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (left, top, left, height - bottom),
    ]
    for i in range(5):
        value = max_y * i / 4
        parts.append('<text x="%d" y="%.1f" text-anchor="end">%.1f s</text>' % (left - 6, y(value) + 4, value))
        parts.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>' % (left, y(value), width - right, y(value)))
    for count, _, _ in points:
        parts.append('<text x="%.1f" y="%d" text-anchor="middle">%dk</text>' % (x(count), height - bottom + 16, round(count / 1000)))
    for index, (colour, label) in enumerate([("#1f6feb", "Outpost device download"), ("#999", "SQLite copy baseline")]):
        series = [(p[0], p[1 + index]) for p in points]
        path = " ".join("%s%.1f,%.1f" % ("M" if i == 0 else "L", x(c), y(v)) for i, (c, v) in enumerate(series))
        parts.append('<path d="%s" fill="none" stroke="%s" stroke-width="2"/>' % (path, colour))
        for c, v in series:
            parts.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>' % (x(c), y(v), colour))
        parts.append('<text x="%d" y="%d" fill="%s">%s</text>' % (left + 10, top + 16 + 16 * index, colour, label))
    parts.append('<text x="%d" y="%d" text-anchor="middle">records</text>' % ((left + width) // 2, height - 12))
    parts.append("</svg>")
    open(target, "w").write("\n".join(parts) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
