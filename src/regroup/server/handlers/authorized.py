"""Kafka's authorized-operations bit fields (KIP-430) as a broker without an authorizer reports them: every
operation Kafka defines for the resource type. regroup has no authorizer, so these are what a client that
asks for them gets. Bit ``n`` stands for Kafka's ``AclOperation`` code ``n``."""

from __future__ import annotations

from typing import Final

READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12

#: the schemas' default: the client did not ask (or the API did not compute them)
NOT_REQUESTED: Final = -(2**31)


def bits(*operations: int) -> int:
    """The bit field of ``operations`` (AclOperation codes)."""
    field = 0
    for operation in operations:
        field |= 1 << operation
    return field


TOPIC_OPERATIONS: Final = bits(READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS)
CLUSTER_OPERATIONS: Final = bits(
    CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE
)
