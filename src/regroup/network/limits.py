"""The identifiers a request may carry and how long each may be by default (``regroup serve --max-*-bytes``).

Requests are measured against these limits while they are checked (``network/precheck.py``); a longer
identifier is answered with INVALID_REQUEST, so no client can make the coordinator keep or log megabytes of
ids. The defaults leave ample room for real clients: topic names have Kafka's own limit of 249 characters;
Java clients build their client id from the group id (``consumer-<group>-<n>``), so client ids get more
room than group ids; member ids more still, since a classic member id is ``<client or instance id>-<uuid>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

GROUP_ID: Final = "group id"
MEMBER_ID: Final = "member id"
INSTANCE_ID: Final = "group instance id"
TOPIC_NAME: Final = "topic name"
CLIENT_ID: Final = "client id"
TRANSACTIONAL_ID: Final = "transactional id"
ID_KINDS: Final = (GROUP_ID, MEMBER_ID, INSTANCE_ID, TOPIC_NAME, CLIENT_ID, TRANSACTIONAL_ID)

#: identifier kind -> most UTF-8 bytes allowed (kinds without an entry are not measured)
Limits = Mapping[str, int]

DEFAULT_LIMITS: Final[Mapping[str, int]] = {
    GROUP_ID: 1024,
    INSTANCE_ID: 1024,
    TOPIC_NAME: 249,
    CLIENT_ID: 2048,
    MEMBER_ID: 2560,
    TRANSACTIONAL_ID: 1024,
}
#: bytes a generated classic member id adds to the client or instance id it starts with ("-" and a UUID)
MEMBER_ID_SUFFIX_BYTES: Final = 37
