"""The compiled build's constructors (``tools/constructors.py``): every ``__init__`` it writes out behaves as the
one ``dataclasses`` generates for the same class — same parameters, kinds and defaults, same object built —
for the real compiled modules and for any dataclass a property test can draw; what it cannot write faithfully,
it refuses to write."""

from __future__ import annotations
import __future__

import ast
import dataclasses
import importlib
import inspect
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tools.compiled import compiled_modules, compiled_paths
from tools.constructors import GenerationError, generate

ROOT = Path(__file__).resolve().parents[2]
FUTURE = __future__.annotations.compiler_flag

#: arguments that a class's own checks accept (``__post_init__`` validates them); other required parameters
#: get distinct placeholder objects
VALID_ARGUMENTS: dict[str, dict[str, Any]] = {
    "MemberConfig": {"group_id": "g", "client_id": "c", "topics": ("t",)},
}


def run(source: str, name: str) -> dict[str, Any]:
    """Execute ``source`` as a module named ``name`` (registered while it runs: dataclasses looks its
    annotations' names up there) and return its namespace."""
    module = types.ModuleType(name)
    sys.modules[name] = module
    try:
        exec(compile(source, f"<{name}>", "exec", dont_inherit=True), vars(module))
    finally:
        del sys.modules[name]
    return vars(module)


def generated_init(generated: str, cls: type[Any], namespace: dict[str, Any]) -> Any:
    """The ``__init__`` written for ``cls`` in ``generated``, defined in ``namespace`` (its module's globals)."""
    tree = ast.parse(generated)
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls.__name__)
    init = next(n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    scope = dict(namespace)
    exec(compile(textwrap.dedent(ast.unparse(init)), "<init>", "exec", flags=FUTURE, dont_inherit=True), scope)
    return scope["__init__"]


def field_values(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


def check_same_constructor(cls: type[Any], init: Any, arguments: dict[str, Any]) -> None:
    """``init`` takes the parameters ``cls``'s generated ``__init__`` takes and builds the same object."""
    expected = list(inspect.signature(cls.__init__).parameters.values())[1:]
    written = list(inspect.signature(init).parameters.values())[1:]
    assert [(p.name, p.kind) for p in written] == [(p.name, p.kind) for p in expected], cls.__name__
    factories = {f.name for f in dataclasses.fields(cls) if f.default_factory is not dataclasses.MISSING}
    for w, e in zip(written, expected, strict=True):
        if w.name in factories:  # the standard library's sentinel: here, None stands for "left out"
            assert w.default is None, (cls.__name__, w.name)
        else:
            assert w.default == e.default or w.default is e.default, (cls.__name__, w.name)
    built = cls(**arguments)
    written_built = cls.__new__(cls)
    init(written_built, **arguments)
    made, written_made = field_values(built), field_values(written_built)
    for name in factories - arguments.keys():  # made by the factory: a new object of the same value
        value, written_value = made.pop(name), written_made.pop(name)
        assert type(written_value) is type(value), (cls.__name__, name)
        if type(value).__hash__ is None:  # a mutable container: never shared between objects
            assert written_value is not value, (cls.__name__, name)
        if type(value).__eq__ is not object.__eq__:
            assert written_value == value, (cls.__name__, name)
    assert written_made == made, cls.__name__


def required_arguments(cls: type[Any]) -> dict[str, Any]:
    if cls.__name__ in VALID_ARGUMENTS:
        return dict(VALID_ARGUMENTS[cls.__name__])
    parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
    return {p.name: object() for p in parameters if p.default is inspect.Parameter.empty}


# ---------------------------------------------------------------------------------------- the real modules
def test_the_compiled_modules_are_listed_from_the_source_tree() -> None:
    paths = compiled_paths(ROOT)
    assert "src/regroup/coordinator/coordinator.py" in paths
    assert "src/regroup/assignors/consumer_protocol_kio.py" not in paths  # left interpreted on purpose
    assert all((ROOT / p).is_file() for p in paths)
    assert len(compiled_modules(ROOT)) == len(paths)


def generated_modules() -> list[tuple[str, str, list[str]]]:
    out = []
    for path, module in zip(compiled_paths(ROOT), compiled_modules(ROOT), strict=True):
        generated, names = generate((ROOT / path).read_text(encoding="utf-8"))
        if names:
            out.append((module, generated, names))
    return out


GENERATED = generated_modules()


def test_the_value_types_of_the_core_get_written_constructors() -> None:
    names = {name for _, _, classes in GENERATED for name in classes}
    # a sample from each area the compiled build's speed depends on
    for name in ("JoinGroupRequest", "MemberMetadata", "Record", "GroupStateChanged", "Result", "Ctx",
                 "ConsumerGroupMember", "ClassicGroupMember", "MemberSubscription", "GroupSpec", "MemberConfig",
                 "ScenarioEvent", "Transmission", "TopicImage"):  # fmt: skip
        assert name in names, name
    assert len(names) >= 60


@pytest.mark.parametrize(("module", "generated", "names"), GENERATED, ids=[m for m, _, _ in GENERATED])
def test_every_written_constructor_builds_what_the_dataclass_builds(
    module: str, generated: str, names: list[str]
) -> None:
    namespace = vars(importlib.import_module(module))
    for name in names:
        cls = namespace[name]
        assert dataclasses.is_dataclass(cls) and "__init__" in vars(cls), name
        check_same_constructor(cls, generated_init(generated, cls, namespace), required_arguments(cls))


@pytest.mark.parametrize(("module", "generated", "names"), GENERATED, ids=[m for m, _, _ in GENERATED])
def test_the_rewritten_classes_keep_their_fields_and_options(module: str, generated: str, names: list[str]) -> None:
    """The rewritten module compiles, and each rewritten class is the same dataclass but for ``init=False``."""
    namespace = vars(importlib.import_module(module))
    rewritten = run(generated, f"{module}_rewritten")
    for name in names:
        before, after = namespace[name], rewritten[name]
        assert [f.name for f in dataclasses.fields(after)] == [f.name for f in dataclasses.fields(before)]
        assert [f.compare for f in dataclasses.fields(after)] == [f.compare for f in dataclasses.fields(before)]
        params_before, params_after = before.__dataclass_params__, after.__dataclass_params__
        assert params_before.init and not params_after.init
        for option in ("eq", "order", "unsafe_hash", "frozen"):
            assert getattr(params_after, option) == getattr(params_before, option), (name, option)
        assert hasattr(after, "__slots__") == hasattr(before, "__slots__")


# ------------------------------------------------------------------------------------- chosen dataclasses
SAMPLE = """
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import ClassVar, Final

CALLS: list[str] = []


def fresh() -> dict[str, int]:
    return {"made": 1}


@dataclass(slots=True)
class Positional:
    a: int
    b: Final[str] = "b"
    c: list[int] = field(default_factory=list)
    d: int = field(default=4, compare=False, repr=False)
    kind: ClassVar[str] = "positional"


@dataclass(slots=True, kw_only=True, unsafe_hash=True)
class KeywordOnly:
    a: Final[int]
    b: Final[tuple[int, ...]] = ()
    c: Final[dict[str, int]] = field(default_factory=fresh)
    d: Final[int | None] = None


@dataclass
class Mixed:
    a: int
    b: int = field(kw_only=True)
    c: int = 3
    hidden: list[str] = field(init=False, default_factory=list)
    seen: int = field(init=False, default=7)

    def __post_init__(self) -> None:
        CALLS.append(f"post {self.a}")


@dataclasses.dataclass(eq=False)
class Bare:
    pass


@dataclass(frozen=True)
class Frozen:
    a: int = 1


@dataclass
class Written:
    a: int

    def __init__(self) -> None:
        self.a = 1


@dataclass(init=False)
class NotGenerated:
    a: int


class Plain:
    a: int = 1
"""


def test_a_sample_of_dataclass_shapes() -> None:
    generated, names = generate(SAMPLE)
    assert names == ["Positional", "KeywordOnly", "Mixed", "Bare"]  # frozen, written, init=False, plain: as is
    original, rewritten = run(SAMPLE, "sample_original"), run(generated, "sample_rewritten")
    for name, arguments in [
        ("Positional", {"a": 1}),
        ("Positional", {"a": 1, "b": "x", "c": [5], "d": 9}),
        ("KeywordOnly", {"a": 1}),
        ("KeywordOnly", {"a": 1, "b": (2,), "c": {"x": 3}, "d": 4}),
        ("Mixed", {"a": 1, "b": 2}),
        ("Bare", {}),
    ]:
        cls = original[name]
        init = vars(rewritten[name])["__init__"]
        check_same_constructor(cls, init, arguments)
        assert field_values(rewritten[name](**arguments)) == field_values(cls(**arguments))
    # __post_init__ ran once per object built: the dataclass's two and the written __init__'s (on an object of
    # the original class) in the original module, the rewritten class's one in its own
    assert original["CALLS"] == ["post 1"] * 3 and rewritten["CALLS"] == ["post 1"]
    assert rewritten["Mixed"](1, b=2).hidden == [] and rewritten["Mixed"](1, b=2).seen == 7
    assert rewritten["Positional"].kind == "positional"
    assert rewritten["KeywordOnly"](a=1).c == {"made": 1}
    keyed = rewritten["KeywordOnly"]
    assert hash(keyed(a=1, b=(1,), c=())) == hash(keyed(a=1, b=(1,), c=()))  # unsafe_hash kept (a tuple for c)
    assert generate(generated)[1] == []  # nothing left to rewrite


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("@dataclass\nclass A:\n    a: int | None = field(default_factory=int)\n", "admits None"),
        ("@dataclass\nclass A:\n    a: Optional[list[int]] = field(default_factory=list)\n", "admits None"),
        ("@dataclass\nclass A:\n    a: int = 1\n    b: int\n", "follows one with a default"),
        ("@dataclass\nclass A:\n    a: Final = 1\n", "bare Final"),
        ("@dataclass\nclass A:\n    a: InitVar[int]\n", "InitVar"),
        ("@dataclass\nclass A:\n    a: int = field(init=False)\n", "needs a default"),
        ("@dataclass(kw_only=flag)\nclass A:\n    a: int\n", "literal"),
    ],
)
def test_what_cannot_be_written_faithfully_is_refused(body: str, reason: str) -> None:
    with pytest.raises(GenerationError, match=reason):
        generate(f"from __future__ import annotations\n\n{body}")


def test_a_module_without_postponed_annotations_is_refused() -> None:
    # its annotations would be evaluated when the written __init__ is defined, which the stdlib's never does
    with pytest.raises(GenerationError, match="from __future__ import annotations"):
        generate("from dataclasses import dataclass\n\n@dataclass\nclass A:\n    a: int\n")


def test_the_command_prints_a_module_as_the_compiled_build_sees_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tools.constructors import main

    path = tmp_path / "m.py"
    path.write_text(SAMPLE, encoding="utf-8")
    assert main([str(path)]) == 0
    assert capsys.readouterr().out == generate(SAMPLE)[0]
    assert main([str(tmp_path / "missing.py")]) == 1
    assert "constructors:" in capsys.readouterr().err
    assert main([]) == 2


# ------------------------------------------------------------------------------------- drawn dataclasses
#: annotation: (a default, a factory); None where there is none (mutable values have no default, and a factory
#: on a type that admits None is refused, as tested above)
KINDS = {
    "int": ("3", "int"),
    "str": ("'s'", "str"),
    "Final[int]": ("5", "int"),
    "tuple[int, ...]": ("(1, 2)", "tuple"),
    "Final[str | None]": ("None", None),
    "list[int]": (None, "list"),
    "Final[dict[str, int]]": (None, "dict"),
}
FIELD_SPEC = st.tuples(
    st.sampled_from(sorted(KINDS)),
    st.sampled_from(["required", "default", "factory", "hidden"]),
    st.sampled_from([None, True, False]),  # the field's own kw_only
)


def field_line(name: str, annotation: str, kind: str, field_kw_only: bool | None) -> str:
    default, factory = KINDS[annotation]
    options = [] if field_kw_only is None else [f"kw_only={field_kw_only}"]
    if kind == "default" and default is None:
        kind = "factory"
    if kind == "factory" and factory is None:
        kind = "default"
    if kind == "default":
        options.append(f"default={default}")
    elif kind == "factory":
        options.append(f"default_factory={factory}")
    elif kind == "hidden":
        options += ["init=False", f"default={default}" if default is not None else f"default_factory={factory}"]
    if not options:
        return f"    {name}: {annotation}"
    if options == [f"default={default}"]:
        return f"    {name}: {annotation} = {default}"
    return f"    {name}: {annotation} = field({', '.join(options)})"


def dataclass_source(kw_only: bool, fields: list[tuple[str, str, bool | None]]) -> str:
    lines = [
        "from __future__ import annotations",
        "from dataclasses import dataclass, field",
        "from typing import Final",
        "",
        f"@dataclass(slots=True, kw_only={kw_only})",
        "class Drawn:",
        *(field_line(f"f{i}", *spec) for i, spec in enumerate(fields)),
        "    pass",
    ]
    return "\n".join(lines) + "\n"


@settings(max_examples=150, deadline=None)
@given(kw_only=st.booleans(), fields=st.lists(FIELD_SPEC, max_size=6))
def test_any_dataclass_gets_the_constructor_the_standard_library_gives_it(
    kw_only: bool, fields: list[tuple[str, str, bool | None]]
) -> None:
    source = dataclass_source(kw_only, fields)
    try:
        original = run(source, "drawn_original")
    except TypeError:  # the standard library refuses it (a required positional field after a default)
        with pytest.raises(GenerationError):
            generate(source)
        return
    generated, names = generate(source)
    assert names == ["Drawn"]
    cls = original["Drawn"]
    arguments = {p: i for i, p in enumerate(required_arguments(cls))}
    check_same_constructor(cls, vars(run(generated, "drawn_rewritten")["Drawn"])["__init__"], arguments)
