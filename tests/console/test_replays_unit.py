"""``server/replays.py`` in process, with a stand-in for ``python -m regroup lab replay`` (a script that writes
the lab's files, fails with one line, or hangs): the window's rows handed to the child, the limit on replays
running at once, the bound on replays kept, a failure's one line, and the children killed at close."""

from __future__ import annotations

import asyncio
import json
import stat
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import orjson
import pytest

from regroup.console.view import ReplayRefused, ReplayRequest
from regroup.server.replays import Replays

CHILD = f"""#!{sys.executable}
import json, pathlib, sys, time
args = sys.argv[1:]
assert args[:4] == ["-m", "regroup", "lab", "replay"] and "--no-spark" in args, args
group = next(a for a in args if a.startswith("--group=")).removeprefix("--group=")
out = pathlib.Path(args[args.index("--out") + 1])
if group == "slow":
    time.sleep(60)
if group == "bad":
    print("regroup lab: replay: starting")
    print("regroup: events.jsonl: group bad: empty window: no member", file=sys.stderr)
    sys.exit(2)
out.mkdir(parents=True)
rows = pathlib.Path(args[4]).read_text().splitlines()
(out / "replay.json").write_text(json.dumps({{"rows": len(rows), "args": args}}))
(out / "report.html").write_text("<html>report</html>")
"""


def row(t: int, group: str) -> dict[str, object]:
    return {"seq": t, "t": t, "type": "member_state", "member": "m", "member_id": "m-1", "generation": None,
            "api": None, "request_id": None, "error": None, "state": "Joined", "topic": None, "partition": None,
            "value": None, "detail": f"group={group}"}  # fmt: skip


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, list[Path]]:
    child = tmp_path / "child"
    child.write_text(CHILD)
    child.chmod(child.stat().st_mode | stat.S_IXUSR)
    segment = tmp_path / "history" / "000000000001.jsonl"
    segment.parent.mkdir()
    rows = [row(t, g) for t in range(1, 11) for g in ("g", "slow", "bad", "other group", "--g")]
    segment.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows) + b'{"torn": ')
    return child, [segment, tmp_path / "history" / "gone.jsonl"]


def request(group: str, until: int = 5) -> ReplayRequest:
    return ReplayRequest(group_id=group, since_ms=2, until_ms=until)


def listed(segments: list[Path]) -> Callable[[], Awaitable[list[Path]]]:
    async def settled() -> list[Path]:
        return segments

    return settled


async def finished(replays: Replays, group: str, replay_id: str) -> dict[str, object]:
    for _ in range(400):
        state = await replays.state(group, replay_id)
        assert state is not None
        if state.status != "running":
            return {"status": state.status, "error": state.error, "result": state.result}
        await asyncio.sleep(0.05)
    raise AssertionError("still running")


def test_a_replay_gets_its_window_and_its_result(tmp_path: Path, setup: tuple[Path, list[Path]]) -> None:
    child, segments = setup

    async def scenario() -> None:
        replays = Replays(tmp_path, listed(segments), python=str(child))
        replays.open()
        started = await replays.start(request("g", until=7))
        assert started.status == "running" and started.result is None
        done = await finished(replays, "g", started.replay_id)
        assert done["status"] == "done" and done["error"] is None, done
        result = done["result"]
        assert isinstance(result, dict) and result["rows"] == 7  # the group's rows up to until_ms, no other's
        args = result["args"]
        assert args[args.index("--since-ms") + 1] == "2" and args[args.index("--until-ms") + 1] == "7"
        assert "--group=g" in args
        assert await replays.report("g", started.replay_id) == b"<html>report</html>"
        assert await replays.state("other group", started.replay_id) is None
        assert await replays.report("other group", started.replay_id) is None

        failed = await replays.start(request("bad"))
        done = await finished(replays, "bad", failed.replay_id)
        assert done == {"status": "failed", "result": None,
                        "error": "regroup: events.jsonl: group bad: empty window: no member"}  # fmt: skip
        assert await replays.report("bad", failed.replay_id) is None

        dashed = await replays.start(request("--g"))  # (a group id the command line could take for an option)
        assert (await finished(replays, "--g", dashed.replay_id))["status"] == "done"

        with pytest.raises(ReplayRefused) as refused:
            await replays.start(request("nobody"))
        assert refused.value.status == 400
        kept = (started.replay_id, failed.replay_id, dashed.replay_id)
        assert not [p for p in replays.directory.iterdir() if p.name not in kept]
        await replays.close()

    asyncio.run(scenario())


def test_running_and_kept_replays_are_bounded(tmp_path: Path, setup: tuple[Path, list[Path]]) -> None:
    child, segments = setup

    async def scenario() -> None:
        replays = Replays(tmp_path, listed(segments), python=str(child), max_running=1, max_kept=2)
        slow = await replays.start(request("slow"))
        with pytest.raises(ReplayRefused) as refused:
            await replays.start(request("g"))
        assert refused.value.status == 429
        await replays.close()  # kills the slow one
        state = await replays.state("slow", slow.replay_id)
        assert state is not None and (state.status, state.error) == ("failed", "the server stopped")
        with pytest.raises(ReplayRefused) as refused:
            await replays.start(request("g"))
        assert refused.value.status == 503

        replays = Replays(tmp_path, listed(segments), python=str(child), max_running=1, max_kept=2)
        replays.open()  # (the previous process's directories removed)
        assert not replays.directory.exists()
        ids = []
        for _ in range(3):
            started = await replays.start(request("g"))
            await finished(replays, "g", started.replay_id)
            ids.append(started.replay_id)
        assert await replays.state("g", ids[0]) is None
        assert sorted(p.name for p in replays.directory.iterdir()) == sorted(ids[1:])
        assert json.loads((replays.directory / ids[2] / "out" / "replay.json").read_text())["rows"] == 5
        await replays.close()

    asyncio.run(scenario())
