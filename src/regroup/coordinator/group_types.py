"""The registered group types: the one place a group's type is looked up (``type_of``, and the owner of a
record key, ``RECORD_OWNERS``). Adding a group type (a streams group, say) means its own package with a
``GroupType`` and one line here."""

from __future__ import annotations

from typing import Any, Final

from regroup.coordinator.classic.group_type import CLASSIC
from regroup.coordinator.consumer.group_type import CONSUMER
from regroup.coordinator.group_type import GroupType
from regroup.coordinator.groups import Group
from regroup.coordinator.share.group_type import SHARE

#: every group type, by the class of its groups (here, and only here, a group's type is looked up from the group:
#: the registry holds types over different group classes, so its values are ``GroupType[Any]``)
GROUP_TYPES: Final[dict[type, GroupType[Any]]] = {kind.group_class: kind for kind in (CLASSIC, CONSUMER, SHARE)}


#: every group type, by the record key types it owns
RECORD_OWNERS: Final[dict[type, GroupType[Any]]] = {
    key: kind for kind in GROUP_TYPES.values() for key in kind.record_keys
}


def type_of(group: Group) -> GroupType[Any]:
    return GROUP_TYPES[type(group)]
