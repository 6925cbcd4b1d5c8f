"""Kafka's error codes (Kafka's numbering) and ``ApiError``, the exception the core raises *before* it
builds any record, so a failed request changes nothing. The shells turn it into the error field of the
response."""

from __future__ import annotations

import enum

from mypy_extensions import mypyc_attr


class ErrorCode(enum.IntEnum):
    """The Kafka error codes the group and transaction coordinators return."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    UNKNOWN_TOPIC_OR_PARTITION = 3
    OFFSET_METADATA_TOO_LARGE = 12
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    NOT_ENOUGH_REPLICAS = 19
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    INVALID_REQUEST = 42
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    SASL_AUTHENTICATION_FAILED = 58
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    MEMBER_ID_REQUIRED = 79
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    UNSTABLE_OFFSET_COMMIT = 88
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    TRANSACTIONAL_ID_NOT_FOUND = 105
    UNKNOWN_TOPIC_ID = 100
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_REGULAR_EXPRESSION = 128
    SHARE_SESSION_LIMIT_REACHED = 133


class ApiError(Exception):
    """A request the coordinator refuses, with the Kafka error code to answer."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code


@mypyc_attr(native_class=False)  # (a builtin exception base: kept a Python class when compiled)
class CoordinatorBug(AssertionError):
    """An invariant of the coordinator itself broke (e.g. an illegal state transition): fail loudly."""
