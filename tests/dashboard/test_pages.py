"""The dashboard in a real headless Chromium against a real ``regroup serve --http-port 0`` with real clients:
a classic group of confluent-kafka members (cooperative-sticky), a classic group of kafka-python members (range)
and a KIP-848 group of confluent-kafka members (``group.protocol=consumer``), each grown from one member to two
so that its history holds rebalances. The pages must show what the JSON API says (ids, types, states, members,
the timeline's intervals and rebalances, drawn), follow the groups live without a reload, and log nothing to the
console."""

from __future__ import annotations

import contextlib
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.clients import kip848
from tests.clients.harness import Inspector, Ledger, Member, batch, eventually, produce
from tests.dashboard.conftest import Watched, get_json, get_status, http_url
from tests.server.conftest import ServerProcess, free_port, served

TOPIC = "dashboard"
PARTITIONS = 6
SETTLE_S = 60.0  # a deadline: a passing run waits only until the groups are where the test wants them
PAGE_S = 20.0  # a page shows what the API says within this (events, else its 5 s refresh)


@dataclass(frozen=True)
class Expected:
    group_id: str
    type: str
    #: the classic group's selected protocol, or the consumer group's server-side assignor
    protocol: str


CLASSIC = Expected("dash-classic", "classic", "cooperative-sticky")
KAFKA_PYTHON = Expected("dash-kafka-python", "classic", "range")
CONSUMER = Expected("dash-848", "consumer", "uniform")
GROUPS = (CLASSIC, KAFKA_PYTHON, CONSUMER)


@dataclass
class Stack:
    proc: ServerProcess
    url: str  # the console's base URL
    bootstrap: str

    def api(self, path: str) -> Any:
        return get_json(self.url, path)

    def group(self, group_id: str) -> dict[str, Any] | None:
        return next((g for g in self.api("/api/groups")["groups"] if g["group_id"] == group_id), None)

    def wait_group(self, group_id: str, members: int, state: str = "Stable") -> dict[str, Any]:
        def settled() -> dict[str, Any] | None:
            g = self.group(group_id)
            return g if g is not None and g["members"] == members and g["state"] == state else None

        return eventually(settled, SETTLE_S, f"{group_id} {state} with {members} members", interval=0.1)


def quoted(group_id: str) -> str:
    return urllib.parse.quote(group_id, safe="")


class Members:
    """Group members of any kind, stopped (they leave their groups) when the block ends."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.threads: list[Member | kip848.Owner] = []
        self.book = kip848.Book()
        self.ledger = Ledger()

    def start(self, group: Expected, name: str) -> Member | kip848.Owner:
        thread: Member | kip848.Owner
        if group.type == "consumer":
            thread = kip848.Owner(self.book, self.stack.bootstrap, TOPIC, group.group_id, name, protocol="consumer")
        else:
            client = "kafka-python" if group is KAFKA_PYTHON else "confluent-kafka"
            thread = Member(
                self.ledger,
                client,
                name,
                bootstrap=self.stack.bootstrap,
                topic=TOPIC,
                group=group.group_id,
                strategy=group.protocol,
            )
        thread.start()
        self.threads.append(thread)
        return thread

    def stop(self, thread: Member | kip848.Owner) -> None:
        self.threads.remove(thread)
        thread.stop()

    def stop_all(self) -> None:
        while self.threads:
            self.stop(self.threads[-1])


@contextlib.contextmanager
def members_of(stack: Stack) -> Iterator[Members]:
    members = Members(stack)
    try:
        yield members
    finally:
        members.stop_all()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    directory = tmp_path_factory.mktemp("dashboard")
    with served(directory, "--http-port", "0", *kip848.SERVER_ARGS) as proc:
        bootstrap = f"127.0.0.1:{proc.port}"
        Inspector(bootstrap, TOPIC, PARTITIONS).create_topic()
        produce("confluent-kafka", bootstrap, TOPIC, batch("before", 60, PARTITIONS))
        yield Stack(proc, http_url(proc), bootstrap)


@pytest.fixture(scope="module")
def groups(stack: Stack) -> Iterator[Members]:
    """The three groups, each grown from one member to two (two rebalances at least), running for the module."""
    with members_of(stack) as members:
        for group in GROUPS:
            members.start(group, f"{group.group_id}-a")
        for group in GROUPS:
            stack.wait_group(group.group_id, 1)
        for group in GROUPS:
            members.start(group, f"{group.group_id}-b")
        for group in GROUPS:
            stack.wait_group(group.group_id, 2)
        yield members


def cells(watched: Watched, selector: str) -> list[str]:
    return [str(t).strip() for t in watched.page.locator(selector).all_inner_texts()]


# ------------------------------------------------------------------------------------------------- tests
def test_groups_page_lists_every_group(stack: Stack, groups: Members, open_page: Callable[[str], Watched]) -> None:
    page = open_page(stack.url + "/")
    for group in GROUPS:
        page.wait_for(
            """(id) => { const row = [...document.querySelectorAll('tr[data-group]')].find(r => r.dataset.group === id);
                         return row && row.dataset.members === '2' && row.dataset.state === 'Stable'; }""",
            group.group_id,
            PAGE_S,
        )
    listed = {g["group_id"]: g for g in stack.api("/api/groups")["groups"]}
    rows = page.page.locator("#groups-table tbody tr")
    assert rows.count() == len(listed) and {g.group_id for g in GROUPS} <= set(listed)
    for group in GROUPS:
        api = listed[group.group_id]
        assert (api["type"], api["state"], api["members"]) == (group.type, "Stable", 2)
        assert (api["protocol"] if group.type == "classic" else api["assignor"]) == group.protocol
        row = page.page.locator(f'#groups-table tr[data-group="{group.group_id}"]')
        texts = cells(page, f'#groups-table tr[data-group="{group.group_id}"] td')
        assert texts[:5] == [group.group_id, group.type, "Stable", group.protocol, "2"], texts
        # (the lag moves while the members consume: its presence and form, not its value)
        assert texts[5] == "—" if api["lag"] is None else texts[5].replace(",", "").isdigit(), texts
        href = row.locator("a").get_attribute("href")
        assert href == f"/groups/{quoted(group.group_id)}"
    # each row leads to its group's page
    page.page.locator(f'#groups-table tr[data-group="{CONSUMER.group_id}"] a').click()
    page.wait_for("() => document.querySelector('#timeline-canvas')?.dataset.drawn", None, PAGE_S)
    assert page.page.locator("#group-id").inner_text() == CONSUMER.group_id


@pytest.mark.parametrize("group", GROUPS, ids=[g.group_id for g in GROUPS])
def test_group_page_shows_the_group_and_draws_its_timeline(
    stack: Stack, groups: Members, open_page: Callable[[str], Watched], group: Expected
) -> None:
    page = open_page(f"{stack.url}/groups/{quoted(group.group_id)}")
    path = f"/api/groups/{quoted(group.group_id)}"

    def in_step() -> tuple[dict[str, Any], dict[str, Any], dict[str, str]] | None:
        detail, timeline = stack.api(path), stack.api(path + "/timeline")
        shown = page.page.evaluate(
            """() => { const c = document.querySelector('#timeline-canvas'), m = document.querySelector('main');
                       return c && c.dataset.drawn ? {...c.dataset, members: m.dataset.members, state: m.dataset.state}
                                                   : null; }"""
        )
        if not shown or shown["state"] != detail["state"] or int(shown["members"]) != len(detail["members"]):
            return None
        if (int(shown["intervals"]), int(shown["rebalances"])) != (
            len(timeline["ownership"]),
            len(timeline["rebalances"]),
        ):
            return None
        return detail, timeline, shown

    detail, timeline, shown = eventually(in_step, PAGE_S, "the page in step with the API", interval=0.2)
    assert detail["type"] == group.type and detail["state"] == "Stable" and len(detail["members"]) == 2
    # the history: the first member's join and the second's, at least; every partition owned by someone
    assert len(timeline["rebalances"]) >= 2, timeline["rebalances"]
    assert {(o["topic"], o["partition"]) for o in timeline["ownership"]} == {(TOPIC, p) for p in range(PARTITIONS)}
    assert int(shown["bands"]) >= 1 and int(shown["rects"]) >= 2, shown

    # the header
    facts = {f: page.page.locator(f'dd[data-fact="{f}"]').inner_text() for f in ("type", "state", "members")}
    assert facts == {"type": group.type, "state": "Stable", "members": "2"}
    if group.type == "classic":
        assert page.page.locator('dd[data-fact="generation"]').inner_text() == str(detail["generation"])
        assert page.page.locator('dd[data-fact="protocol"]').inner_text() == group.protocol
    else:
        assert page.page.locator('dd[data-fact="epoch"]').inner_text() == str(detail["epoch"])
        assert page.page.locator('dd[data-fact="assignor"]').inner_text() == group.protocol

    # the members and their assignments: every partition of the topic, once
    shown_members = page.page.locator("#members-table tbody tr")
    assert sorted(shown_members.evaluate_all("rows => rows.map(r => r.dataset.member)")) == sorted(
        m["member_id"] for m in detail["members"]
    )
    table = page.page.locator("#members-table").inner_text()
    for m in detail["members"]:
        assert m["client_id"] in table
    assigned = sorted(p for m in detail["members"] for p in m["assignment"].get(TOPIC, []))
    assert assigned == list(range(PARTITIONS))

    # lag per partition, as the API has it
    lag = detail["lag"] or {}
    lag_rows = page.page.locator("#lag-table tbody tr").count() if lag else 0
    assert lag_rows == sum(len(by) for by in lag.values())

    # the canvas holds ownership bars and rebalance marks (pixels of their colours)
    painted = page.page.evaluate(
        """() => { const c = document.querySelector('#timeline-canvas');
                   const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                   let bars = 0, marks = 0;
                   for (let i = 0; i < px.length; i += 4) {
                     const [r, g, b, a] = [px[i], px[i + 1], px[i + 2], px[i + 3]];
                     if (a > 200 && Math.abs(r - 59) < 30 && Math.abs(g - 130) < 30 && Math.abs(b - 196) < 30) bars++;
                     if (a > 100 && r > 150 && g > 90 && g < 190 && b < 90) marks++;
                   }
                   return {bars, marks, dpr: window.devicePixelRatio, width: c.width, css: c.clientWidth}; }"""
    )
    assert painted["bars"] > 100 and painted["marks"] > 0, painted
    assert painted["width"] == round(painted["css"] * painted["dpr"]), painted  # devicePixelRatio-sharp

    # zoom (wheel) narrows the window around the pointer, a drag moves it, Fit shows everything again
    canvas = page.page.locator("#timeline-canvas")

    def window() -> tuple[int, int]:
        t0, t1 = (canvas.get_attribute("data-view") or "").split("-")
        return int(t0), int(t1)

    box = canvas.bounding_box()
    assert box is not None
    before = window()
    page.page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] * 0.6)
    page.page.mouse.wheel(0, -400)
    page.wait_for("(v) => document.querySelector('#timeline-canvas').dataset.view !== v", f"{before[0]}-{before[1]}")
    zoomed = window()
    assert zoomed[1] - zoomed[0] < (before[1] - before[0]) * 0.75, (before, zoomed)
    page.page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.7)
    page.page.mouse.down()
    page.page.mouse.move(box["x"] + box["width"] * 0.7, box["y"] + box["height"] * 0.7, steps=5)
    page.page.mouse.up()
    page.wait_for("(v) => document.querySelector('#timeline-canvas').dataset.view !== v", f"{zoomed[0]}-{zoomed[1]}")
    panned = window()
    assert panned[0] < zoomed[0] and abs((panned[1] - panned[0]) - (zoomed[1] - zoomed[0])) <= 2, (zoomed, panned)
    assert page.page.locator('[data-act="live"]').get_attribute("aria-pressed") == "false"
    page.page.locator('[data-act="fit"]').click()
    page.wait_for("(v) => document.querySelector('#timeline-canvas').dataset.view !== v", f"{panned[0]}-{panned[1]}")
    fitted = window()
    first = min(min(r["start_ms"] for r in timeline["rebalances"]), min(o["from_ms"] for o in timeline["ownership"]))
    assert fitted[0] <= first < fitted[1], (fitted, first)

    # hovering a rebalance over the first member's row tells its reason, and what that member held then
    page.page.locator('[data-act="live"]').click()  # a still window
    page.wait_for("() => document.querySelector('[data-act=live]').getAttribute('aria-pressed') === 'false'")
    t0, t1 = window()
    left, width, rows_top, row_h = (float(v) for v in (canvas.get_attribute("data-plot") or "").split(","))
    last = timeline["rebalances"][-1]
    middle = (last["start_ms"] + (last["end_ms"] or last["start_ms"])) / 2
    page.page.mouse.move(box["x"] + left + (middle - t0) / (t1 - t0) * width, box["y"] + rows_top + row_h / 2)
    tip = page.page.locator(".tip")
    tip.wait_for(state="visible")
    text = tip.inner_text()
    number = last["generation"] if group.type == "classic" else last["epoch"]
    assert f"{'generation' if group.type == 'classic' else 'epoch'} {number}" in text, text
    assert f"reason: {last['reason']}" in text and "owns" in text, text


def test_what_if_replays_the_visible_window(stack: Stack, groups: Members, open_page: Callable[[str], Watched]) -> None:
    """The "What if…" control replays the visible window of the timeline (all of it after Fit) and shows the
    comparison: the recorded run first, then each alternative, as the replay's API document has them, with the
    report linked."""
    page = open_page(f"{stack.url}/groups/{quoted(CLASSIC.group_id)}")
    page.wait_for("() => document.querySelector('#timeline-canvas')?.dataset.drawn", None, PAGE_S)
    page.page.locator('[data-act="fit"]').click()
    page.page.locator("#whatif-run").click()
    # "running…" while it runs (the button disabled), then the comparison
    page.wait_for(
        """() => document.querySelector('#whatif-status').textContent === 'running…'
                 && document.querySelector('#whatif-run').disabled
                 || document.querySelector('#whatif-table') !== null""",
        None,
        PAGE_S,
    )
    page.wait_for("() => document.querySelector('#whatif-table tbody tr') !== null", None, 60.0)
    assert page.page.locator("#whatif-status").get_attribute("data-state") == "done"
    assert not page.page.locator("#whatif-run").is_disabled()
    href = page.page.locator("#whatif-report").get_attribute("href") or ""
    assert href.startswith(f"/api/groups/{quoted(CLASSIC.group_id)}/replays/") and href.endswith("/report"), href
    doc = stack.api(href.removesuffix("/report"))
    assert doc["status"] == "done", doc
    result = doc["result"]
    rows = page.page.locator("#whatif-table tbody tr")
    assert rows.count() == 1 + len(result["alternatives"]) and len(result["alternatives"]) >= 5
    first = cells(page, "#whatif-table tbody tr:first-child td")
    recorded = result["recorded"]
    assert first[0] == recorded["strategy"] == "cooperative-sticky (recorded)", first
    assert first[2:4] == [str(recorded["rebalances"]), str(recorded["moved"])], first
    second = cells(page, "#whatif-table tbody tr:nth-child(2) td")
    alternative = result["alternatives"][0]
    assert second[:2] == [alternative["strategy"], alternative["protocol"]], second
    delta = alternative["versus_recorded"]["rebalances"]
    assert second[6] == ("0" if delta == 0 else f"{'+' if delta > 0 else '−'}{abs(delta)}"), second
    assert get_status(stack.url, href) == 200


def test_a_group_appears_grows_and_empties_live(stack: Stack, open_page: Callable[[str], Watched]) -> None:
    """The page of a group that does not exist yet says so, then shows it without a reload as members join
    (the id has a slash: URL-encoded as %2F), and shows it empty once they leave; the list page follows."""
    live = Expected("dash/live-1", "consumer", "uniform")
    group_page = open_page(f"{stack.url}/groups/{quoted(live.group_id)}")
    list_page = open_page(stack.url + "/")
    group_page.wait_for("() => document.querySelector('main').dataset.unknown === 'true'", None, PAGE_S)
    assert "There is no group" in group_page.page.locator("#message").inner_text()
    assert get_status(stack.url, f"/api/groups/{quoted(live.group_id)}") == 404

    members_shown = "(n) => document.querySelectorAll('#members-table tbody tr').length === n"
    with members_of(stack) as members:
        members.start(live, "live-a")
        stack.wait_group(live.group_id, 1)
        group_page.wait_for(members_shown, 1, PAGE_S)
        second = members.start(live, "live-b")
        stack.wait_group(live.group_id, 2)
        group_page.wait_for(members_shown, 2, PAGE_S)
        assert "live-b" in group_page.page.locator("#members-table").inner_text()
        group_page.wait_for(
            """() => { const c = document.querySelector('#timeline-canvas').dataset;
                       return Number(c.rebalances) >= 2 && Number(c.members) >= 2; }""",
            None,
            PAGE_S,
        )
        list_page.wait_for(
            """(id) => [...document.querySelectorAll('tr[data-group]')].some(
                 r => r.dataset.group === id && r.dataset.members === '2')""",
            live.group_id,
            PAGE_S,
        )
        members.stop(second)
        group_page.wait_for(members_shown, 1, PAGE_S)
        members.stop_all()
    stack.wait_group(live.group_id, 0, "Empty")
    group_page.wait_for("() => document.querySelector('#no-members') !== null", None, PAGE_S)
    assert group_page.page.locator('dd[data-fact="state"]').inner_text() == "Empty"
    assert group_page.page.evaluate("() => document.querySelector('#conn').dataset.state") == "live"


def test_the_page_says_disconnected_and_reconnects(tmp_path: Path, open_page: Callable[[str], Watched]) -> None:
    http_port = free_port()
    with served(tmp_path, "--http-port", str(http_port)) as proc:
        url = http_url(proc)
        page = open_page(url + "/")
        page.wait_for("() => document.querySelector('#conn').dataset.state === 'live'", None, PAGE_S)
        page.wait_for("() => document.querySelector('#empty') !== null", None, PAGE_S)  # no groups yet
        # while the server is away the browser itself logs each failed request: expected here, and only these
        page.allow(r"net::ERR_(CONNECTION_REFUSED|CONNECTION_RESET|EMPTY_RESPONSE|INCOMPLETE_CHUNKED_ENCODING)")
        proc.kill()
        page.wait_for("() => document.querySelector('#conn').dataset.state === 'disconnected'", None, PAGE_S)
        assert "disconnected" in page.page.locator("#conn").inner_text()
        proc.start()  # same ports, same data
        page.wait_for("() => document.querySelector('#conn').dataset.state === 'live'", None, PAGE_S)
