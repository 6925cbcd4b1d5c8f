"""Sans-IO consumer group members: ``poll(now_ms)`` -> requests, ``on_response(...)``, ``next_deadline()``."""

from regroup.client.classic_member import ClassicMember
from regroup.client.config import ConfigError, MemberConfig, rebalance_protocol
from regroup.client.types import CallbackEvent, CallbackKind, MemberNote, MemberState, OutgoingRequest, TopicPartition

__all__ = [
    "CallbackEvent",
    "CallbackKind",
    "ClassicMember",
    "ConfigError",
    "MemberConfig",
    "MemberNote",
    "MemberState",
    "OutgoingRequest",
    "TopicPartition",
    "rebalance_protocol",
]
