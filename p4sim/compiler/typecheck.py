"""Types, scopes and constant folding for the p4sim compiler.

Example::

    env = GlobalEnv(program)                 # collects every top-level declaration
    t = env.resolve(ast.BitType(ast.IntLit(8)))   # -> TBit(8, False)
    env.const_int(ast.Binary("+", ast.IntLit(3), ast.IntLit(4)))   # -> 7

The code generator (``codegen.py``) asks this module for the type of every name it meets
and for compile-time constants (widths, sizes, ``const`` declarations). Type errors are
raised as ``P4Error`` with the location of the offending node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from p4sim.frontend import ast
from p4sim.frontend.diagnostics import P4Error

# --------------------------------------------------------------------------- types


class T:
    """Base of every compiler type."""

    def show(self) -> str:
        return type(self).__name__


@dataclass(frozen=True)
class TBit(T):
    """``bit<W>`` (``signed`` False) or ``int<W>`` (``signed`` True)."""

    width: int
    signed: bool = False

    def show(self) -> str:
        return f"{'int' if self.signed else 'bit'}<{self.width}>"


@dataclass(frozen=True)
class TInfInt(T):
    """The arbitrary-precision ``int`` of unsized literals and constants."""

    def show(self) -> str:
        return "int"


@dataclass(frozen=True)
class TBool(T):
    def show(self) -> str:
        return "bool"


@dataclass(frozen=True)
class TString(T):
    def show(self) -> str:
        return "string"


@dataclass(frozen=True)
class TVoid(T):
    def show(self) -> str:
        return "void"


@dataclass(frozen=True)
class TError(T):
    def show(self) -> str:
        return "error"


@dataclass(frozen=True)
class TMatchKind(T):
    def show(self) -> str:
        return "match_kind"


@dataclass(frozen=True)
class TDontCare(T):
    def show(self) -> str:
        return "_"


@dataclass(frozen=True)
class TVarbit(T):
    max_width: int

    def show(self) -> str:
        return f"varbit<{self.max_width}>"


@dataclass(frozen=True, eq=False)
class TComposite(T):
    """Header, struct or header union; ``kind`` in header|struct|union.

    Compared by identity: two declarations with the same fields are different types.
    """

    kind: str
    name: str
    fields: tuple[tuple[str, T], ...]
    annotations: tuple = ()
    field_annotations: tuple = ()

    def field_type(self, name: str) -> T | None:
        for n, t in self.fields:
            if n == name:
                return t
        return None

    def show(self) -> str:
        return self.name

    @property
    def width(self) -> int:
        """Total width in bits (headers: fixed fields; varbit counted at max)."""
        return sum(type_width(t) for _, t in self.fields)


@dataclass(frozen=True)
class TStack(T):
    elem: T
    size: int

    def show(self) -> str:
        return f"{self.elem.show()}[{self.size}]"


@dataclass(frozen=True, eq=False)
class TEnum(T):
    """Enum; ``underlying`` is set for serializable enums (``values`` then maps members)."""

    name: str
    members: tuple[str, ...]
    underlying: TBit | None = None
    values: tuple[tuple[str, int], ...] = ()

    def show(self) -> str:
        return self.name


@dataclass(frozen=True)
class TTuple(T):
    elems: tuple[T, ...]

    def show(self) -> str:
        return "tuple<" + ", ".join(e.show() for e in self.elems) + ">"


@dataclass(frozen=True)
class TList(T):
    """An untyped ``{a, b}`` list expression (becomes a tuple or a struct by context)."""

    elems: tuple[T, ...]

    def show(self) -> str:
        return "{" + ", ".join(e.show() for e in self.elems) + "}"


@dataclass(frozen=True, eq=False)
class TExtern(T):
    name: str
    args: tuple[T, ...]
    decl: ast.ExternDecl

    def show(self) -> str:
        if not self.args:
            return self.name
        return f"{self.name}<{', '.join(a.show() for a in self.args)}>"


@dataclass(frozen=True)
class TTypeVar(T):
    """A type parameter not bound yet (generic extern methods/functions)."""

    name: str

    def show(self) -> str:
        return self.name


@dataclass(frozen=True)
class TObject(T):
    """Something that is not a value: table, action, parser/control instance, package."""

    kind: str
    name: str

    def show(self) -> str:
        return f"{self.kind} {self.name}"


BOOL = TBool()
INFINT = TInfInt()
VOID = TVoid()
ERROR = TError()
STRING = TString()


def is_header(t: T) -> bool:
    return isinstance(t, TComposite) and t.kind == "header"


def is_composite(t: T) -> bool:
    return isinstance(t, (TComposite, TStack, TTuple))


def fixed_bits(t: T) -> bool:
    """A type a header field may have besides varbit (P4_16 7.2.2): bit<W>, int<W>, bool,
    a serializable enum, or a struct of these (nested structs too)."""
    if isinstance(t, (TBit, TBool)):
        return True
    if isinstance(t, TEnum):
        return t.underlying is not None
    if isinstance(t, TComposite) and t.kind == "struct":
        return all(fixed_bits(ft) for _, ft in t.fields)
    return False


def type_width(t: T) -> int:
    """Width in bits of a fixed-size type (``sizeInBits``); varbit counts 0 (dynamic)."""
    if isinstance(t, TBit):
        return t.width
    if isinstance(t, TBool):
        return 1
    if isinstance(t, TEnum) and t.underlying is not None:
        return t.underlying.width
    if isinstance(t, TComposite):
        if t.kind == "union":
            return max((type_width(ft) for _, ft in t.fields), default=0)
        return sum(type_width(ft) for _, ft in t.fields)
    if isinstance(t, TStack):
        return type_width(t.elem) * t.size
    if isinstance(t, TTuple):
        return sum(type_width(e) for e in t.elems)
    if isinstance(t, TVarbit):
        return 0
    return 0


def same_type(a: T, b: T) -> bool:
    if isinstance(a, (TComposite, TEnum, TExtern)):
        return a is b or (type(a) is type(b) and a.name == b.name)
    if isinstance(a, TStack) and isinstance(b, TStack):
        return a.size == b.size and same_type(a.elem, b.elem)
    if isinstance(a, TTuple) and isinstance(b, TTuple):
        return len(a.elems) == len(b.elems) and all(
            same_type(x, y) for x, y in zip(a.elems, b.elems, strict=False)
        )
    return a == b


# --------------------------------------------------------------------------- symbols


@dataclass
class Sym:
    """A name in scope. ``kind``: var, param, const, table, action, instance, function,
    value_set, state, type. ``code`` is the Python expression that reads it; ``value``
    a compile-time constant; ``decl`` the declaring AST node."""

    kind: str
    type: T
    code: str = ""
    value: Any = None
    decl: Any = None
    direction: str = ""
    extra: dict = field(default_factory=dict)


class Scope:
    """A chain of name → Sym dictionaries (block inside action inside control ...)."""

    def __init__(self, parent: Scope | None = None) -> None:
        self.parent = parent
        self.names: dict[str, Sym] = {}

    def lookup(self, name: str) -> Sym | None:
        s: Scope | None = self
        while s is not None:
            sym = s.names.get(name)
            if sym is not None:
                return sym
            s = s.parent
        return None

    def declare(self, name: str, sym: Sym, loc: ast.SourceLoc) -> None:
        if name in self.names and self.names[name].kind not in ("function", "action"):
            raise P4Error(loc, f"duplicate declaration of '{name}'")
        self.names[name] = sym

    def child(self) -> Scope:
        return Scope(self)


# --------------------------------------------------------------------------- global env


_TYPE_DECLS = (
    ast.HeaderDecl,
    ast.HeaderUnionDecl,
    ast.StructDecl,
    ast.EnumDecl,
    ast.TypedefDecl,
    ast.ExternDecl,
    ast.ParserTypeDecl,
    ast.ControlTypeDecl,
    ast.PackageTypeDecl,
    ast.ParserDecl,
    ast.ControlDecl,
)


def annotation(annos: list[ast.Annotation], name: str) -> ast.Annotation | None:
    for a in annos:
        if a.name == name:
            return a
    return None


def name_annotation(annos: list[ast.Annotation]) -> str | None:
    """The string of ``@name("...")`` or None."""
    a = annotation(annos, "name")
    if a is None:
        return None
    if a.args and isinstance(a.args[0], ast.StringLit):
        return a.args[0].value
    raw = a.raw.strip().strip("()").strip()
    return raw.strip('"') if raw else None


class GlobalEnv:
    """Every top-level declaration of a program, with type resolution and folding."""

    def __init__(self, program: ast.Program) -> None:
        self.program = program
        self.type_decls: dict[str, ast.Decl] = {}
        self.errors: list[str] = []
        self.match_kinds: list[str] = []
        self.scope = Scope()
        self.functions: dict[str, list[ast.FunctionDecl]] = {}
        self.actions: dict[str, ast.ActionDecl] = {}
        self.instantiations: list[ast.Instantiation] = []
        self._resolving: set[str] = set()
        self._cache: dict[str, T] = {}
        for d in program.declarations:
            self._collect(d)

    # -- collection ---------------------------------------------------------------

    def _collect(self, d: ast.Decl) -> None:
        if isinstance(d, ast.ErrorDecl):
            for m in d.members:
                if m not in self.errors:
                    self.errors.append(m)
        elif isinstance(d, ast.MatchKindDecl):
            for m in d.members:
                if m not in self.match_kinds:
                    self.match_kinds.append(m)
        elif isinstance(d, _TYPE_DECLS):
            if d.name in self.type_decls and not isinstance(d, ast.ExternDecl):
                prev = self.type_decls[d.name]
                if not isinstance(prev, (ast.ParserTypeDecl, ast.ControlTypeDecl)):
                    raise P4Error(
                        d.loc,
                        f"duplicate declaration of type '{d.name}'",
                        notes=[(prev.loc, "previous declaration")],
                    )
            if isinstance(d, ast.ExternDecl) and d.name in self.type_decls:
                old = self.type_decls[d.name]
                if isinstance(old, ast.ExternDecl):
                    old.methods.extend(d.methods)
                    return
            self.type_decls[d.name] = d
        elif isinstance(d, ast.ConstDecl):
            self.scope.declare(d.name, Sym("const", INFINT, decl=d), d.loc)
        elif isinstance(d, ast.FunctionDecl):
            self.functions.setdefault(d.name, []).append(d)
            self.scope.names[d.name] = Sym("function", VOID, decl=d)
        elif isinstance(d, ast.ActionDecl):
            if d.name in self.actions:
                raise P4Error(d.loc, f"duplicate declaration of action '{d.name}'")
            self.actions[d.name] = d
            self.scope.names[d.name] = Sym("action", TObject("action", d.name), decl=d)
        elif isinstance(d, ast.Instantiation):
            block = self.type_decls.get(d.type.name) if isinstance(d.type, ast.NamedType) else None
            if isinstance(block, (ast.ParserDecl, ast.ControlDecl)):
                kind = "parser" if isinstance(block, ast.ParserDecl) else "control"
                raise P4Error(
                    d.loc,
                    f"'{d.name}': a {kind} cannot be instantiated at top level (only externs"
                    f" and packages can, as p4c says): pass {block.name}(...) to the package",
                )
            self.instantiations.append(d)
        elif isinstance(d, (ast.VarDecl, ast.ValueSetDecl, ast.TableDecl)):
            raise P4Error(d.loc, f"'{d.name}': this declaration is not allowed at top level")

    def const_sym(self, name: str) -> Sym | None:
        sym = self.scope.lookup(name)
        if sym is None or sym.kind != "const":
            return sym
        if sym.value is None:
            d = sym.decl
            t = self.resolve(d.type)
            sym.type = t
            sym.value = ("pending",)
            sym.value = self.const_value(d.value, t)
        return sym

    # -- types --------------------------------------------------------------------

    def resolve(self, t: ast.Type | None, tvars: dict[str, T] | None = None) -> T:
        """The compiler type of an AST type; type variables come from ``tvars``."""
        if t is None:
            return VOID
        if isinstance(t, ast.BitType):
            w = self.const_int(t.width)
            if w <= 0:
                raise P4Error(t.loc, f"bit width must be positive, got {w}")
            return TBit(w)
        if isinstance(t, ast.IntType):
            if t.width is None:
                return INFINT
            w = self.const_int(t.width)
            if w <= 0:
                raise P4Error(t.loc, f"int width must be positive, got {w}")
            return TBit(w, True)
        if isinstance(t, ast.VarbitType):
            return TVarbit(self.const_int(t.max_width))
        if isinstance(t, ast.BoolType):
            return BOOL
        if isinstance(t, ast.StringType):
            return STRING
        if isinstance(t, ast.ErrorType):
            return ERROR
        if isinstance(t, ast.MatchKindType):
            return TMatchKind()
        if isinstance(t, ast.VoidType):
            return VOID
        if isinstance(t, ast.DontCareType):
            return TDontCare()
        if isinstance(t, ast.HeaderStackType):
            return TStack(self.resolve(t.elem, tvars), self.const_int(t.size))
        if isinstance(t, ast.TupleType):
            return TTuple(tuple(self.resolve(e, tvars) for e in t.elems))
        if isinstance(t, ast.NamedType):
            # inside a generic function's body its type parameters are bound (fn_tvars)
            if tvars is None:
                tvars = getattr(self, "fn_tvars", None)
            return self._resolve_named(t, tvars or {})
        raise P4Error(t.loc, f"unsupported type {type(t).__name__}")

    def _resolve_named(self, t: ast.NamedType, tvars: dict[str, T]) -> T:
        if t.name in tvars and not t.dot_prefix:
            return tvars[t.name]
        if t.name == "error":
            return ERROR
        if t.name == "match_kind":
            return TMatchKind()
        d = self.type_decls.get(t.name)
        if d is None:
            raise P4Error(t.loc, f"unknown type '{t.name}'")
        if isinstance(d, ast.ExternDecl):
            args = tuple(self.resolve(a, tvars) for a in t.type_args)
            return TExtern(d.name, args, d)
        if t.type_args and isinstance(d, (ast.HeaderDecl, ast.StructDecl)):
            pairs = zip(d.type_params, t.type_args, strict=False)
            sub = {p: self.resolve(a, tvars) for p, a in pairs}
            return self._composite(d, sub, cache=False)
        cached = self._cache.get(t.name)
        if cached is not None:
            return cached
        if t.name in self._resolving:
            raise P4Error(t.loc, f"recursive type '{t.name}'")
        self._resolving.add(t.name)
        try:
            r = self._resolve_decl(d)
        finally:
            self._resolving.discard(t.name)
        self._cache[t.name] = r
        return r

    def _resolve_decl(self, d: ast.Decl) -> T:
        if isinstance(d, (ast.HeaderDecl, ast.StructDecl, ast.HeaderUnionDecl)):
            return self._composite(d, {}, cache=True)
        if isinstance(d, ast.EnumDecl):
            if d.underlying is None:
                return TEnum(d.name, tuple(m for m, _ in d.members))
            u = self.resolve(d.underlying)
            if not isinstance(u, TBit):
                raise P4Error(d.loc, "a serializable enum needs a bit<W> or int<W> type")
            vals = []
            for m, e in d.members:
                if e is None:
                    raise P4Error(d.loc, f"member '{m}' of serializable enum needs a value")
                vals.append((m, self.const_int(e) & ((1 << u.width) - 1)))
            return TEnum(d.name, tuple(m for m, _ in d.members), u, tuple(vals))
        if isinstance(d, ast.TypedefDecl):
            return self.resolve(d.type)
        return TObject(type(d).__name__.replace("Decl", "").lower(), d.name)

    def _composite(self, d: Any, sub: dict[str, T], cache: bool) -> TComposite:
        kind = {ast.HeaderDecl: "header", ast.StructDecl: "struct", ast.HeaderUnionDecl: "union"}[
            type(d)
        ]
        fields = []
        seen: set[str] = set()
        for f in d.fields:
            if f.name in seen:
                raise P4Error(f.loc, f"duplicate field '{f.name}' in {d.name}")
            seen.add(f.name)
            ft = self.resolve(f.type, sub)
            if kind == "header" and not (isinstance(ft, TVarbit) or fixed_bits(ft)):
                raise P4Error(
                    f.loc,
                    f"header field '{f.name}' has type {ft.show()}; headers hold bit<W>, "
                    "int<W>, bool, varbit, serializable enums and structs of these",
                )
            if kind == "union" and not is_header(ft):
                raise P4Error(f.loc, f"header union member '{f.name}' must be a header")
            fields.append((f.name, ft))
        return TComposite(
            kind,
            d.name,
            tuple(fields),
            tuple(d.annotations),
            tuple(tuple(f.annotations) for f in d.fields),
        )

    # -- constants ----------------------------------------------------------------

    def const_int(self, e: ast.Expr) -> int:
        """Fold a compile-time integer expression (widths, sizes, indices)."""
        v = self.const_value(e, None)
        if isinstance(v, bool) or not isinstance(v, int):
            raise P4Error(e.loc, "expected a compile-time integer constant")
        return v

    def const_value(self, e: ast.Expr, t: T | None) -> Any:
        """Evaluate a constant expression (ints, bools, enum members, errors, lists)."""
        v = self._fold(e)
        if isinstance(t, TBit) and isinstance(v, int) and not isinstance(v, bool):
            v &= (1 << t.width) - 1
        return v

    def _fold(self, e: ast.Expr) -> Any:
        if isinstance(e, ast.IntLit):
            if e.width is not None:
                return e.value & ((1 << e.width) - 1)
            return e.value
        if isinstance(e, ast.BoolLit):
            return e.value
        if isinstance(e, ast.StringLit):
            return e.value
        if isinstance(e, ast.Name):
            sym = self.const_sym(e.name)
            if sym is None or sym.kind != "const":
                raise P4Error(e.loc, f"'{e.name}' is not a compile-time constant")
            if sym.value == ("pending",):
                raise P4Error(e.loc, f"constant '{e.name}' depends on itself")
            return sym.value
        if isinstance(e, ast.ErrorMember):
            return e.name
        if isinstance(e, ast.Member):
            if isinstance(e.expr, ast.Name):
                if e.expr.name == "error":
                    return e.name
                d = self.type_decls.get(e.expr.name)
                if isinstance(d, (ast.EnumDecl, ast.TypedefDecl)):
                    et = self.resolve(ast.NamedType(e.expr.name, loc=e.loc))
                    if isinstance(et, TEnum):
                        if e.name not in et.members:
                            raise P4Error(e.loc, f"enum {et.name} has no member '{e.name}'")
                        return dict(et.values)[e.name] if et.underlying else e.name
            raise P4Error(e.loc, "expected a compile-time constant")
        if isinstance(e, ast.Unary):
            v = self._fold(e.expr)
            return {"-": lambda: -v, "+": lambda: v, "!": lambda: not v, "~": lambda: ~v}[e.op]()
        if isinstance(e, ast.Binary):
            a, b = self._fold(e.left), self._fold(e.right)
            return _fold_binary(e, a, b)
        if isinstance(e, ast.Cast):
            t = self.resolve(e.type)
            v = self._fold(e.expr)
            if isinstance(t, TBit):
                return int(v) & ((1 << t.width) - 1)
            if isinstance(t, TBool):
                return bool(v)
            return v
        if isinstance(e, ast.Ternary):
            return self._fold(e.then) if self._fold(e.cond) else self._fold(e.other)
        if isinstance(e, ast.ListExpr):
            return tuple(self._fold(x) for x in e.elems)
        if (
            isinstance(e, ast.Call)
            and isinstance(e.func, ast.Name)
            and e.func.name
            in (
                "sizeInBits",
                "sizeInBytes",
                "minSizeInBits",
                "minSizeInBytes",
                "maxSizeInBits",
                "maxSizeInBytes",
            )
        ):
            return self.size_of(e)
        if (
            isinstance(e, ast.Call)
            and isinstance(e.func, ast.Member)
            and e.func.name
            in ("minSizeInBits", "minSizeInBytes", "maxSizeInBits", "maxSizeInBytes")
        ):
            return self.size_of(
                ast.Call(ast.Name(e.func.name), [ast.Argument(e.func.expr)], loc=e.loc)
            )
        raise P4Error(e.loc, "expected a compile-time constant")

    def size_of(self, call: ast.Call) -> int:
        arg = call.args[0].value if call.args else None
        if isinstance(arg, ast.TypeExpr):
            t = self.resolve(arg.type)
        elif isinstance(arg, ast.Name) and arg.name in self.type_decls:
            t = self.resolve(ast.NamedType(arg.name, loc=arg.loc))
        else:
            raise P4Error(call.loc, "sizeInBits needs a type here")
        bits = type_width(t)
        return (bits + 7) // 8 if "Bytes" in call.func.name else bits  # type: ignore


def _fold_binary(e: ast.Binary, a: Any, b: Any) -> Any:
    op = e.op
    try:
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op == "/":
            return a // b
        if op == "%":
            return a % b
        if op == "<<":
            return a << b
        if op == ">>":
            return a >> b
        if op == "&":
            return a & b
        if op == "|":
            return a | b
        if op == "^":
            return a ^ b
        if op == "==":
            return a == b
        if op == "!=":
            return a != b
        if op == "<":
            return a < b
        if op == ">":
            return a > b
        if op == "<=":
            return a <= b
        if op == ">=":
            return a >= b
        if op == "&&":
            return a and b
        if op == "||":
            return a or b
    except (TypeError, ZeroDivisionError) as exc:
        raise P4Error(e.loc, f"cannot fold constant expression: {exc}") from None
    raise P4Error(e.loc, f"operator '{op}' is not allowed in this constant expression")
