"""The strategy registry: built-ins by name, plug-ins through the ``regroup.assignors`` entry point group."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from regroup.assignors import registry
from regroup.assignors.base import PartitionAssignor
from regroup.assignors.spec import Assignment, GroupSpec, MemberSubscription

BUILTINS = {
    "range",
    "roundrobin",
    "sticky",
    "cooperative-sticky",
    "optimal",
    "uniform",
    "server-range",
    "redundant",
    "copartitioned",
    "consistent-hash",
}

PLUGIN_SOURCE = '''
from regroup.assignors.base import PartitionAssignor


class EverythingToFirst(PartitionAssignor):
    """A deliberately silly strategy: the first member in id order gets every partition it subscribes to."""

    name = "everything-to-first"

    def assign(self, spec):
        members = sorted(spec.members)
        out = {m: {} for m in members}
        if members:
            first = spec.members[members[0]]
            out[members[0]] = {t: list(range(spec.topics[t])) for t in first.topics if spec.topics.get(t)}
        return out
'''


@pytest.fixture
def installed_plugin(tmp_path: Path) -> Iterator[None]:
    """Install a plug-in the way pip would: a module plus a dist-info with an entry_points.txt."""
    (tmp_path / "regroup_test_plugin.py").write_text(PLUGIN_SOURCE)
    dist = tmp_path / "regroup_test_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: regroup-test-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[regroup.assignors]\neverything-to-first = regroup_test_plugin:EverythingToFirst\n"
        "broken = regroup_test_plugin_missing:Nothing\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        yield
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("regroup_test_plugin", None)


def test_every_builtin_is_registered_and_named_consistently() -> None:
    assert set(registry.available()) >= BUILTINS
    for name in BUILTINS:
        assert registry.get(name).name == name


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(registry.UnknownAssignorError) as info:
        registry.get("nope")
    assert "roundrobin" in str(info.value)


def test_entry_point_plugin_is_found_and_runs(installed_plugin: None) -> None:
    assert "everything-to-first" in registry.available()
    assignor = registry.get("everything-to-first")
    spec = GroupSpec(topics={"t": 2}, members={"b": MemberSubscription.of(["t"]), "a": MemberSubscription.of(["t"])})
    assert assignor.assign(spec) == {"a": {"t": [0, 1]}, "b": {}}


def test_broken_plugin_fails_alone_with_a_clear_error(installed_plugin: None) -> None:
    with pytest.raises(registry.AssignorLoadError, match="broken"):
        registry.get("broken")
    assert registry.get("range").name == "range"


def test_register_in_code() -> None:
    class Nobody(PartitionAssignor):
        name = "nobody"

        def assign(self, spec: GroupSpec) -> Assignment:
            return {m: {} for m in spec.members}

    registry.register("nobody", Nobody)
    assert registry.get("nobody").assign(GroupSpec(topics={}, members={"x": MemberSubscription.of([])})) == {"x": {}}
