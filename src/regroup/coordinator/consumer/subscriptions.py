"""What a consumer group subscribes to: topic names plus, per member, an optional regular expression — matched
against the cluster image with RE2 (linear time, no backtracking) when the group resolves it
(``regexes.py``), and counted as the topics of that resolution — and the subscription metadata (ids,
partition counts, racks) of every subscribed topic that exists."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache

import re2

from regroup.coordinator.consumer.group import ConsumerGroup, ConsumerGroupMember, ResolvedRegex, Subscription
from regroup.model.cluster import ClusterImage, TopicImage
from regroup.model.errors import ApiError, ErrorCode
from regroup.records.consumer import SubscribedTopic

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False
_OPTIONS.max_mem = 8 << 20


@lru_cache(maxsize=1024)
def compile_regex(pattern: str) -> re2._Regexp:
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        detail = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise ApiError(
            ErrorCode.INVALID_REGULAR_EXPRESSION,
            f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {detail}.",
        ) from None


def matching_topics(pattern: str, image: ClusterImage) -> tuple[str, ...]:
    """The topics of ``image`` that ``pattern`` matches whole (internal topics, ``__``-prefixed, never), by name.

    What each name gave is kept per pattern (``_MATCHED``): a group resolves its regular expressions again each
    time the cluster changes, and the re2 binding costs about 3 µs a name (30 ms at 10,000 topics, held by the
    coordinator's step), while the names that changed are few. A pure function's memo: the same answers."""
    regex = compile_regex(pattern)
    names = image.by_name
    known = _MATCHED.get(pattern)
    if known is None or len(known) > 2 * len(names) + _MATCHED_SLACK:  # (names of deleted topics piled up)
        known = {}
    _keep(pattern, known)
    out: list[str] = []
    for name in names:
        hit = known.get(name)
        if hit is None:
            hit = known[name] = not name.startswith("__") and regex.fullmatch(name) is not None
        if hit:
            out.append(name)
    out.sort()
    return tuple(out)


def match_names(pattern: str, names: Iterable[str]) -> dict[str, bool]:
    """Whether ``pattern`` matches each of ``names`` whole, as ``matching_topics`` decides it (internal topics
    never). Reads and writes nothing shared: safe beside the coordinator."""
    regex = compile_regex(pattern)
    return {name: not name.startswith("__") and regex.fullmatch(name) is not None for name in names}


def unmatched_names(pattern: str, image: ClusterImage) -> list[str]:
    """The names of ``image`` that ``matching_topics`` has not matched ``pattern`` against yet."""
    known = _MATCHED.get(pattern)
    return list(image.by_name) if known is None else [name for name in image.by_name if name not in known]


def remember_matches(pattern: str, matched: Mapping[str, bool]) -> None:
    """Add what ``match_names`` found to what ``matching_topics`` keeps for ``pattern`` (on the coordinator's
    thread): its next resolution need not match those names again."""
    known = _MATCHED.get(pattern, {})
    known.update(matched)
    _keep(pattern, known)


def _keep(pattern: str, known: dict[str, bool]) -> None:
    """Keep ``known`` as what ``pattern`` gave, as the most recently used; the least recently used beyond
    ``_MATCHED_PATTERNS`` are dropped."""
    _MATCHED.pop(pattern, None)
    _MATCHED[pattern] = known
    while len(_MATCHED) > _MATCHED_PATTERNS:
        del _MATCHED[next(iter(_MATCHED))]


#: per pattern, whether it matches each topic name seen (``matching_topics``), the least recently used dropped
_MATCHED: dict[str, dict[str, bool]] = {}
#: patterns whose names are kept, and names a pattern may keep beyond twice the cluster's before they are reset
_MATCHED_PATTERNS, _MATCHED_SLACK = 256, 1024


def member_topics(member: ConsumerGroupMember, resolved: Mapping[str, ResolvedRegex]) -> tuple[str, ...]:
    """Everything the member subscribes to: its names and the topics its regex resolved to in the group
    (``resolved``: the group's resolutions; a regex not resolved yet adds nothing)."""
    return subscription_topics((member.subscribed_topic_names, member.subscribed_topic_regex), resolved)


def subscription_topics(subscription: Subscription, resolved: Mapping[str, ResolvedRegex]) -> tuple[str, ...]:
    """Everything a member with this subscription (names, regex) subscribes to (``member_topics``)."""
    names, regex = subscription
    if regex is None:
        return names
    matched = resolved.get(regex)
    if matched is None or not matched.topics:
        return names
    return tuple(sorted(set(names) | set(matched.topics)))


def group_topic_names(members: Iterable[ConsumerGroupMember], resolved: Mapping[str, ResolvedRegex]) -> set[str]:
    """Every topic the members subscribe to, member by member (``subscribed_names`` reads the group's counts)."""
    names: set[str] = set()
    for m in members:
        names.update(member_topics(m, resolved))
    return names


def subscribed_names(group: ConsumerGroup) -> set[str]:
    """Every topic the group's members subscribe to: ``group_topic_names`` of its members, read from its
    distinct subscriptions (``ConsumerGroup.subscriptions``), each once."""
    resolved = group.resolved_regexes
    names: set[str] = set()
    for subscription in group.subscriptions:
        names.update(subscription_topics(subscription, resolved))
    return names


def subscription_metadata(names: Iterable[str], image: ClusterImage) -> dict[str, SubscribedTopic]:
    """The subscription metadata of the ``names`` that exist in ``image``, by name, sorted. Each topic's entry is
    made once per topic image (``_SUBSCRIBED``) and shared by every group and refresh that reads that image: a
    group subscribed to 10,000 topics refreshes after any change of the cluster, and building an entry is about
    2 µs (a refresh was 20 ms); equal, shared entries also compare at once with the group's own."""
    out: dict[str, SubscribedTopic] = {}
    find, memo = image.by_name.get, _SUBSCRIBED
    for name in sorted(set(names)):
        topic = find(name)
        if topic is None:
            continue
        kept = memo.get(id(topic))
        if kept is None or kept[0] is not topic:
            if len(memo) >= _SUBSCRIBED_MAX:
                memo.clear()
            kept = memo[id(topic)] = (
                topic,
                SubscribedTopic(
                    topic_id=topic.topic_id,
                    name=name,
                    partitions=topic.partitions,
                    racks=tuple(tuple(sorted(r)) for r in topic.racks),
                ),
            )
        out[name] = kept[1]
    return out


#: id(topic image) -> (that image, its subscription metadata entry): a pure function's memo (the image is kept
#: with its entry, so its id is not reused while it is here); cleared whole when it reaches ``_SUBSCRIBED_MAX``
_SUBSCRIBED: dict[int, tuple[TopicImage, SubscribedTopic]] = {}
_SUBSCRIBED_MAX = 200_000
