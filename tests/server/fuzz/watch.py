"""What the fuzzer watches on the server: its process (alive? resident memory from ``/proc/PID/status``)
and its log (new ``ERROR`` records and tracebacks, grouped into records and reduced to a signature: the
logger and message with numbers blanked, the exception, and the innermost source line of the traceback)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_RECORD_START = re.compile(rb"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3} ([A-Z]+) (\S+) ?(.*)$")
_TAG = re.compile(r"\bfz-([0-9a-f]{8})\b")
_FILE_LINE = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)')
_NUMBERS = re.compile(r"(?<!api key )\b\d+")
#: the first line of a report the runtime writes to stderr outside the logging module (a native abort)
_NATIVE_START = re.compile(
    rb"^(memory allocation of|thread '|Fatal Python error|fatal runtime error|Segmentation fault)"
)


def rss_bytes(pid: int) -> int | None:
    """The resident set size of process ``pid``, or None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    match = re.search(r"^VmRSS:\s+(\d+) kB", text, re.MULTILINE)
    return int(match.group(1)) * 1024 if match else None


@dataclass(frozen=True, slots=True)
class LogRecord:
    level: str
    logger: str
    message: str
    #: the lines after the first (a traceback, a native crash report)
    rest: tuple[str, ...]

    @property
    def has_traceback(self) -> bool:
        return any(line.startswith("Traceback") for line in self.rest)

    @property
    def is_finding(self) -> bool:
        return self.level in ("ERROR", "CRITICAL") or self.has_traceback

    @property
    def tag(self) -> int | None:
        """The frame number the fuzzer wrote into the client id, when the message names it."""
        match = _TAG.search(self.message)
        return int(match.group(1), 16) if match else None

    def signature(self) -> str:
        """What distinguishes this failure from others (not which request or connection hit it)."""
        message = _NUMBERS.sub("N", re.sub(r"\bfrom (\S+) failed$", "from * failed", self.message))
        message = re.sub(r"(api key \d+ v)\d+", r"\1N", message)
        if self.level == "STDERR":
            return f"native: {message}"
        message = re.sub(r"from \S+:N\b", "from HOST", message)
        where, exception = "", ""
        for line in self.rest:
            match = _FILE_LINE.match(line)
            if match:
                where = f"{Path(match.group(1)).name}:{match.group(2)} {match.group(3)}"
            elif line and not line.startswith((" ", "Traceback", "During handling", "The above")):
                exception = line.strip()
        parts = [f"{self.level} {self.logger}: {message}"]
        if exception:
            parts.append(exception[:200])
        if where:
            parts.append(f"at {where}")
        return " | ".join(parts)


class LogWatcher:
    """Reads what the server appended to its log since the last call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = path.stat().st_size if path.exists() else 0
        self._pending = b""

    def new_records(self) -> list[LogRecord]:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        data = self._pending + data
        cut = data.rfind(b"\n") + 1
        self._pending = data[cut:]
        return parse_records(data[:cut])

    def tail(self) -> list[LogRecord]:
        """Whatever is left, incomplete last line included (after the process died)."""
        records = self.new_records()
        if self._pending:
            records += parse_records(self._pending + b"\n")
            self._pending = b""
        return records


def parse_records(data: bytes) -> list[LogRecord]:
    records: list[LogRecord] = []
    head: tuple[str, str, str] | None = None
    rest: list[str] = []
    for raw in data.splitlines():
        match = _RECORD_START.match(raw)
        if match is None and _NATIVE_START.match(raw):
            if head is not None or rest:
                records.append(_record(head, rest))
            head, rest = None, []
        if match:
            if head is not None or rest:
                records.append(_record(head, rest))
            head = (match.group(1).decode(), match.group(2).decode(), match.group(3).decode("utf-8", "replace"))
            rest = []
        else:
            rest.append(raw.decode("utf-8", "replace"))
    if head is not None or rest:
        records.append(_record(head, rest))
    return records


def _record(head: tuple[str, str, str] | None, rest: list[str]) -> LogRecord:
    if head is None:  # lines written outside the logging module (a native crash report on stderr)
        first = rest[0] if rest else ""
        return LogRecord("STDERR", "-", first, tuple(rest[1:]))
    return LogRecord(head[0], head[1], head[2], tuple(rest))
