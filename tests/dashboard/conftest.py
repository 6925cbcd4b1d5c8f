"""The dashboard's tests drive a real headless Chromium (Debian's ``chromium`` at ``/usr/bin/chromium``) through
Playwright against a real ``regroup serve --http-port 0`` (the ``served`` process of ``tests/server/conftest.py``,
its console's URL read from the ``serving ... http=URL`` line of its log).

* ``browser``: one Chromium per test module (not per session: Playwright's synchronous API runs an event loop
  in the main thread while it is open, and every later test calling ``asyncio.run`` would find it running).
  Playwright missing fails every test with how to install it; Chromium missing fails the same way where it can
  be installed (root and apt-get: ``make test`` installs it) and skips where it cannot.
* ``open_page(url)``: a fresh browser context and page whose console errors and warnings and uncaught exceptions
  are collected; at teardown each page's screenshot is kept in ``test-output/dashboard/<test>/`` and the test fails if
  any page logged one (``allow`` on the returned ``Watched`` lists messages a test expects, e.g. a server it
  stopped on purpose).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import ServerProcess

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
INSTALL_PLAYWRIGHT = "pip install -e '.[dev]' (or `make test`, which installs the dev extra)"
INSTALL_CHROMIUM = "apt-get install -y --no-install-recommends chromium (as root; `make test` does it)"
URL_DEADLINE_S = 30.0
_HTTP_URL = re.compile(r" http=(http://\S+?)/? ")


def http_url(proc: ServerProcess) -> str:
    """The console's base URL (no trailing slash) as the server's start line reports it."""
    deadline = time.monotonic() + URL_DEADLINE_S
    while time.monotonic() < deadline:
        match = _HTTP_URL.search(proc.log())
        if match:
            return match.group(1).rstrip("/")
        time.sleep(0.05)
    raise AssertionError(f"regroup serve reported no http=URL in its log:\n{proc.log()[-3000:]}")


def get_json(base: str, path: str) -> Any:
    with urllib.request.urlopen(base + path, timeout=10) as response:
        assert response.headers["Content-Type"].startswith("application/json"), response.headers
        return json.loads(response.read())


def get_status(base: str, path: str) -> int:
    try:
        with urllib.request.urlopen(base + path, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def _chromium_missing() -> None:
    """Fail (installable here) or skip (not installable here) with one line saying what is missing."""
    installable = hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get") is not None
    message = f"Chromium is missing: no {CHROMIUM}; install it with {INSTALL_CHROMIUM}"
    if installable:
        pytest.fail(message, pytrace=False)
    pytest.skip(f"{message}; this machine cannot (not root, or no apt-get)")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail(f"Playwright for Python is missing: {INSTALL_PLAYWRIGHT}", pytrace=False)
    if not os.path.exists(CHROMIUM):
        _chromium_missing()
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@dataclass
class Watched:
    """One page and what its console said."""

    page: Any
    name: str
    problems: list[str] = field(default_factory=list)
    allowed: list[re.Pattern[str]] = field(default_factory=list)

    def allow(self, pattern: str) -> None:
        self.allowed.append(re.compile(pattern))

    def unexpected(self) -> list[str]:
        return [p for p in self.problems if not any(a.search(p) for a in self.allowed)]

    def wait_for(self, expression: str, arg: Any = None, timeout_s: float = 30.0) -> Any:
        """Wait until the JavaScript ``expression`` (a function of ``arg``) returns something truthy; returns it."""
        handle = self.page.wait_for_function(expression, arg=arg, timeout=timeout_s * 1000)
        return handle.json_value()


#: where each test's screenshots are kept (``REGROUP_TEST_OUTPUT`` overrides; ignored by git)
OUTPUT = Path(os.environ.get("REGROUP_TEST_OUTPUT", Path(__file__).resolve().parents[2] / "test-output"))


@pytest.fixture
def open_page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Callable[[str], Watched]]:
    opened: list[tuple[Any, Watched]] = []
    shots = OUTPUT / "dashboard" / re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    shutil.rmtree(shots, ignore_errors=True)

    def open_(url: str) -> Watched:
        context = browser.new_context(viewport={"width": 1280, "height": 900}, device_scale_factor=2)
        page = context.new_page()
        watched = Watched(page, f"page{len(opened)}")
        page.on(
            "console",
            lambda msg: (
                watched.problems.append(f"console.{msg.type}: {msg.text} @ {msg.location}")
                if msg.type in ("error", "warning", "assert")
                else None
            ),
        )
        page.on("pageerror", lambda exc: watched.problems.append(f"uncaught: {exc}"))
        opened.append((context, watched))
        page.goto(url)
        return watched

    yield open_
    problems: list[str] = []
    for context, watched in opened:
        try:
            shots.mkdir(parents=True, exist_ok=True)
            watched.page.screenshot(path=str(shots / f"{watched.name}.png"), full_page=True)
        finally:
            context.close()
        problems += [f"{watched.name}: {p}" for p in watched.unexpected()]
    assert not problems, "the dashboard logged errors or warnings:\n" + "\n".join(problems)
