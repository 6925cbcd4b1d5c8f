"""Constructors for the compiled build, generated from the dataclasses' annotations.

The core's value types are plain dataclasses: each field is declared once, with its default, and the
interpreted package uses the ``__init__`` the standard library generates from them. mypyc, though, compiles
only code written in the source: a dataclass's generated ``__init__`` stays interpreted in the compiled build
and costs several times a written one there. So, before mypyc compiles a copy of the sources, this module
rewrites each dataclass of that copy to carry the ``__init__`` the standard library would generate, spelled
out: the same parameters in the same order, positional or keyword-only as the fields are, with the same
defaults. A field's ``default_factory`` is called when its argument is left out (the parameter defaults to
``None``, so a field with a factory must not admit ``None`` itself); a field with ``init=False`` is set from
its default; a ``__post_init__`` is called last. The class's defaults move into that ``__init__`` (the class
body keeps the bare annotations, which is what a ``Final`` field assigned in ``__init__`` needs), and the
decorator gains ``init=False``.

Left as they are: classes that write their own ``__init__``, frozen dataclasses (a written ``__init__`` cannot
assign a frozen field), dataclasses with bases (their inherited fields are not in this class's body) and
dataclasses declared ``init=False``.

``python -m tools.constructors FILE`` prints a file as the compiled build compiles it.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

#: the names a dataclass decorator or ``field`` call goes by in the sources
DATACLASS_NAMES = frozenset({"dataclass", "dataclasses.dataclass"})
FIELD_NAMES = frozenset({"field", "dataclasses.field"})


class GenerationError(Exception):
    """A dataclass this module cannot give a faithful ``__init__`` (the message names it and says why)."""


@dataclass(slots=True)
class _Field:
    name: str
    annotation: str  # the parameter's type: the field's annotation without ``Final[...]``
    default: str | None  # source of the default expression, None when required
    factory: str | None  # source of the default factory, None when there is none
    init: bool  # a parameter of ``__init__`` (``field(init=False)`` is not)
    kw_only: bool
    statement: ast.AnnAssign
    kept_field_args: list[str]  # ``field(...)`` keywords that stay on the annotation (compare, repr, hash, ...)


@dataclass(slots=True)
class _Edit:
    first_line: int  # 1-based, inclusive
    last_line: int  # inclusive
    lines: list[str]


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _dataclass_decorator(cls: ast.ClassDef) -> ast.expr | None:
    for decorator in cls.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if _dotted(target) in DATACLASS_NAMES:
            return decorator
    return None


def _flag(decorator: ast.expr, name: str, default: bool) -> bool:
    if not isinstance(decorator, ast.Call):
        return default
    for keyword in decorator.keywords:
        if keyword.arg == name:
            if not isinstance(keyword.value, ast.Constant) or not isinstance(keyword.value.value, bool):
                raise GenerationError(f"dataclass option {name}= must be a literal True or False")
            return keyword.value.value
    return default


def _segment(source: str, node: ast.AST) -> str:
    text = ast.get_source_segment(source, node)
    if text is None:  # pragma: no cover - every node parsed from source has a segment
        raise GenerationError("no source for a node")
    return text


def _parameter_type(source: str, annotation: ast.expr) -> str | None:
    """The type a parameter takes for a field so annotated; None for a ``ClassVar`` (not a field)."""
    head = annotation.value if isinstance(annotation, ast.Subscript) else annotation
    name = _dotted(head).rsplit(".", 1)[-1]
    if name == "ClassVar":
        return None
    if name in ("InitVar", "KW_ONLY"):
        raise GenerationError(f"{name} is not supported")
    if name == "Final":
        if not isinstance(annotation, ast.Subscript):
            raise GenerationError("a bare Final field has no type to give its parameter")
        return _segment(source, annotation.slice)
    return _segment(source, annotation)


def _fields(source: str, cls: ast.ClassDef, kw_only: bool) -> list[_Field]:
    fields = []
    for statement in cls.body:
        if not isinstance(statement, ast.AnnAssign) or not isinstance(statement.target, ast.Name):
            continue
        annotation = _parameter_type(source, statement.annotation)
        if annotation is None:
            continue
        default = factory = None
        init, field_kw_only, kept = True, kw_only, []
        value = statement.value
        if isinstance(value, ast.Call) and _dotted(value.func) in FIELD_NAMES:
            if value.args:
                raise GenerationError(f"field {statement.target.id}: field() takes keywords only")
            for keyword in value.keywords:
                text = _segment(source, keyword.value)
                if keyword.arg == "default":
                    default = text
                elif keyword.arg == "default_factory":
                    factory = text
                elif keyword.arg in ("init", "kw_only"):
                    if not isinstance(keyword.value, ast.Constant) or not isinstance(keyword.value.value, bool):
                        raise GenerationError(f"field {statement.target.id}: {keyword.arg}= must be a literal")
                    if keyword.arg == "init":
                        init = keyword.value.value
                    else:
                        field_kw_only = keyword.value.value
                elif keyword.arg is None:
                    raise GenerationError(f"field {statement.target.id}: field(**...) is not supported")
                else:
                    kept.append(f"{keyword.arg}={text}")
        elif value is not None:
            default = _segment(source, value)
        if factory is not None and _admits_none(statement.annotation):
            raise GenerationError(
                f"field {statement.target.id}: a default_factory on a type that admits None cannot be told "
                "apart from an argument of None"
            )
        fields.append(_Field(statement.target.id, annotation, default, factory, init, field_kw_only, statement, kept))
    return fields


def _admits_none(annotation: ast.expr) -> bool:
    """Whether None is a value of the annotated type (a member of its top-level union, or Any, object or
    Optional; a ``Final[...]`` is looked through)."""
    if isinstance(annotation, ast.Subscript) and _dotted(annotation.value).rsplit(".", 1)[-1] == "Final":
        return _admits_none(annotation.slice)
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return _admits_none(annotation.left) or _admits_none(annotation.right)
    if isinstance(annotation, ast.Constant):
        return annotation.value is None or (isinstance(annotation.value, str) and "None" in annotation.value)
    head = annotation.value if isinstance(annotation, ast.Subscript) else annotation
    return _dotted(head).rsplit(".", 1)[-1] in ("None", "Optional", "Any", "object", "Union")


def _parameter(field: _Field) -> str:
    if field.factory is not None:
        return f"{field.name}: {field.annotation} | None = None"
    if field.default is not None:
        return f"{field.name}: {field.annotation} = {field.default}"
    return f"{field.name}: {field.annotation}"


#: factories whose call is written as a display (what the interpreter builds fastest)
DISPLAYS = {"list": "[]", "dict": "{}"}


def _assignment(field: _Field) -> str:
    made = None if field.factory is None else DISPLAYS.get(field.factory, f"{field.factory}()")
    if field.init and made is not None:
        return f"self.{field.name} = {made} if {field.name} is None else {field.name}"
    if field.init:
        return f"self.{field.name} = {field.name}"
    if made is not None:
        return f"self.{field.name} = {made}"
    if field.default is not None:
        return f"self.{field.name} = {field.default}"
    raise GenerationError(f"field {field.name}: init=False needs a default or a default_factory")


def _init(cls: ast.ClassDef, fields: list[_Field], indent: str) -> list[str]:
    positional = [f for f in fields if f.init and not f.kw_only]
    keyword = [f for f in fields if f.init and f.kw_only]
    seen_default = False
    for f in positional:
        if f.default is None and f.factory is None and seen_default:
            raise GenerationError(f"field {f.name}: a field without a default follows one with a default")
        seen_default = seen_default or f.default is not None or f.factory is not None
    parameters = ["self", *(_parameter(f) for f in positional)]
    if keyword:
        parameters += ["*", *(_parameter(f) for f in keyword)]
    body = [_assignment(f) for f in fields]
    if any(isinstance(s, ast.FunctionDef) and s.name == "__post_init__" for s in cls.body):
        body.append("self.__post_init__()")
    inner = indent + "    "
    lines = [f"{indent}def __init__(", *(f"{inner}{p}," for p in parameters), f"{indent}) -> None:"]
    lines += [f"{inner}{line}" for line in body or ["pass"]]
    return lines


def _class_edits(source: str, lines: list[str], cls: ast.ClassDef) -> list[_Edit] | None:
    decorator = _dataclass_decorator(cls)
    if decorator is None or cls.bases or cls.keywords:
        return None
    if not _flag(decorator, "init", True) or _flag(decorator, "frozen", False):
        return None
    if any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == "__init__" for s in cls.body):
        return None
    try:
        fields = _fields(source, cls, _flag(decorator, "kw_only", False))
        indent = " " * cls.body[0].col_offset
        init = _init(cls, fields, indent)
    except GenerationError as exc:
        raise GenerationError(f"{cls.name} (line {cls.lineno}): {exc}") from None
    edits = []
    # the decorator: init=False, so the dataclass machinery keeps the written __init__
    if isinstance(decorator, ast.Call):
        call = _segment(source, decorator)
        rewritten = call[:-1].rstrip().rstrip(",") + (", " if decorator.keywords or decorator.args else "")
        replacement = rewritten + "init=False)"
    else:
        replacement = _segment(source, decorator) + "(init=False)"
    edits.append(_replace(lines, decorator, replacement))
    # the fields: the bare annotation (the defaults are in __init__ now)
    for f in fields:
        if f.statement.value is None:
            continue
        text = f"{f.name}: {_segment(source, f.statement.annotation)}"
        if f.kept_field_args and isinstance(f.statement.value, ast.Call):
            text += f" = {_segment(source, f.statement.value.func)}({', '.join(f.kept_field_args)})"
        edits.append(_replace(lines, f.statement, text))
    # the constructor, after the class's last statement
    last = cls.end_lineno or cls.lineno
    edits.append(_Edit(last + 1, last, ["", *init]))
    return edits


def _replace(lines: list[str], node: ast.stmt | ast.expr, text: str) -> _Edit:
    """Replace the whole lines ``node`` spans with ``text``, keeping what precedes and follows it on them."""
    first, last = node.lineno, node.end_lineno or node.lineno
    head = lines[first - 1][: node.col_offset]
    tail = lines[last - 1][_end_col(lines, node) :]
    return _Edit(first, last, (head + text + tail).split("\n"))


def _end_col(lines: list[str], node: ast.stmt | ast.expr) -> int:
    # ast gives UTF-8 byte offsets: turn the end offset into a character index of its line
    line = lines[(node.end_lineno or node.lineno) - 1]
    return len(line.encode()[: node.end_col_offset or 0].decode())


def generate(source: str) -> tuple[str, list[str]]:
    """``source`` with every dataclass it can give a written ``__init__`` rewritten to carry one, and the names
    of those classes. Raises ``GenerationError`` for a dataclass it would have to rewrite unfaithfully."""
    tree = ast.parse(source)
    lines = source.split("\n")
    classes = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    edits: list[_Edit] = []
    names = []
    for cls in classes:
        class_edits = _class_edits(source, lines, cls)
        if class_edits is not None:
            edits += class_edits
            names.append(cls.name)
    if not names:
        return source, []
    future = {
        a.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module == "__future__"
        for a in node.names
    }
    if "annotations" not in future:
        raise GenerationError("a module with generated constructors needs `from __future__ import annotations`")
    for edit in sorted(edits, key=lambda e: (e.first_line, e.last_line), reverse=True):
        lines[edit.first_line - 1 : edit.last_line] = edit.lines
    return "\n".join(lines), names


def generate_file(path: Path) -> list[str]:
    """Rewrite ``path`` in place (a copy of a source file); return the classes given a constructor."""
    try:
        text, names = generate(path.read_text(encoding="utf-8"))
    except GenerationError as exc:
        raise GenerationError(f"{path}: {exc}") from None
    if names:
        path.write_text(text, encoding="utf-8")
    return names


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tools.constructors FILE", file=sys.stderr)
        return 2
    try:
        text, _ = generate(Path(argv[0]).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, GenerationError) as exc:
        print(f"constructors: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
