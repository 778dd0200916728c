"""Abstract syntax tree of P4_16 programs.

The parser (``parser.py``) builds these nodes; the compiler (``p4sim.compiler``) reads
them. Every node carries ``loc`` (file, line, column of its first token) so that any later
stage can report ``file:line:col: error: ...``.

Example::

    prog = parse_program("basic.p4")
    for decl in prog.declarations:
        if isinstance(decl, ControlDecl):
            print(decl.name, [p.name for p in decl.params])

Conventions:
- names are plain ``str``; dotted paths are ``Member`` chains of expressions;
- optional children are ``None`` when absent; lists are ``list`` (possibly empty);
- annotations are kept on every declaration that may carry them, in source order.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SourceLoc:
    """Position of a token in the *original* file (after #include / #line mapping)."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


NO_LOC = SourceLoc("<builtin>", 0, 0)


@dataclass
class Node:
    loc: SourceLoc = field(default=NO_LOC, kw_only=True, compare=False, repr=False)


@dataclass
class Annotation(Node):
    """``@name``, ``@name(expr, ...)`` or ``@name[k=v, ...]``.

    ``args`` holds parsed expressions when the body parses as an expression list, and
    ``raw`` the body's token text (for unstructured annotations such as ``@pragma``).
    ``kv`` holds key=value pairs of the structured ``[...]`` form.
    """

    name: str
    args: list[Expr] = field(default_factory=list)
    raw: str = ""
    kv: dict[str, Expr] = field(default_factory=dict)


# --------------------------------------------------------------------------- types


@dataclass
class Type(Node):
    pass


@dataclass
class BitType(Type):
    """``bit<W>``; ``width`` is an expression (usually ``IntLit``) folded by the compiler.
    Plain ``bit`` is ``BitType(IntLit(1))``."""

    width: Expr


@dataclass
class IntType(Type):
    """``int<W>``; ``width is None`` for the arbitrary-precision ``int``."""

    width: Expr | None


@dataclass
class VarbitType(Type):
    max_width: Expr


@dataclass
class BoolType(Type):
    pass


@dataclass
class StringType(Type):
    pass


@dataclass
class ErrorType(Type):
    pass


@dataclass
class MatchKindType(Type):
    pass


@dataclass
class VoidType(Type):
    pass


@dataclass
class DontCareType(Type):
    """``_`` used as a type argument."""


@dataclass
class NamedType(Type):
    """A reference to a declared type, with optional type arguments:
    ``headers_t``, ``register<bit<32>>``, ``.top_level_name`` (``dot_prefix``)."""

    name: str
    type_args: list[Type] = field(default_factory=list)
    dot_prefix: bool = False


@dataclass
class HeaderStackType(Type):
    """``elem[size]``."""

    elem: Type
    size: Expr


@dataclass
class TupleType(Type):
    elems: list[Type]


# --------------------------------------------------------------------------- expressions


@dataclass
class Expr(Node):
    pass


@dataclass
class IntLit(Expr):
    """Integer literal. ``width`` / ``signed`` come from a ``8w5`` / ``8s5`` prefix;
    ``width is None`` for an unsized literal (type ``int``)."""

    value: int
    width: int | None = None
    signed: bool = False
    text: str = ""


@dataclass
class BoolLit(Expr):
    value: bool


@dataclass
class StringLit(Expr):
    value: str


@dataclass
class Name(Expr):
    """An identifier in expression position; ``dot_prefix`` for ``.name``."""

    name: str
    dot_prefix: bool = False


@dataclass
class Member(Expr):
    """``expr.name`` (fields, methods, ``isValid``, ``next``, ``hit``, ``action_run``,
    enum members such as ``HashAlgorithm.crc16``, ``error.NoMatch``)."""

    expr: Expr
    name: str


@dataclass
class Index(Expr):
    """``expr[index]`` (header stack element or tuple element)."""

    expr: Expr
    index: Expr


@dataclass
class Slice(Expr):
    """``expr[hi:lo]``."""

    expr: Expr
    hi: Expr
    lo: Expr


@dataclass
class Unary(Expr):
    """``op`` in ``-`` ``!`` ``~`` ``+``."""

    op: str
    expr: Expr


@dataclass
class Binary(Expr):
    """``op`` in ``* / % + - |+| |-| << >> <= >= < > != == & ^ | ++ && ||``."""

    op: str
    left: Expr
    right: Expr


@dataclass
class Ternary(Expr):
    cond: Expr
    then: Expr
    other: Expr


@dataclass
class Cast(Expr):
    type: Type
    expr: Expr


@dataclass
class Call(Expr):
    """``func<type_args>(args)``; ``func`` is ``Name`` or ``Member`` (method call)."""

    func: Expr
    args: list[Argument] = field(default_factory=list)
    type_args: list[Type] = field(default_factory=list)


@dataclass
class Argument(Node):
    """A call argument; ``name`` for named arguments (``f(x = 1)``); ``value`` is
    ``DontCare`` for ``_``."""

    value: Expr
    name: str | None = None


@dataclass
class ListExpr(Expr):
    """``{a, b, c}`` (list / tuple / struct-by-position initialiser)."""

    elems: list[Expr]


@dataclass
class StructInit(Expr):
    """``{f1 = e1, f2 = e2}``; ``type`` when written as ``(T){...}`` or
    ``T {f = e}``, else ``None``."""

    fields: list[tuple[str, Expr]]
    type: Type | None = None


@dataclass
class TypeExpr(Expr):
    """A type in expression position, e.g. ``bit<8>`` as a constructor argument or the
    target of ``sizeInBits``/``minSizeInBits``."""

    type: Type


@dataclass
class Mask(Expr):
    """``value &&& mask`` (select / const entries keyset)."""

    value: Expr
    mask: Expr


@dataclass
class Range(Expr):
    """``lo .. hi`` (select / const entries keyset)."""

    lo: Expr
    hi: Expr


@dataclass
class Default(Expr):
    """``default`` keyset."""


@dataclass
class DontCare(Expr):
    """``_`` keyset or argument."""


@dataclass
class ErrorMember(Expr):
    """``error.Name``."""

    name: str


# --------------------------------------------------------------------------- statements


@dataclass
class Stmt(Node):
    pass


@dataclass
class Assign(Stmt):
    """``target = value``; ``a op= b`` is ``a = a op b`` with ``compound`` set: the
    target is evaluated once (``value.left`` is a copy of it in the AST)."""

    target: Expr
    value: Expr
    compound: bool = False


@dataclass
class CallStmt(Stmt):
    call: Call


@dataclass
class Block(Stmt):
    stmts: list[Stmt]
    annotations: list[Annotation] = field(default_factory=list)


@dataclass
class If(Stmt):
    cond: Expr
    then: Stmt
    other: Stmt | None = None


@dataclass
class SwitchCase(Node):
    """One ``label: body`` of a switch. ``labels`` holds one or more labels (several for
    fall-through groups ``a: b: {..}``); a label is a ``Name`` (action name when switching
    on ``action_run``), an expression, or ``Default``. ``body is None`` for a fall-through
    label with no block of its own (already folded into ``labels`` by the parser)."""

    labels: list[Expr]
    body: Block | None


@dataclass
class Switch(Stmt):
    expr: Expr
    cases: list[SwitchCase]


@dataclass
class Exit(Stmt):
    pass


@dataclass
class Return(Stmt):
    value: Expr | None = None


@dataclass
class Empty(Stmt):
    pass


@dataclass
class VarDeclStmt(Stmt):
    decl: VarDecl


@dataclass
class For(Stmt):
    """``for (init; cond; update) body`` (P4_16 v1.2.5). ``init`` holds declarations and
    assignments/calls, ``update`` assignments/calls; ``cond is None`` loops until break."""

    init: list[Stmt]
    cond: Expr | None
    update: list[Stmt]
    body: Stmt


@dataclass
class ForIn(Stmt):
    """``for (T x in lo..hi) body`` (``hi`` set, bounds inclusive) or
    ``for (T x in collection) body`` (a list expression or a header stack)."""

    type: Type
    name: str
    collection: Expr
    hi: Expr | None
    body: Stmt


@dataclass
class Break(Stmt):
    pass


@dataclass
class Continue(Stmt):
    pass


@dataclass
class ConstDeclStmt(Stmt):
    decl: ConstDecl


# --------------------------------------------------------------------------- declarations


@dataclass
class Decl(Node):
    name: str
    annotations: list[Annotation] = field(default_factory=list, kw_only=True)


@dataclass
class Param(Node):
    """``direction`` in ``in`` ``out`` ``inout`` or ``""`` (directionless)."""

    direction: str
    type: Type
    name: str
    default: Expr | None = None
    annotations: list[Annotation] = field(default_factory=list)


@dataclass
class ConstDecl(Decl):
    type: Type
    value: Expr


@dataclass
class VarDecl(Decl):
    type: Type
    init: Expr | None = None


@dataclass
class TypedefDecl(Decl):
    """``typedef T name;`` (``is_newtype`` False) or ``type T name;`` (True)."""

    type: Type
    is_newtype: bool = False


@dataclass
class StructField(Node):
    type: Type
    name: str
    annotations: list[Annotation] = field(default_factory=list)


@dataclass
class HeaderDecl(Decl):
    fields: list[StructField]
    type_params: list[str] = field(default_factory=list)


@dataclass
class HeaderUnionDecl(Decl):
    fields: list[StructField]
    type_params: list[str] = field(default_factory=list)


@dataclass
class StructDecl(Decl):
    fields: list[StructField]
    type_params: list[str] = field(default_factory=list)


@dataclass
class EnumDecl(Decl):
    """Plain enum (``underlying is None``, members' values None) or serializable enum
    ``enum bit<8> E { A = 1, B = 2 }``."""

    members: list[tuple[str, Expr | None]]
    underlying: Type | None = None


@dataclass
class ErrorDecl(Decl):
    """``error { A, B }`` (name is ``"error"``); several declarations merge."""

    members: list[str]


@dataclass
class MatchKindDecl(Decl):
    """``match_kind { exact, lpm }`` (name is ``"match_kind"``); several merge."""

    members: list[str]


@dataclass
class ParserState(Node):
    name: str
    stmts: list[Stmt]
    transition: Transition | None
    annotations: list[Annotation] = field(default_factory=list)


@dataclass
class Transition(Node):
    pass


@dataclass
class DirectTransition(Transition):
    """``transition next_state;`` (``accept`` / ``reject`` included)."""

    state: str


@dataclass
class SelectCase(Node):
    """``keyset: next_state;``. ``keyset`` is an expression, ``Mask``, ``Range``,
    ``Default``, ``DontCare`` or a ``ListExpr`` of those for tuple keys."""

    keyset: Expr
    state: str


@dataclass
class SelectTransition(Transition):
    exprs: list[Expr]
    cases: list[SelectCase]


@dataclass
class ParserDecl(Decl):
    """A parser with a body. ``ctor_params`` are constructor parameters
    (``parser P(...)(bit<8> c)``); ``locals`` are local declarations (constants, variables,
    instantiations, value sets)."""

    params: list[Param]
    locals: list[Decl]
    states: list[ParserState]
    type_params: list[str] = field(default_factory=list)
    ctor_params: list[Param] = field(default_factory=list)


@dataclass
class ParserTypeDecl(Decl):
    """``parser P<H>(packet_in b, out H h);`` (no body, used by package declarations)."""

    params: list[Param]
    type_params: list[str] = field(default_factory=list)


@dataclass
class ControlDecl(Decl):
    params: list[Param]
    locals: list[Decl]
    body: Block
    type_params: list[str] = field(default_factory=list)
    ctor_params: list[Param] = field(default_factory=list)


@dataclass
class ControlTypeDecl(Decl):
    params: list[Param]
    type_params: list[str] = field(default_factory=list)


@dataclass
class PackageTypeDecl(Decl):
    """``package V1Switch<H, M>(Parser<H, M> p, ...);``."""

    params: list[Param]
    type_params: list[str] = field(default_factory=list)


@dataclass
class ActionDecl(Decl):
    params: list[Param]
    body: Block


@dataclass
class FunctionDecl(Decl):
    """A function with a body, or a function prototype (``body is None``), e.g. the
    extern functions of v1model (``extern void mark_to_drop(...)``: ``is_extern``)."""

    return_type: Type
    params: list[Param]
    body: Block | None = None
    type_params: list[str] = field(default_factory=list)
    is_extern: bool = False


@dataclass
class MethodDecl(Node):
    """A method prototype inside an extern declaration; a constructor has
    ``return_type is None`` and ``name`` equal to the extern's name. ``is_abstract`` for
    ``abstract`` methods."""

    name: str
    return_type: Type | None
    params: list[Param]
    type_params: list[str] = field(default_factory=list)
    is_abstract: bool = False
    annotations: list[Annotation] = field(default_factory=list)


@dataclass
class ExternDecl(Decl):
    """``extern register<T> { register(bit<32> size); void read(out T r, in bit<32> i); }``."""

    methods: list[MethodDecl]
    type_params: list[str] = field(default_factory=list)


@dataclass
class Instantiation(Decl):
    """``register<bit<32>>(1024) r;`` / ``MyParser() p;`` / ``V1Switch(...) main;``.
    ``type`` is a ``NamedType`` (with type args). ``initializer`` holds the body of an
    instantiation with an initializer block (rare, abstract methods)."""

    type: Type
    args: list[Argument]
    initializer: list[Decl] = field(default_factory=list)


@dataclass
class KeyElement(Node):
    """``expr : match_kind @name("...")``."""

    expr: Expr
    match_kind: str
    annotations: list[Annotation] = field(default_factory=list)


@dataclass
class ActionRef(Node):
    """An action in a table's ``actions`` list, possibly with bound arguments."""

    name: str
    args: list[Argument] = field(default_factory=list)
    annotations: list[Annotation] = field(default_factory=list)


@dataclass
class TableEntry(Node):
    """One entry of ``const entries`` / ``entries``. ``keyset`` is a list with one
    expression per key (``Mask``, ``Range``, ``DontCare``, ``Default`` allowed);
    ``priority`` when written as ``priority = N:``."""

    keyset: list[Expr]
    action: ActionRef
    priority: Expr | None = None
    is_const: bool = False
    annotations: list[Annotation] = field(default_factory=list)


@dataclass
class TableProperty(Node):
    """A property other than key/actions/entries/default_action: ``size = 1024``,
    ``counters = c``, ``meters = m``, ``implementation = ...``, ``support_timeout = true``,
    or any custom ``name = expr``. ``is_const`` for ``const name = ...``."""

    name: str
    value: Expr
    is_const: bool = False
    annotations: list[Annotation] = field(default_factory=list)


@dataclass
class TableDecl(Decl):
    keys: list[KeyElement]
    actions: list[ActionRef]
    default_action: ActionRef | None = None
    default_action_const: bool = False
    entries: list[TableEntry] = field(default_factory=list)
    entries_const: bool = False
    properties: list[TableProperty] = field(default_factory=list)
    empty_params: SourceLoc | None = None  # where `table t() {` wrote its parentheses


@dataclass
class ValueSetDecl(Decl):
    """``value_set<bit<16>>(4) pvs;``."""

    elem_type: Type
    size: Expr


@dataclass
class Program(Node):
    declarations: list[Decl]
    files: list[str] = field(default_factory=list)
