"""The paced benchmark's report: a markdown table and an SVG plot from
results.jsonl (written by bench/paced.sh). Standard library only.

usage: python3 bench/paced_report.py OUT_DIR
"""
import json
import statistics
import sys
from pathlib import Path

out = Path(sys.argv[1])
runs = [json.loads(l) for l in (out / "results.jsonl").read_text().splitlines() if l.strip()]


def merged(group):
    """One cell measured in several rounds (ROUNDS=N): each figure's median,
    errors summed, and the range of the runs' p99s kept beside them."""
    if len(group) == 1:
        return group[0]
    m = dict(group[0])
    for k in ("rps", "requests", "cpu_us_per_request", "waited_ms", "rss_idle_kib", "rss_kib"):
        vals = [g[k] for g in group if g.get(k) is not None]
        m[k] = round(statistics.median(vals), 1) if vals else None
    m["rps"] = round(m["rps"] or 0)
    m["errors"] = sum(g["errors"] for g in group)
    for k in ("first_byte_ms", "last_byte_ms"):
        ds = [g[k] for g in group if g.get(k)]
        if ds:
            m[k] = {q: statistics.median(d[q] for d in ds) for q in ds[0]}
            m[k + "_range"] = (min(d["p99"] for d in ds), max(d["p99"] for d in ds))
    m["rounds"] = len(group)
    return m


cells = {}
for r in runs:
    cells.setdefault((r["upstream"], r["streams"], r["proxy"]), []).append(r)
rows = [merged(g) for g in cells.values()]
rounds = max((len(g) for g in cells.values()), default=1)


def base(r):
    """The direct row at the same upstream and streams."""
    for d in rows:
        if d["proxy"] == "direct" and d["upstream"] == r["upstream"] and d["streams"] == r["streams"]:
            return d
    return None


def added(r, key, q="p99"):
    d = base(r)
    if r["proxy"] == "direct" or not d or not r.get(key) or not d.get(key):
        return None
    return r[key][q] - d[key][q]


def saturated(r):
    """The load side could not keep up at this count: the direct streams took
    a fifth longer (p50) than at the lightest load over the same upstream."""
    d = base(r)
    lightest = [x["last_byte_ms"]["p50"] for x in rows
                if x["proxy"] == "direct" and x["upstream"] == r["upstream"] and x.get("last_byte_ms")]
    return bool(d and lightest and d["last_byte_ms"]["p50"] > 1.2 * min(lightest))


def vs_nginx(r, key):
    """A proxy's p99 minus nginx's at the same upstream and streams."""
    for d in rows:
        if d["proxy"] == "nginx" and d["upstream"] == r["upstream"] and d["streams"] == r["streams"]:
            if r["proxy"] in ("direct", "nginx") or not r.get(key) or not d.get(key):
                return None
            return r[key]["p99"] - d[key]["p99"]
    return None


def ms(v):
    return "—" if v is None else f"{v:+.1f}"


def p99(r, key):
    """A p99 (the median over the rounds, with their range when there were several)."""
    v = f"{(r[key] or {}).get('p99', 0):.1f}"
    lo_hi = r.get(key + "_range")
    return f"{v} ({lo_hi[0]:.0f}–{lo_hi[1]:.0f})" if lo_hi else v


lines = [
    "| upstream | streams | proxy | req/s | first byte p99 ms | added | last byte p99 ms | added | vs nginx | CPU µs/req | waited ms | RSS MiB | KiB/stream | errors |",
    "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
]
for r in sorted(rows, key=lambda r: (r["upstream"], r["streams"])):
    per = None
    if r["proxy"] != "direct" and r["rss_kib"]:
        per = (r["rss_kib"] - r["rss_idle_kib"]) / r["streams"]
    waited = "—" if r.get("waited_ms") is None else f"{r['waited_ms']:.0f}"
    lines.append(
        f"| {r['upstream']} | {r['streams']:,}{' (saturated)' if saturated(r) else ''} | {r['proxy']} | {r['rps']:,} | "
        f"{p99(r, 'first_byte_ms')} | {ms(added(r, 'first_byte_ms'))} | {p99(r, 'last_byte_ms')} | "
        f"{ms(added(r, 'last_byte_ms'))} | {ms(vs_nginx(r, 'last_byte_ms'))} | {r['cpu_us_per_request'] or '—'} | "
        f"{waited} | {r['rss_kib'] / 1024:.0f} | {'—' if per is None else f'{per:.1f}'} | {r['errors']} |"
        if r["proxy"] != "direct" else
        f"| {r['upstream']} | {r['streams']:,} | direct | {r['rps']:,} | {p99(r, 'first_byte_ms')} | — | "
        f"{p99(r, 'last_byte_ms')} | — | — | — | — | — | — | {r['errors']} |"
    )
table = "\n".join(lines) + (
    "\n\nadded: p99 minus the direct p99 (over TLS the direct client does TLS itself, the\n"
    "proxies' clients do not); vs nginx: last-byte p99 minus nginx's. (saturated): the\n"
    "direct streams took a fifth longer than at the lightest load, so the load side (one\n"
    "core) could not keep up and the figures say little; the plot leaves them out.\n"
    "waited: how long the proxy was ready to run but waited for its core while measured\n"
    "(other work on that core); runs that differ much in it are not comparable."
) + (
    f"\n{rounds} rounds, the proxies in turn: each figure is the median of its runs, and each\n"
    "p99 is followed by the range of the runs' p99s (a run's p99 is mostly its worst moment)."
    if rounds > 1 else ""
)
(out / "table.md").write_text(table + "\n")
print(table)

# The plot: p99 added (last byte) against streams, one line per proxy, over
# plain HTTP (over TLS the direct baseline pays for its own client's TLS:
# the table compares the proxies there).
series = {}
for r in rows:
    a = added(r, "last_byte_ms")
    if a is not None and r["upstream"] == "http" and not saturated(r):
        series.setdefault((r["proxy"], r["upstream"]), []).append((r["streams"], a))
if series:
    W, H, L, R, T, B = 640, 400, 70, 150, 30, 50
    xs = sorted({x for s in series.values() for x, _ in s})
    ys = [y for s in series.values() for _, y in s]
    ymin, ymax = min(0.0, min(ys)), max(1.0, max(ys)) * 1.1
    px = lambda x: L + (W - L - R) * (xs.index(x) / max(len(xs) - 1, 1))
    py = lambda y: T + (H - T - B) * (1 - (y - ymin) / (ymax - ymin))
    colors = {"toolgate": "#d62728", "nginx": "#1f77b4", "toolgate-sentinel": "#ff7f0e",
              "toolgate-limit": "#e377c2", "toolgate-redis": "#7f7f7f",
              "litellm": "#9467bd", "portkey": "#8c564b", "floor": "#2ca02c",
              "toolgate-h1": "#bcbd22"}
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{L}" y="18">p99 latency added to the direct p99 (last byte), plain HTTP upstream</text>',
           f'<line x1="{L}" y1="{py(0)}" x2="{W - R}" y2="{py(0)}" stroke="#999"/>',
           f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H - B}" stroke="#333"/>',
           f'<text x="{L + (W - L - R) / 2 - 50}" y="{H - 10}">concurrent streams</text>',
           f'<text x="12" y="{T + 10}">ms</text>']
    for i in range(6):
        y = ymin + (ymax - ymin) * i / 5
        svg.append(f'<text x="{L - 40}" y="{py(y) + 4}">{round(y)}</text>')
    for x in xs:
        svg.append(f'<text x="{px(x) - 15}" y="{H - B + 18}">{x:,}</text>')
    for k, ((proxy, up), pts) in enumerate(sorted(series.items())):
        pts.sort()
        c = colors.get(proxy, "#2ca02c")
        dash = ' stroke-dasharray="6,4"' if up == "https" else ""
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        svg.append(f'<polyline points="{path}" fill="none" stroke="{c}" stroke-width="2"{dash}/>')
        for x, y in pts:
            svg.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{c}"/>')
        ly = T + 20 + 18 * k
        svg.append(f'<line x1="{W - R + 10}" y1="{ly}" x2="{W - R + 35}" y2="{ly}" stroke="{c}" stroke-width="2"{dash}/>')
        svg.append(f'<text x="{W - R + 40}" y="{ly + 4}">{proxy} ({up})</text>')
    svg.append("</svg>")
    (out / "plot.svg").write_text("\n".join(svg) + "\n")
    print(f"\nplot: {out / 'plot.svg'}")
