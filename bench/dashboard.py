"""How long the dashboard takes to draw a big group's rebalance timeline, in headless Chromium.

Usage::

    .venv/bin/python bench/dashboard.py                       # 1,000 members, 100 rebalances, both styles
    .venv/bin/python bench/dashboard.py --members 2000 --rebalances 300 --style eager --zooms 30

``regroup serve --http-port 0`` runs as a subprocess and serves the page and its assets; the group's JSON
(``/api/groups``, ``/api/groups/<id>``, ``/api/groups/<id>/timeline``) is generated here and handed to the page
through Playwright's request interception, since a server cannot be made to hold such a history quickly. The
event stream (``/api/events``) is the real server's. Two histories of a ``--members`` group whose partitions
(``--partitions-per-member`` each) change hands in ``--rebalances`` rebalances, one member replaced per rebalance:

* ``cooperative``: each rebalance moves the leaving member's partitions and a few more (KIP-429 / KIP-848: the
  other members keep theirs), so ownership intervals number about partitions + rebalances × moved;
* ``eager``: each rebalance revokes every partition and hands them all out again (the classic eager protocol),
  so every partition has an interval per generation and a gap per rebalance — the worst case for the drawing.

Printed per style: the timeline's size, the page's indexing of the JSON (``window.__regroupPrepMs``), its first
draw (``window.__regroupDrawMs``: canvas sizing, aggregation per member per pixel, every rectangle), their sum
(the budget is 1 s), the time from navigation to the first draw (network and JSON parsing included), and the
median and worst redraw over ``--zooms`` wheel zooms. Chromium: Debian's ``/usr/bin/chromium``.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
GROUP = "bench-group"
TOPIC = "orders"
START_S = 60.0


def member_id(rng: random.Random) -> str:
    return "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") for _ in range(22))


def history(members: int, rebalances: int, per_member: int, style: str, seed: int = 1) -> dict[str, Any]:
    """The group's detail and timeline documents, as the server's API shapes them."""
    rng = random.Random(seed)
    partitions = members * per_member
    live = [member_id(rng) for _ in range(members)]
    owner = {p: live[p % members] for p in range(partitions)}
    now = int(time.time() * 1000)
    step_ms = 6_000
    t0 = now - (rebalances + 1) * step_ms
    since = dict.fromkeys(range(partitions), t0)
    ownership: list[dict[str, Any]] = []
    timeline: list[dict[str, Any]] = []

    def close(p: int, at: int) -> None:
        ownership.append({"member_id": owner[p], "topic": TOPIC, "partition": p, "from_ms": since[p], "to_ms": at})

    for k in range(1, rebalances + 1):
        start = t0 + k * step_ms + rng.randrange(step_ms // 2)
        end = start + 150 + rng.randrange(600)
        leaving = rng.randrange(members)
        gone, joined = live[leaving], member_id(rng)
        live[leaving] = joined
        if style == "eager":
            moved = list(range(partitions))
            for p in moved:
                close(p, start)
            survivors = list(live)
            rng.shuffle(survivors)
            for p in moved:
                owner[p] = survivors[p % members] if owner[p] == gone else owner[p]
                since[p] = end
        else:
            moved = [p for p in range(partitions) if owner[p] == gone] + rng.sample(range(partitions), 4)
            for p in dict.fromkeys(moved):
                close(p, start)
                owner[p] = joined if rng.random() < 0.5 else rng.choice(live)
                since[p] = end
        timeline.append(
            {
                "start_ms": start,
                "end_ms": end,
                "epoch": k + 1,
                "reason": f"member {gone[:6]} left, {joined[:6]} joined",
                "member": joined,
                "moved": len(set(moved)),
                "unowned_partition_ms": len(set(moved)) * (end - start),
            }
        )
    for p in range(partitions):
        ownership.append({"member_id": owner[p], "topic": TOPIC, "partition": p, "from_ms": since[p], "to_ms": None})
    assignment: dict[str, list[int]] = {m: [] for m in live}
    for p in range(partitions):
        assignment.setdefault(owner[p], []).append(p)
    detail = {
        "group_id": GROUP,
        "type": "consumer",
        "state": "Stable",
        "generation": None,
        "epoch": rebalances + 1,
        "protocol": None,
        "assignor": "uniform",
        "members": [
            {
                "member_id": m,
                "client_id": f"consumer-{i}",
                "host": f"/10.0.{i // 250}.{i % 250}",
                "instance_id": None,
                "rack": None,
                "assignment": {TOPIC: sorted(assignment.get(m, []))},
            }
            for i, m in enumerate(live)
        ],
        "lag": {TOPIC: {str(p): rng.randrange(1000) for p in range(partitions)}},
    }
    summary = {
        "group_id": GROUP,
        "type": "consumer",
        "state": "Stable",
        "protocol": None,
        "assignor": "uniform",
        "members": members,
        "lag": sum(detail["lag"][TOPIC].values()),
    }
    return {
        "groups": {"groups": [summary]},
        "detail": detail,
        "timeline": {"rebalances": timeline, "ownership": ownership},
    }


def start_server(directory: Path) -> tuple[subprocess.Popen[bytes], str]:
    log = directory / "server.log"
    command = [sys.executable, "-m", "regroup", "serve", "--port", "0", "--data-dir", str(directory / "data")]
    with log.open("wb") as out:
        proc = subprocess.Popen([*command, "--http-port", "0"], stdout=out, stderr=out)
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        match = re.search(r" http=(http://\S+?)/? ", log.read_text(errors="replace"))
        if match:
            return proc, match.group(1).rstrip("/")
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"regroup serve did not report its HTTP URL:\n{log.read_text(errors='replace')[-3000:]}")


def measure(browser: Any, url: str, docs: dict[str, Any], zooms: int) -> dict[str, float]:
    bodies = {
        "/api/groups": json.dumps(docs["groups"]),
        f"/api/groups/{GROUP}": json.dumps(docs["detail"]),
        f"/api/groups/{GROUP}/timeline": json.dumps(docs["timeline"]),
    }

    def since(ms: int) -> str:
        """What the server answers to ``?since_ms=``: everything still open or ended since then."""
        timeline = docs["timeline"]
        return json.dumps(
            {
                "rebalances": [r for r in timeline["rebalances"] if r["end_ms"] is None or r["end_ms"] >= ms],
                "ownership": [o for o in timeline["ownership"] if o["to_ms"] is None or o["to_ms"] >= ms],
            }
        )

    def answer(route: Any) -> None:
        target = urllib.parse.urlsplit(route.request.url)
        query = urllib.parse.parse_qs(target.query)
        if target.path.endswith("/timeline") and "since_ms" in query:
            body: str | None = since(int(query["since_ms"][0]))
        else:
            body = bodies.get(target.path)
        if body is None:
            route.fulfill(status=404, content_type="application/json", body='{"error": "not found"}')
        else:
            route.fulfill(status=200, content_type="application/json", body=body)

    context = browser.new_context(viewport={"width": 1400, "height": 1000}, device_scale_factor=2)
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.route(re.compile(r".*/api/groups(/.*)?(\?.*)?$"), answer)
    page.goto(f"{url}/groups/{GROUP}")
    page.wait_for_function("() => window.__regroupFirstDrawAt !== undefined", timeout=60_000)
    first = page.evaluate("() => [window.__regroupPrepMs, window.__regroupDrawMs, window.__regroupFirstDrawAt]")
    drawn = page.evaluate("() => document.querySelector('#timeline-canvas').dataset")
    canvas = page.locator("#timeline-canvas").bounding_box()
    assert canvas is not None
    page.mouse.move(canvas["x"] + canvas["width"] * 0.7, canvas["y"] + canvas["height"] * 0.5)
    redraws = []
    for i in range(zooms):
        count = int(page.evaluate("() => document.querySelector('#timeline-canvas').dataset.drawn"))
        page.mouse.wheel(0, -240 if i < zooms // 2 else 240)
        page.wait_for_function(
            "(n) => Number(document.querySelector('#timeline-canvas').dataset.drawn) > n", arg=count, timeout=10_000
        )
        redraws.append(float(page.evaluate("() => window.__regroupDrawMs")))
    context.close()
    if problems:
        print("  the page logged:", *problems[:5], sep="\n    ")
    return {
        "intervals": int(drawn["intervals"]),
        "rebalances": int(drawn["rebalances"]),
        "rows": int(drawn["members"]),
        "gaps": int(drawn["gaps"]),
        "rects": int(drawn["rects"]),
        "prep_ms": float(first[0]),
        "draw_ms": float(first[1]),
        "first_draw_at_ms": float(first[2]),
        "redraw_median_ms": statistics.median(redraws) if redraws else 0.0,
        "redraw_max_ms": max(redraws) if redraws else 0.0,
    }


def report(style: str, r: dict[str, float], size_mb: float, zooms: int) -> str:
    return (
        f"{style}: {r['rows']} member rows, {r['intervals']:,} ownership intervals, {r['rebalances']} rebalances, "
        f"{r['gaps']:,} unowned windows ({size_mb:.1f} MB of JSON)\n"
        f"  index {r['prep_ms']:.1f} ms + first draw {r['draw_ms']:.1f} ms = {r['prep_ms'] + r['draw_ms']:.1f} ms "
        f"(budget 1000 ms; {r['rects']:,} rectangles)\n"
        f"  first draw {r['first_draw_at_ms']:.0f} ms after navigation (the transfer included: Playwright's "
        "interception hands large bodies over slowly)\n"
        f"  redraw on zoom: median {r['redraw_median_ms']:.1f} ms, worst {r['redraw_max_ms']:.1f} ms over {zooms} zooms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--rebalances", type=int, default=100)
    parser.add_argument("--partitions-per-member", type=int, default=2)
    parser.add_argument("--style", choices=("cooperative", "eager", "both"), default="both")
    parser.add_argument("--zooms", type=int, default=20)
    args = parser.parse_args()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise SystemExit("Playwright for Python is missing: pip install -e '.[dev]'") from None
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"no {CHROMIUM}: apt-get install -y --no-install-recommends chromium")
    styles = ("cooperative", "eager") if args.style == "both" else (args.style,)
    with tempfile.TemporaryDirectory(prefix="bench-dashboard-") as tmp:
        proc, url = start_server(Path(tmp))
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
                try:
                    for style in styles:
                        docs = history(args.members, args.rebalances, args.partitions_per_member, style)
                        size = len(json.dumps(docs["timeline"])) / 1e6
                        print(report(style, measure(browser, url, docs, args.zooms), size, args.zooms))
                finally:
                    browser.close()
        finally:
            proc.kill()
            proc.wait(10)


if __name__ == "__main__":
    main()
