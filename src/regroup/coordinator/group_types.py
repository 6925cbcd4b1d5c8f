"""The registered group types: the one place a group's type is looked up (``type_of``). Adding a group type
(share or streams groups, say) means its own package with a ``GroupType`` and one line here."""

from __future__ import annotations

from typing import Final

from regroup.coordinator.classic.group_type import CLASSIC
from regroup.coordinator.consumer.group_type import CONSUMER
from regroup.coordinator.group_type import GroupType
from regroup.coordinator.groups import Group
from regroup.coordinator.share.group_type import SHARE

#: every group type, by the class of its groups
GROUP_TYPES: Final[dict[type, GroupType]] = {kind.group_class: kind for kind in (CLASSIC, CONSUMER, SHARE)}


def type_of(group: Group) -> GroupType:
    return GROUP_TYPES[type(group)]
