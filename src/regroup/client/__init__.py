"""Sans-IO group members (classic, KIP-848 and KIP-932 share consumers): ``poll(now_ms)`` -> requests,
``on_response(...)``, ``next_deadline()``."""

from regroup.client.classic_member import ClassicClientMember
from regroup.client.config import ConfigError, ConsumerConfig, MemberConfig, ShareConsumerConfig, rebalance_protocol
from regroup.client.consumer_member import ConsumerClientMember, ConsumerClientState
from regroup.client.share_member import ShareClientMember, ShareClientState
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
    "ShareClientMember",
    "ShareClientState",
    "ShareConsumerConfig",
    "TopicPartition",
    "rebalance_protocol",
]
