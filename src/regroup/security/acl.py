"""Kafka's ACL vocabulary with Kafka's wire codes: resource types, pattern types, operations, permission types,
and the principal text ``User:alice`` every ACL names."""

from __future__ import annotations

from enum import IntEnum
from typing import Final


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


#: the one name of the CLUSTER resource
CLUSTER_NAME: Final = "kafka-cluster"
#: a resource name, principal or host that matches every one
WILDCARD: Final = "*"
#: the principal of a connection that did not authenticate (PLAINTEXT, SSL without a client certificate)
ANONYMOUS: Final = "User:ANONYMOUS"
