"""Sans-IO consumer group members (classic and KIP-848): ``poll(now_ms)`` -> requests, ``on_response(...)``,
``next_deadline()``."""

from regroup.client.classic_member import ClassicMember
from regroup.client.config import ConfigError, ConsumerConfig, MemberConfig, rebalance_protocol
from regroup.client.consumer_member import ConsumerMember, ConsumerState
from regroup.client.types import CallbackEvent, CallbackKind, MemberNote, MemberState, OutgoingRequest, TopicPartition

__all__ = [
    "CallbackEvent",
    "CallbackKind",
    "ClassicMember",
    "ConfigError",
    "ConsumerConfig",
    "ConsumerMember",
    "ConsumerState",
    "MemberConfig",
    "MemberNote",
    "MemberState",
    "OutgoingRequest",
    "TopicPartition",
    "rebalance_protocol",
]
