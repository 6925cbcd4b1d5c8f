"""The documentation in step with the commands it shows.

* Every fenced block preceded by a marker line ``<!-- output of: regroup ARGS -->`` in README.md or docs/*.md
  is what ``regroup ARGS`` prints now (a ``json`` block is compared as JSON, so its layout is free; any other
  block line by line). After a change of output, ``python -m tests.unit.test_docs_examples`` rewrites the
  blocks from the commands.
* The README's command list names every command and subcommand the parser defines, and nothing else.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from regroup.cli.main import _build_parser

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!-- output of: (regroup .+?) -->$")
WIDTH = 110


@dataclass(frozen=True, slots=True)
class Example:
    path: Path
    command: str
    language: str
    #: the block's lines (between the fences) are ``lines[start:end]`` of the file
    start: int
    end: int
    text: str


def examples(path: Path) -> list[Example]:
    """The marked examples of one Markdown file; a marker not followed by a fenced block is an error."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found = []
    for i, line in enumerate(lines):
        marker = MARKER.match(line.strip())
        if marker is None:
            continue
        fence = i + 1
        assert fence < len(lines) and lines[fence].startswith("```"), f"{path.name}:{i + 1}: no block after the marker"
        close = next((j for j in range(fence + 1, len(lines)) if lines[j].startswith("```")), None)
        assert close is not None, f"{path.name}:{fence + 1}: the block is not closed"
        text = "\n".join(lines[fence + 1 : close])
        found.append(Example(path, marker.group(1), lines[fence][3:].strip(), fence + 1, close, text))
    return found


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def all_examples() -> list[Example]:
    return [example for path in documents() for example in examples(path)]


def run(command: str) -> str:
    """What ``command`` (``regroup ...``) prints on stdout; it must succeed."""
    args = shlex.split(command)[1:]
    proc = subprocess.run(
        [sys.executable, "-m", "regroup", *args], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert proc.returncode == 0, f"{command}: exit {proc.returncode}: {proc.stderr}"
    return proc.stdout


def layout(value: Any, column: int = 0) -> str:
    """JSON as the docs show it, starting at ``column``: compact where it fits in ``WIDTH`` columns, else items
    filled onto lines aligned after the opening bracket, an item too long for a line laid out the same way."""
    compact = json.dumps(value)
    if column + len(compact) <= WIDTH or not isinstance(value, (dict, list)) or not value:
        return compact
    inner = column + 1
    if isinstance(value, dict):
        parts = [(json.dumps(key) + ": ", item) for key, item in value.items()]
        opening, closing = "{", "}"
    else:
        parts = [("", item) for item in value]
        opening, closing = "[", "]"
    out, position, fresh = opening, inner, True  # ``fresh``: nothing on the current line yet
    for prefix, item in parts:
        text = prefix + json.dumps(item)
        if not fresh:
            if position + 2 + len(text) + 1 > WIDTH:  # (+1: the comma or bracket after it)
                out, position, fresh = out + ",\n" + " " * inner, inner, True
            else:
                out, position = out + ", ", position + 2
        if position + len(text) + 1 <= WIDTH:
            out, position, fresh = out + text, position + len(text), False
            continue
        rendered = prefix + layout(item, position + len(prefix))
        out += rendered
        position, fresh = len(rendered.rsplit("\n", 1)[-1]), False
        if "\n" in rendered:  # the next item starts a line of its own
            out, position, fresh = out + ",\n" + " " * inner, inner, True
    if fresh and out.endswith(",\n" + " " * inner):
        out = out[: -len(",\n" + " " * inner)]
    return out + closing


def expected_block(example: Example, output: str) -> str:
    """The block's text as the command's output gives it."""
    if example.language == "json":
        return layout(json.loads(output))
    return output.rstrip("\n")


def same(example: Example, output: str) -> bool:
    if example.language == "json":
        try:
            shown: Any = json.loads(example.text)
        except json.JSONDecodeError:
            return False
        return bool(shown == json.loads(output))
    return [line.rstrip() for line in example.text.splitlines()] == [line.rstrip() for line in output.splitlines()]


def test_the_docs_have_marked_examples() -> None:
    commands = {e.command for e in all_examples()}
    assert {
        "regroup simulate third-member-joins-cooperative --summary-json",
        "regroup simulate share-member-crashes --summary-json",
    } <= commands


@pytest.mark.parametrize("example", all_examples(), ids=lambda e: f"{e.path.name}:{e.start}")
def test_each_marked_example_is_what_its_command_prints(example: Example) -> None:
    output = run(example.command)
    assert same(example, output), (
        f"{example.path.name}:{example.start}: the block differs from what `{example.command}` prints now "
        f"(`python -m tests.unit.test_docs_examples` rewrites it):\n{expected_block(example, output)}"
    )


# ------------------------------------------------------------------------------------------- README's list
def parser_commands() -> set[str]:
    """``assign``, ``lab sweep``, ...: every command path the parser accepts (a command with subcommands only
    through them)."""

    def walk(parser: argparse.ArgumentParser, prefix: str) -> set[str]:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                return {path for name, sub in action.choices.items() for path in walk(sub, f"{prefix} {name}")}
        return {prefix.strip()}

    return walk(_build_parser(), "")


def readme_commands() -> set[str]:
    """The command paths of the README's command list (the ``sh`` block after "**CLI**")."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("- **CLI**:", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    nested = {path.split()[0] for path in parser_commands() if " " in path}
    found = set()
    for line in block.splitlines():
        words = line.split("#", 1)[0].lstrip("| ").split()
        if len(words) < 2 or words[0] != "regroup":
            continue
        found.add(" ".join(words[1:3]) if words[1] in nested else words[1])
    return found


def test_the_readme_lists_every_command() -> None:
    assert readme_commands() == parser_commands()


# ------------------------------------------------------------------------------------------- regeneration
def regenerate() -> list[str]:
    """Rewrite every marked block from its command; the examples rewritten."""
    changed = []
    for path in documents():
        found = examples(path)
        if not found:
            continue
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        before = len(changed)
        for example in reversed(found):  # later blocks first: earlier line numbers stay valid
            output = run(example.command)
            if same(example, output):
                continue
            lines[example.start : example.end] = [line + "\n" for line in expected_block(example, output).split("\n")]
            changed.append(f"{path.relative_to(ROOT)}:{example.start}: {example.command}")
        if len(changed) > before:
            path.write_text("".join(lines), encoding="utf-8")
    return changed


if __name__ == "__main__":
    for change in regenerate():
        print(f"rewrote {change}")
