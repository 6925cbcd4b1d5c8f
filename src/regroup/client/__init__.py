"""Sans-IO consumer group members (classic and KIP-848): ``poll(now_ms)`` -> requests, ``on_response(...)``,
``next_deadline()``."""

from regroup.client.classic_member import ClassicClientMember
from regroup.client.config import ConfigError, ConsumerConfig, MemberConfig, rebalance_protocol
from regroup.client.consumer_member import ConsumerClientMember, ConsumerClientState
from regroup.client.types import (
    CallbackEvent,
    CallbackKind,
    ClassicClientState,
    MemberNote,
    OutgoingRequest,
    TopicPartition,
)

__all__ = [
    "CallbackEvent",
    "CallbackKind",
    "ClassicClientMember",
    "ClassicClientState",
    "ConfigError",
    "ConsumerClientMember",
    "ConsumerClientState",
    "ConsumerConfig",
    "MemberConfig",
    "MemberNote",
    "OutgoingRequest",
    "TopicPartition",
    "rebalance_protocol",
]
