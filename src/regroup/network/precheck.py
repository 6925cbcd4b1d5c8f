"""A request's bytes checked against its kio schema before kio's native reader sees them.

kio's native reader trusts array lengths: it reserves room for every element a length claims before it reads
the first one, so a count of 2^32 in a 30-byte frame makes it ask for 32 GiB and abort the process. It also
decodes a null array (length -1) as None whether or not the schema allows one. ``check`` walks the same
schema kio reads — the entity dataclasses' field order, each field's ``kafka_type``, nullability from the
annotation, compact encodings and tagged fields in flexible versions (and, for a request header, its classic
``client_id``) — without building anything, and raises ``SchemaViolation`` (the caller closes the connection,
as Kafka's SocketServer does for a request it cannot parse) for:

* an array, string or bytes length larger than the bytes left (an array counts each element at its smallest
  encoding, at least one byte), or a length below -1;
* a null where the schema has none (arrays, strings, bytes, nested entities);
* a tagged field whose value does not fill exactly the size it declares, or whose tag the schema does not know
  (kio's reader cannot skip one);
* a varint of more than five bytes, and a frame that ends inside a field.

After a successful walk the native reader reads exactly the structure the walk measured, so every allocation
it makes is bounded by the bytes of the frame.

Identifier strings — group ids, member ids, group instance ids, topic names and the header's client id — are
also measured against the server's identifier limits (``network/limits.py``). A longer one is not malformed:
``check`` returns a description of the first one, and the dispatcher answers the request with the API's error
response (INVALID_REQUEST). The kinds an API checks itself with its own error code (CreateTopics'
INVALID_TOPIC_EXCEPTION) are left out of its limits by the dispatcher. Plans are compiled once per entity class.

A plan is walked by Python code written for it (``_walker_of``: one function per entity plan, made on first use,
the fixed-size fields of a run added up at once, every length read in place), about four times faster than
walking the plan's fields one call at a time (``_Walk``, which still walks the rare tagged fields and which the
tests hold the written walkers to, byte for byte and refusal for refusal).
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from dataclasses import dataclass
from types import NoneType, UnionType
from typing import Any, Final, Union, get_args, get_origin

from kio.schema.types import GroupId, TopicName, TransactionalId

from regroup.network.limits import CLIENT_ID, GROUP_ID, INSTANCE_ID, MEMBER_ID, TOPIC_NAME, TRANSACTIONAL_ID, Limits

_FIXED_SIZES: Final = {
    "int8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "uint8": 1,
    "uint16": 2,
    "uint32": 4,
    "uint64": 8,
    "float64": 8,
    "bool": 1,
    "uuid": 16,
    "error_code": 2,
    "timedelta_i32": 4,
    "timedelta_i64": 8,
    "datetime_i64": 8,
}
_TEXT_TYPES: Final = ("string", "bytes", "records")

# field kinds
_FIXED, _TEXT, _ARRAY, _ENTITY = range(4)
_MAX_VARINT_BYTES = 5


class SchemaViolation(ValueError):
    """The bytes do not encode a valid value of the schema (or would make the native reader over-allocate)."""


@dataclass(frozen=True, slots=True, eq=False)
class _Field:
    name: str
    kind: int
    min_size: int  # bytes of its smallest encoding
    size: int = 0  # _FIXED: bytes
    compact: bool = False  # _TEXT, _ARRAY: a varint length (flexible versions)
    wide: bool = False  # _TEXT: an int32 length (bytes, records) rather than int16 (strings)
    nullable: bool = False
    id_kind: str | None = None  # _TEXT: identifier kind measured against the limits
    element: _Field | None = None  # _ARRAY
    entity: _Plan | None = None  # _ENTITY


@dataclass(frozen=True, slots=True, eq=False)
class _Plan:
    name: str
    fields: tuple[_Field, ...]
    flexible: bool
    tagged: dict[int, _Field]
    min_size: int


def check(entity_cls: type[Any], data: bytes, offset: int, limits: Limits) -> tuple[int, str | None]:
    """Walk ``data[offset:]`` as an ``entity_cls``. Returns (the offset after it, the first identifier longer than
    its limit as a one-line description, or None). Raises ``SchemaViolation``."""
    walker = _WALKERS.get(entity_cls)
    if walker is None:
        walker = _WALKERS[entity_cls] = _walker_of(plan_of(entity_cls))
    over: list[str | None] = [None]
    return walker(data, offset, len(data), limits, over), over[0]


def check_by_plan(entity_cls: type[Any], data: bytes, offset: int, limits: Limits) -> tuple[int, str | None]:
    """``check`` walking the plan field by field (``_Walk``): what the written walkers are held to."""
    walk = _Walk(data, limits)
    end = walk.entity(plan_of(entity_cls), offset, len(data), nullable=False)
    return end, walk.over_limit


def plan_of(entity_cls: type[Any]) -> _Plan:
    plan = _PLANS.get(entity_cls)
    if plan is None:
        plan = _PLANS[entity_cls] = _compile(entity_cls)
    return plan


_PLANS: dict[type[Any], _Plan] = {}

#: a written walker: (data, offset, end, limits, [first over-limit description]) -> the offset after the entity
Walker = Callable[[bytes, int, int, Limits, list[str | None]], int]
_WALKERS: dict[type[Any], Walker] = {}


# ------------------------------------------------------------------------------------------ compiling
def _compile(entity_cls: type[Any]) -> _Plan:
    flexible = bool(entity_cls.__flexible__)
    is_header = entity_cls.__name__ == "RequestHeader"
    fields: list[_Field] = []
    tagged: dict[int, _Field] = {}
    for f in dataclasses.fields(entity_cls):
        tag = f.metadata.get("tag")
        if is_header and f.name == "client_id":  # a classic nullable string in every header version
            compiled = _Field(f.name, _TEXT, 2, nullable=True, id_kind=CLIENT_ID)
        else:
            compiled = _compile_field(f, flexible, tagged=tag is not None)
        if tag is None:
            fields.append(compiled)
        else:
            tagged[int(tag)] = compiled
    min_size = sum(f.min_size for f in fields) + (1 if flexible else 0)
    return _Plan(entity_cls.__name__, tuple(fields), flexible, tagged, min_size)


def _compile_field(f: dataclasses.Field[Any], flexible: bool, *, tagged: bool) -> _Field:
    annotation, nullable = _strip_optional(f.type)
    if get_origin(annotation) is tuple:
        element_type = get_args(annotation)[0]
        element = _compile_value(f, element_type, flexible, nullable=False)
        return _Field(
            f.name,
            _ARRAY,
            1 if flexible else 4,
            compact=flexible,
            nullable=nullable,
            element=element,
        )
    # kio reads a tagged primitive as non-nullable (a tagged field is left out rather than sent as null)
    return _compile_value(f, annotation, flexible, nullable=nullable and (not tagged or _is_entity(annotation)))


def _compile_value(f: dataclasses.Field[Any], value_type: Any, flexible: bool, *, nullable: bool) -> _Field:
    if _is_entity(value_type):
        entity = plan_of(value_type)
        return _Field(f.name, _ENTITY, 1 if nullable else entity.min_size, nullable=nullable, entity=entity)
    kafka_type = f.metadata["kafka_type"]
    if kafka_type in _FIXED_SIZES:
        size = _FIXED_SIZES[kafka_type]
        return _Field(f.name, _FIXED, size, size=size)
    if kafka_type not in _TEXT_TYPES:
        raise TypeError(f"{f.name}: kafka_type {kafka_type!r} has no plan")
    wide = kafka_type != "string"
    min_size = 1 if flexible else (4 if wide else 2)
    id_kind = _id_kind(f.name, value_type) if kafka_type == "string" else None
    return _Field(f.name, _TEXT, min_size, compact=flexible, wide=wide, nullable=nullable, id_kind=id_kind)


def _strip_optional(annotation: Any) -> tuple[Any, bool]:
    if get_origin(annotation) in (UnionType, Union):
        args = [a for a in get_args(annotation) if a is not NoneType]
        return args[0], len(args) < len(get_args(annotation))
    return annotation, False


def _is_entity(value_type: Any) -> bool:
    return isinstance(value_type, type) and dataclasses.is_dataclass(value_type)


def _id_kind(name: str, value_type: Any) -> str | None:
    if value_type is GroupId or name in ("key", "coordinator_keys"):  # FindCoordinator: a group (or txn) id
        return GROUP_ID
    if value_type is TopicName:
        return TOPIC_NAME
    if value_type is TransactionalId:
        return TRANSACTIONAL_ID
    if name == "member_id":
        return MEMBER_ID
    if name == "group_instance_id":
        return INSTANCE_ID
    return None


# ------------------------------------------------------------------------------------------ walking
class _Walk:
    __slots__ = ("data", "limits", "over_limit")

    def __init__(self, data: bytes, limits: Limits) -> None:
        self.data = data
        self.limits = limits
        self.over_limit: str | None = None

    def entity(self, plan: _Plan, pos: int, end: int, *, nullable: bool) -> int:
        if nullable:
            if pos >= end:
                raise SchemaViolation(f"{plan.name} ends before its null marker")
            pos += 1
            if self.data[pos - 1] == 0xFF:  # int8 -1: null
                return pos
        for f in plan.fields:
            pos = self.field(f, pos, end)
        if plan.flexible:
            pos = self.tags(plan, pos, end)
        return pos

    def field(self, f: _Field, pos: int, end: int) -> int:
        kind = f.kind
        if kind == _FIXED:
            pos += f.size
            if pos > end:
                raise SchemaViolation(f"field {f.name} ends past the request")
            return pos
        if kind == _ENTITY:
            assert f.entity is not None
            return self.entity(f.entity, pos, end, nullable=f.nullable)
        length, pos = self.length(f, pos, end)
        if length < 0:
            return pos
        if kind == _TEXT:
            if length > end - pos:
                raise SchemaViolation(f"field {f.name}: {length} bytes claimed, {end - pos} left")
            if f.id_kind is not None and self.over_limit is None:
                self.measure(f.id_kind, length, pos)
            return pos + length
        element = f.element
        assert element is not None
        if length * max(element.min_size, 1) > end - pos:
            raise SchemaViolation(f"field {f.name}: {length} elements claimed, {end - pos} bytes left")
        if element.kind == _FIXED:
            return pos + length * element.size
        field = self.field
        for _ in range(length):
            pos = field(element, pos, end)
        return pos

    def length(self, f: _Field, pos: int, end: int) -> tuple[int, int]:
        """(the length or count at ``pos``, -1 for null; the offset after it)."""
        data = self.data
        if f.compact:
            if pos >= end:
                raise SchemaViolation(f"field {f.name} ends past the request")
            value = data[pos]
            if value < 0x80:
                pos += 1
            else:
                value, pos = self.varint(pos, end)
            length = value - 1
        else:
            width = 4 if f.kind == _ARRAY or f.wide else 2
            if pos + width > end:
                raise SchemaViolation(f"field {f.name} ends past the request")
            length = int.from_bytes(data[pos : pos + width], "big", signed=True)
            pos += width
        if length == -1:
            if not f.nullable:
                raise SchemaViolation(f"field {f.name} is null, which its schema does not allow")
        elif length < -1:
            raise SchemaViolation(f"field {f.name} has a negative length {length}")
        return length, pos

    def varint(self, pos: int, end: int) -> tuple[int, int]:
        return _varint(self.data, pos, end)

    def tags(self, plan: _Plan, pos: int, end: int) -> int:
        count, pos = self.varint(pos, end)
        if count * 2 > end - pos:  # a tag and a size: at least two bytes each
            raise SchemaViolation(f"{plan.name}: {count} tagged fields claimed, {end - pos} bytes left")
        for _ in range(count):
            tag, pos = self.varint(pos, end)
            size, pos = self.varint(pos, end)
            if size > end - pos:
                raise SchemaViolation(f"{plan.name}: tagged field {tag} of {size} bytes, {end - pos} left")
            f = plan.tagged.get(tag)
            if f is None:
                raise SchemaViolation(f"{plan.name}: unknown tagged field {tag}")
            stop = pos + size
            if self.field(f, pos, stop) != stop:
                raise SchemaViolation(f"{plan.name}: tagged field {f.name} does not fill its {size} bytes")
            pos = stop
        return pos

    def measure(self, id_kind: str, length: int, pos: int) -> None:
        limit = self.limits.get(id_kind)
        if limit is not None and length > limit:
            self.over_limit = f"a {id_kind} of {length} bytes (at most {limit})"


# ------------------------------------------------------------------------------------------ written walkers
_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")


def _varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """An unsigned varint at ``pos``: (its value, the offset after it)."""
    value = shift = 0
    for _ in range(_MAX_VARINT_BYTES):
        if pos >= end:
            raise SchemaViolation("a varint runs past the request")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    raise SchemaViolation(f"a varint longer than {_MAX_VARINT_BYTES} bytes")


def _tags(plan: _Plan, data: bytes, pos: int, end: int, limits: Limits, over: list[str | None]) -> int:
    """The tagged fields at ``pos`` (any but none: the written walker reads a lone 0 itself), walked by plan."""
    walk = _Walk(data, limits)
    walk.over_limit = over[0]
    pos = walk.tags(plan, pos, end)
    over[0] = walk.over_limit
    return pos


def _measure(limits: Limits, over: list[str | None], id_kind: str, length: int) -> None:
    limit = limits.get(id_kind)
    if limit is not None and length > limit and over[0] is None:
        over[0] = f"a {id_kind} of {length} bytes (at most {limit})"


class _Writer:
    """Writes the walker functions of a plan and of the plans nested in it, as Python source."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}  # id(plan) -> its function's name
        #: the constants the functions read by name: the plans of their tagged fields, their fixed-size runs
        self.constants: dict[str, object] = {}
        self.functions: list[str] = []
        self._temp = 0

    def function(self, plan: _Plan) -> str:
        name = self.names.get(id(plan))
        if name is not None:
            return name
        name = self.names[id(plan)] = f"walk_{len(self.names)}"
        self.constants[f"plan_{name}"] = plan
        body: list[str] = []
        run: list[_Field] = []  # the fixed-size fields not added to pos yet
        for f in plan.fields:
            if f.kind == _FIXED:
                run.append(f)
                continue
            if run:
                body += self._fixed(run, "    ")
                run = []
            body += self.field(f, "    ")
        if run:
            body += self._fixed(run, "    ")
        if plan.flexible:
            body += [
                "    if pos < end and data[pos] == 0:",
                "        pos += 1",
                "    else:",
                f"        pos = _tags(plan_{name}, data, pos, end, limits, over)",
            ]
        self.functions.append("\n".join([f"def {name}(data, pos, end, limits, over):", *body, "    return pos"]))
        return name

    def field(self, f: _Field, at: str) -> list[str]:
        """Lines advancing ``pos`` over one field (indented ``at``)."""
        if f.kind == _FIXED:
            return self._fixed([f], at)
        if f.kind == _ENTITY:
            assert f.entity is not None
            walker = self.function(f.entity)
            if not f.nullable:
                return [f"{at}pos = {walker}(data, pos, end, limits, over)"]
            return [
                f"{at}if pos >= end:",
                f"{at}    raise SchemaViolation({f.entity.name + ' ends before its null marker'!r})",
                f"{at}pos += 1",
                f"{at}if data[pos - 1] != 0xFF:",
                f"{at}    pos = {walker}(data, pos, end, limits, over)",
            ]
        n = self._fresh("n")
        inner = at + "    "
        if f.kind == _TEXT:
            claimed = "f'field " + f.name + ": {" + n + "} bytes claimed, {end - pos} left'"
            body = [f"{inner}if {n} > end - pos:", f"{inner}    raise SchemaViolation({claimed})"]
            if f.id_kind is not None:
                body += [f"{inner}if limits:", f"{inner}    _measure(limits, over, {f.id_kind!r}, {n})"]
            body.append(f"{inner}pos += {n}")
        else:
            element = f.element
            assert element is not None
            claimed = "f'field " + f.name + ": {" + n + "} elements claimed, {end - pos} bytes left'"
            body = [
                f"{inner}if {n} * {max(element.min_size, 1)} > end - pos:",
                f"{inner}    raise SchemaViolation({claimed})",
            ]
            if element.kind == _FIXED:
                body.append(f"{inner}pos += {n} * {element.size}")
            else:
                body.append(f"{inner}for _ in range({n}):")
                body += self.field(element, inner + "    ")
        return [*self._length(f, n, at), f"{at}if {n} >= 0:", *body]

    def _length(self, f: _Field, n: str, at: str) -> list[str]:
        """Lines reading the length (or count) of ``f`` into ``n`` (-1: null), refusing what ``_Walk.length``
        refuses."""
        past = repr(f"field {f.name} ends past the request")
        if f.compact:
            lines = [
                f"{at}if pos >= end:",
                f"{at}    raise SchemaViolation({past})",
                f"{at}{n} = data[pos]",
                f"{at}if {n} < 0x80:",
                f"{at}    pos += 1",
                f"{at}else:",
                f"{at}    {n}, pos = _varint(data, pos, end)",
                f"{at}{n} -= 1",
            ]
        else:
            width = 4 if f.kind == _ARRAY or f.wide else 2
            lines = [
                f"{at}if pos + {width} > end:",
                f"{at}    raise SchemaViolation({past})",
                f"{at}{n} = {'_I32' if width == 4 else '_I16'}.unpack_from(data, pos)[0]",
                f"{at}pos += {width}",
            ]
        null = repr(f"field {f.name} is null, which its schema does not allow")
        negative = "f'field " + f.name + " has a negative length {" + n + "}'"
        return [
            *lines,
            f"{at}if {n} < 0:",
            f"{at}    if {n} != -1:",
            f"{at}        raise SchemaViolation({negative})",
            f"{at}    pass" if f.nullable else f"{at}    raise SchemaViolation({null})",
        ]

    def _fixed(self, run: list[_Field], at: str) -> list[str]:
        """Lines adding up a run of fixed-size fields at once (naming the first that does not fit, if any)."""
        size = sum(f.size for f in run)
        if len(run) == 1:
            refusal = repr(f"field {run[0].name} ends past the request")
        else:
            name = self._fresh("run")
            self.constants[name] = tuple((f.name, f.size) for f in run)
            refusal = f"_past(pos - {size}, end, {name})"
        return [f"{at}pos += {size}", f"{at}if pos > end:", f"{at}    raise SchemaViolation({refusal})"]

    def _fresh(self, stem: str) -> str:
        self._temp += 1
        return f"{stem}{self._temp}"


def _past(pos: int, end: int, run: tuple[tuple[str, int], ...]) -> str:
    """The refusal of a run of fixed-size fields from ``pos`` that ends past ``end``: its first field that does."""
    for name, size in run:
        pos += size
        if pos > end:
            return f"field {name} ends past the request"
    raise AssertionError("the run fits")


def _walker_of(plan: _Plan) -> Walker:
    """The walker function written for ``plan`` (and the plans nested in it)."""
    writer = _Writer()
    top = writer.function(plan)
    namespace: dict[str, Any] = {
        "SchemaViolation": SchemaViolation,
        "_I16": _I16,
        "_I32": _I32,
        "_varint": _varint,
        "_tags": _tags,
        "_measure": _measure,
        "_past": _past,
        **writer.constants,
    }
    exec(compile("\n\n".join(writer.functions), f"<precheck walker of {plan.name}>", "exec"), namespace)
    walker: Walker = namespace[top]
    return walker
