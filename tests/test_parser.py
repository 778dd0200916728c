"""Tests of the P4_16 parser (p4sim.frontend.parser): AST shapes, precedence, errors."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from p4sim.frontend import ast
from p4sim.frontend.ast import SourceLoc
from p4sim.frontend.diagnostics import P4Error
from p4sim.frontend.parser import parse_program, parse_source, parse_text

PROGRAMS = Path(__file__).parent / "parser_programs"


# --------------------------------------------------------------------------- helpers


def decls(src: str) -> list[ast.Decl]:
    return parse_text(src, "t.p4").declarations


def decl(src: str, name: str) -> ast.Decl:
    found = [d for d in decls(src) if d.name == name]
    assert found, f"no declaration {name!r}"
    return found[-1]


def expr(text: str, prelude: str = "") -> ast.Expr:
    """The initialiser of ``const bit<8> X = <text>;``."""
    d = decl(f"{prelude}\nconst bit<8> X = {text};", "X")
    assert isinstance(d, ast.ConstDecl)
    return d.value


def stmts(body: str, locals_: str = "", params: str = "inout bit<8> x") -> list[ast.Stmt]:
    """Statements of ``control C(params) { locals apply { body } }``."""
    ctl = decl(f"control C({params}) {{ {locals_} apply {{ {body} }} }}", "C")
    assert isinstance(ctl, ast.ControlDecl)
    return ctl.body.stmts


def error_of(src: str, filename: str = "t.p4") -> P4Error:
    with pytest.raises(P4Error) as info:
        parse_text(src, filename)
    return info.value


def shape(e: ast.Expr) -> str:
    """Compact fully-parenthesised rendering of an expression, to check precedence."""
    if isinstance(e, ast.Binary):
        return f"({shape(e.left)} {e.op} {shape(e.right)})"
    if isinstance(e, ast.Unary):
        return f"({e.op}{shape(e.expr)})"
    if isinstance(e, ast.Ternary):
        return f"({shape(e.cond)} ? {shape(e.then)} : {shape(e.other)})"
    if isinstance(e, ast.Cast):
        return f"(cast {shape(e.expr)})"
    if isinstance(e, ast.Name):
        return e.name
    if isinstance(e, ast.IntLit):
        return e.text
    if isinstance(e, ast.Member):
        return f"{shape(e.expr)}.{e.name}"
    if isinstance(e, ast.Slice):
        return f"{shape(e.expr)}[{shape(e.hi)}:{shape(e.lo)}]"
    if isinstance(e, ast.Index):
        return f"{shape(e.expr)}[{shape(e.index)}]"
    if isinstance(e, ast.Call):
        return f"{shape(e.func)}({', '.join(shape(a.value) for a in e.args)})"
    return type(e).__name__


VARS = "const bit<8> a = 1; const bit<8> b = 2; const bit<8> c = 3; const bit<8> d = 4;"


# --------------------------------------------------------------------------- whole programs


def test_basic_forward_program_yields_parser_controls_and_main() -> None:
    prog = parse_program(str(PROGRAMS / "basic_forward.p4"))
    own = [d for d in prog.declarations if d.loc.file.endswith("basic_forward.p4")]
    kinds = [(type(d).__name__, d.name) for d in own]
    assert kinds[:4] == [
        ("ConstDecl", "TYPE_IPV4"),
        ("TypedefDecl", "egressSpec_t"),
        ("TypedefDecl", "macAddr_t"),
        ("TypedefDecl", "ip4Addr_t"),
    ]
    assert ("ParserDecl", "MyParser") in kinds
    assert ("ControlDecl", "MyIngress") in kinds
    main = own[-1]
    assert isinstance(main, ast.Instantiation) and main.name == "main"
    assert main.type == ast.NamedType("V1Switch")
    assert [a.value.func.name for a in main.args] == [
        "MyParser",
        "MyVerifyChecksum",
        "MyIngress",
        "MyEgress",
        "MyComputeChecksum",
        "MyDeparser",
    ]
    # the architecture declarations come first, from the builtin include files
    assert any(
        isinstance(d, ast.PackageTypeDecl) and d.name == "V1Switch" for d in prog.declarations
    )
    assert any(f.endswith("v1model.p4") for f in prog.files)


def test_basic_forward_ingress_table_and_apply_shape() -> None:
    prog = parse_program(str(PROGRAMS / "basic_forward.p4"))
    ingress = next(d for d in prog.declarations if d.name == "MyIngress")
    assert isinstance(ingress, ast.ControlDecl)
    assert [p.direction for p in ingress.params] == ["inout", "inout", "inout"]
    table = next(x for x in ingress.locals if isinstance(x, ast.TableDecl))
    assert table.name == "ipv4_lpm"
    assert shape(table.keys[0].expr) == "hdr.ipv4.dstAddr" and table.keys[0].match_kind == "lpm"
    assert [a.name for a in table.actions] == ["ipv4_forward", "drop", "NoAction"]
    assert table.default_action == ast.ActionRef("drop")
    assert table.properties == [ast.TableProperty("size", ast.IntLit(1024, text="1024"))]
    cond = ingress.body.stmts[0]
    assert isinstance(cond, ast.If) and shape(cond.cond) == "hdr.ipv4.isValid()"


@pytest.mark.parametrize("name", sorted(p.name for p in PROGRAMS.glob("*.p4")))
def test_realistic_program_parses_to_v1switch_main(name: str) -> None:
    prog = parse_program(str(PROGRAMS / name))
    main = prog.declarations[-1]
    assert isinstance(main, ast.Instantiation) and main.name == "main"
    assert main.type.name == "V1Switch" and len(main.args) == 6
    assert prog.files[0].endswith(name)


def test_calc_program_lookahead_select_and_const_entries() -> None:
    prog = parse_program(str(PROGRAMS / "calc.p4"))
    parser = next(d for d in prog.declarations if d.name == "CalcParser")
    check = next(s for s in parser.states if s.name == "check_calc")
    sel = check.transition
    assert isinstance(sel, ast.SelectTransition)
    first = sel.exprs[0]
    assert isinstance(first, ast.Member) and first.name == "p"
    call = first.expr
    assert isinstance(call, ast.Call) and call.type_args == [ast.NamedType("calc_t")]
    assert isinstance(sel.cases[0].keyset, ast.ListExpr)
    ingress = next(d for d in prog.declarations if d.name == "CalcIngress")
    table = next(x for x in ingress.locals if isinstance(x, ast.TableDecl))
    assert table.entries_const and table.default_action_const
    assert [e.action.name for e in table.entries][:2] == ["operation_add", "operation_sub"]
    assert table.entries[0].keyset == [ast.Name("OP_PLUS")]


# --------------------------------------------------------------------------- types


def test_base_types_parse_to_type_nodes() -> None:
    s = decl("struct s { bit<8> a; int<16> b; bool c; varbit<32> d; error e; bit f; int g; }", "s")
    types = [f.type for f in s.fields]
    assert types == [
        ast.BitType(ast.IntLit(8, text="8")),
        ast.IntType(ast.IntLit(16, text="16")),
        ast.BoolType(),
        ast.VarbitType(ast.IntLit(32, text="32")),
        ast.ErrorType(),
        ast.BitType(ast.IntLit(1, text="1")),
        ast.IntType(None),
    ]


def test_string_void_match_kind_and_dontcare_types() -> None:
    f = decl("extern void log(string s, match_kind k);", "log")
    assert isinstance(f, ast.FunctionDecl) and f.is_extern and f.body is None
    assert f.return_type == ast.VoidType()
    assert [p.type for p in f.params] == [ast.StringType(), ast.MatchKindType()]
    t = decl("extern E<T> { E(); } control C() { E<_>() e; apply {} }", "C")
    assert t.locals[0].type == ast.NamedType("E", [ast.DontCareType()])


def test_bit_width_may_be_a_parenthesised_expression() -> None:
    s = decl("const int W = 4; struct s { bit<(W * 2)> f; }", "s")
    width = s.fields[0].type.width
    assert shape(width) == "(W * 2)"


def test_typedef_and_newtype() -> None:
    t = decl("typedef bit<48> mac_t;", "mac_t")
    n = decl("type bit<32> port_t;", "port_t")
    assert isinstance(t, ast.TypedefDecl) and not t.is_newtype
    assert isinstance(n, ast.TypedefDecl) and n.is_newtype
    assert n.type == ast.BitType(ast.IntLit(32, text="32"))


def test_header_stack_type_and_typedef_name_use() -> None:
    s = decl("header h_t { bit<8> a; } struct hs { h_t[4] stack; }", "hs")
    assert s.fields[0].type == ast.HeaderStackType(ast.NamedType("h_t"), ast.IntLit(4, text="4"))


def test_nested_tuple_type_closes_with_double_angle() -> None:
    s = decl("struct s { tuple<bit<8>, tuple<bit<16>, bool>> t; }", "s")
    bit8, bit16 = ast.BitType(ast.IntLit(8, text="8")), ast.BitType(ast.IntLit(16, text="16"))
    assert s.fields[0].type == ast.TupleType([bit8, ast.TupleType([bit16, ast.BoolType()])])


def test_generic_instantiation_register_of_bit32() -> None:
    ctl = decl(
        "extern register<T> { register(bit<32> n); } control C() {"
        " register<bit<32>>(1024) r; apply {} }",
        "C",
    )
    inst = ctl.locals[0]
    assert isinstance(inst, ast.Instantiation) and inst.name == "r"
    assert inst.type == ast.NamedType("register", [ast.BitType(ast.IntLit(32, text="32"))])
    assert inst.args[0].value == ast.IntLit(1024, text="1024")


def test_enums_plain_and_serializable() -> None:
    plain = decl("enum Suits { Clubs, Diamonds, }", "Suits")
    ser = decl("enum bit<8> Color { RED = 1, GREEN = 0x2 }", "Color")
    assert isinstance(plain, ast.EnumDecl) and plain.underlying is None
    assert plain.members == [("Clubs", None), ("Diamonds", None)]
    assert ser.underlying == ast.BitType(ast.IntLit(8, text="8"))
    assert [(n, v.value) for n, v in ser.members] == [("RED", 1), ("GREEN", 2)]


def test_header_union_struct_and_generic_struct() -> None:
    ds = decls(
        "header a_t { bit<8> x; } header b_t { bit<16> y; }"
        "header_union u_t { a_t a; b_t b; }"
        "struct pair<T> { T first; T second; }"
    )
    u, pair = ds[2], ds[3]
    assert isinstance(u, ast.HeaderUnionDecl) and [f.name for f in u.fields] == ["a", "b"]
    assert isinstance(pair, ast.StructDecl) and pair.type_params == ["T"]
    assert pair.fields[0].type == ast.NamedType("T")


def test_error_and_match_kind_declarations() -> None:
    ds = decls("error { BadThing, Other } match_kind { exact, fuzzy }")
    assert ds[0] == ast.ErrorDecl("error", ["BadThing", "Other"])
    assert ds[1] == ast.MatchKindDecl("match_kind", ["exact", "fuzzy"])


# --------------------------------------------------------------------------- declarations


def test_const_and_variable_declarations_with_and_without_initialiser() -> None:
    body = stmts("bit<8> v; bit<8> w = 3; const bit<8> k = 2;")
    assert isinstance(body[0], ast.VarDeclStmt) and body[0].decl.init is None
    assert body[1].decl.init == ast.IntLit(3, text="3")
    assert isinstance(body[2], ast.ConstDeclStmt) and body[2].decl.name == "k"


def test_function_declaration_with_return() -> None:
    f = decl("bit<8> f(in bit<8> x) { return x + 1; }", "f")
    assert isinstance(f, ast.FunctionDecl) and not f.is_extern
    ret = f.body.stmts[0]
    assert isinstance(ret, ast.Return) and shape(ret.value) == "(x + 1)"


def test_extern_with_overloads_constructors_generic_methods_and_annotations() -> None:
    e = decl(
        "extern packet_in { void extract<T>(out T hdr);"
        " void extract<T>(out T hdr, in bit<32> n); T lookahead<T>(); }"
        "extern Hasher<O> { Hasher(bit<32> algo); Hasher(); @pure O get<D>(in D d);"
        " abstract void cb(@optional in bit<8> x); }",
        "Hasher",
    )
    assert isinstance(e, ast.ExternDecl) and e.type_params == ["O"]
    ctors = [m for m in e.methods if m.return_type is None]
    assert [len(m.params) for m in ctors] == [1, 0] and ctors[0].name == "Hasher"
    get = e.methods[2]
    assert get.name == "get" and get.type_params == ["D"]
    assert get.annotations[0].name == "pure" and get.return_type == ast.NamedType("O")
    cb = e.methods[3]
    assert cb.is_abstract and cb.params[0].annotations[0].name == "optional"


def test_type_parameters_are_scoped_to_their_declaration() -> None:
    # v1model-style `<T>` in an extern must not turn a later variable `T` into a type
    c = decl("extern void f<T>(in T x); control C(inout bit<8> T) { apply { T = 1; } }", "C")
    assert c.body.stmts[0] == ast.Assign(ast.Name("T"), ast.IntLit(1, text="1"))


def test_package_parser_and_control_type_declarations() -> None:
    ds = decls(
        "parser P<H>(packet_in b, out H h); control Ig<H, M>(inout H h, inout M m);"
        "package Sw<H, M>(P<H> p, Ig<H, M> ig);"
    )
    assert isinstance(ds[0], ast.ParserTypeDecl) and ds[0].type_params == ["H"]
    assert isinstance(ds[1], ast.ControlTypeDecl) and ds[1].type_params == ["H", "M"]
    pkg = ds[2]
    assert isinstance(pkg, ast.PackageTypeDecl)
    assert pkg.params[1].type == ast.NamedType("Ig", [ast.NamedType("H"), ast.NamedType("M")])


def test_actions_with_directional_and_directionless_params() -> None:
    c = decl("control C() { action a(in bit<8> x, out bit<8> y, bit<9> port) {} apply {} }", "C")
    act = c.locals[0]
    assert isinstance(act, ast.ActionDecl)
    assert [(p.direction, p.name) for p in act.params] == [("in", "x"), ("out", "y"), ("", "port")]


def test_instantiation_with_initializer_block() -> None:
    c = decl(
        "extern V { V(); abstract bit<8> f(); } control C() {"
        " V() v = { bit<8> f() { return 1; } }; apply {} }",
        "C",
    )
    inst = c.locals[0]
    assert isinstance(inst, ast.Instantiation) and inst.name == "v"
    assert isinstance(inst.initializer[0], ast.FunctionDecl)


# --------------------------------------------------------------------------- parsers


PARSER_PRELUDE = """
extern packet_in { void extract<T>(out T h); T lookahead<T>(); void advance(in bit<32> n); }
extern void verify(in bool c, in error e);
error { NoError, Bad }
header h_t { bit<16> t; bit<8> v; }
struct hs_t { h_t h; h_t[3] st; }
"""


def test_parser_states_extract_lookahead_advance_verify_and_transitions() -> None:
    p = decl(
        PARSER_PRELUDE
        + """parser P(packet_in b, out hs_t hdr) {
            state start {
                b.extract(hdr.h);
                bit<8> peek = b.lookahead<bit<8>>();
                b.advance(16);
                verify(hdr.h.v == 0, error.Bad);
                b.extract(hdr.st.next);
                transition next_one;
            }
            state next_one { transition accept; }
        }""",
        "P",
    )
    assert isinstance(p, ast.ParserDecl) and [s.name for s in p.states] == ["start", "next_one"]
    start = p.states[0]
    peek = start.stmts[1].decl.init
    assert isinstance(peek, ast.Call) and peek.type_args == [ast.BitType(ast.IntLit(8, text="8"))]
    assert shape(start.stmts[2].call) == "b.advance(16)"
    verify = start.stmts[3].call
    assert verify.args[1].value == ast.ErrorMember("Bad")
    assert shape(start.stmts[4].call) == "b.extract(hdr.st.next)"
    assert start.transition == ast.DirectTransition("next_one")


def test_select_keysets_tuple_mask_dontcare_range_value_set_default() -> None:
    p = decl(
        PARSER_PRELUDE
        + """parser P(packet_in b, out hs_t hdr) {
            value_set<bit<16>>(4) pvs;
            state start {
                transition select(hdr.h.t, hdr.h.v) {
                    (1, 2): s;
                    (0x800 &&& 0xF00, _): s;
                    (1..5, 7): s;
                    pvs: s;
                    default: accept;
                }
            }
            state s { transition reject; }
        }""",
        "P",
    )
    vs = p.locals[0]
    assert isinstance(vs, ast.ValueSetDecl) and vs.name == "pvs"
    assert vs.elem_type == ast.BitType(ast.IntLit(16, text="16")) and vs.size.value == 4
    sel = p.states[0].transition
    assert isinstance(sel, ast.SelectTransition) and len(sel.exprs) == 2
    keys = [c.keyset for c in sel.cases]
    assert keys[0] == ast.ListExpr([ast.IntLit(1, text="1"), ast.IntLit(2, text="2")])
    assert keys[1] == ast.ListExpr(
        [ast.Mask(ast.IntLit(0x800, text="0x800"), ast.IntLit(0xF00, text="0xF00")), ast.DontCare()]
    )
    assert keys[2].elems[0] == ast.Range(ast.IntLit(1, text="1"), ast.IntLit(5, text="5"))
    assert keys[3] == ast.Name("pvs") and keys[4] == ast.Default()
    assert [c.state for c in sel.cases] == ["s", "s", "s", "s", "accept"]


def test_sub_parser_instantiation_apply_and_constructor_params() -> None:
    ds = decls(
        PARSER_PRELUDE
        + """parser Sub(packet_in b, out h_t h) { state start { b.extract(h); transition accept; } }
        parser Top(packet_in b, out hs_t hdr)(bit<8> depth) {
            Sub() sub;
            state start { sub.apply(b, hdr.h); Sub.apply(b, hdr.h); transition accept; }
        }"""
    )
    top = ds[-1]
    assert isinstance(top, ast.ParserDecl) and [p.name for p in top.ctor_params] == ["depth"]
    inst = top.locals[0]
    assert isinstance(inst, ast.Instantiation) and inst.type == ast.NamedType("Sub")
    assert shape(top.states[0].stmts[0].call) == "sub.apply(b, hdr.h)"
    assert shape(top.states[0].stmts[1].call) == "Sub.apply(b, hdr.h)"


# --------------------------------------------------------------------------- tables


TABLE_SRC = """
extern counter { counter(bit<32> n, bit<8> k); }
extern direct_counter { direct_counter(bit<8> k); }
control C(inout bit<32> addr, inout bit<8> m) {
    direct_counter(1) dc;
    counter(64, 0) c;
    action a(bit<8> x, bit<8> y) { m = x; }
    action b() { }
    action NoAction() { }
    table t {
        key = { addr: lpm @name("dst"); m: ternary; }
        actions = { a; b(); @defaultonly NoAction; @tableonly a; }
        default_action = a(1, 2);
        size = 1024;
        counters = dc;
        meters = mm;
        implementation = prof;
        @my_anno my_prop = 7;
        const entries = {
            (0x0A000000 &&& 0xFF000000, 1): a(3, 4);
            priority = 10: (_, 2): b();
            (1..2, default): b() @hidden;
        }
    }
    table t2 {
        key = { m: exact; }
        actions = { b; }
        const default_action = b();
        entries = { const 1: b(); 2: b(); }
    }
    apply { }
}
"""


def test_table_key_actions_default_and_custom_properties() -> None:
    c = decl(TABLE_SRC, "C")
    t = next(x for x in c.locals if isinstance(x, ast.TableDecl) and x.name == "t")
    assert [(shape(k.expr), k.match_kind) for k in t.keys] == [("addr", "lpm"), ("m", "ternary")]
    assert t.keys[0].annotations[0].name == "name"
    assert t.keys[0].annotations[0].args == [ast.StringLit("dst")]
    assert [a.name for a in t.actions] == ["a", "b", "NoAction", "a"]
    assert [a.annotations[0].name for a in t.actions[2:]] == ["defaultonly", "tableonly"]
    assert t.default_action.name == "a" and not t.default_action_const
    assert [a.value for a in t.default_action.args] == [
        ast.IntLit(1, text="1"),
        ast.IntLit(2, text="2"),
    ]
    props = {p.name: p for p in t.properties}
    assert props["size"].value == ast.IntLit(1024, text="1024")
    assert props["counters"].value == ast.Name("dc")
    assert props["meters"].value == ast.Name("mm")
    assert props["implementation"].value == ast.Name("prof")
    assert props["my_prop"].annotations[0].name == "my_anno"


def test_table_const_entries_with_masks_priority_and_dontcare() -> None:
    c = decl(TABLE_SRC, "C")
    t = next(x for x in c.locals if isinstance(x, ast.TableDecl) and x.name == "t")
    assert t.entries_const and len(t.entries) == 3
    e0, e1, e2 = t.entries
    assert isinstance(e0.keyset[0], ast.Mask) and e0.keyset[0].mask.value == 0xFF000000
    assert e0.action.name == "a" and [x.value.value for x in e0.action.args] == [3, 4]
    assert e1.priority == ast.IntLit(10, text="10") and e1.keyset[0] == ast.DontCare()
    assert e2.keyset == [ast.Range(ast.IntLit(1, text="1"), ast.IntLit(2, text="2")), ast.Default()]
    assert e2.annotations[0].name == "hidden"


def test_non_const_entries_with_per_entry_const_and_const_default_action() -> None:
    c = decl(TABLE_SRC, "C")
    t2 = next(x for x in c.locals if isinstance(x, ast.TableDecl) and x.name == "t2")
    assert not t2.entries_const
    assert [e.is_const for e in t2.entries] == [True, False]
    assert t2.default_action == ast.ActionRef("b") and t2.default_action_const


def test_implementation_property_may_be_a_constructor_call() -> None:
    c = decl(
        "extern action_profile { action_profile(bit<32> n); } control C() { action b() {}"
        " table t { actions = { b; } implementation = action_profile(32w128); } apply {} }",
        "C",
    )
    prop = c.locals[1].properties[0]
    assert prop.name == "implementation"
    assert prop.value == ast.Call(
        ast.Name("action_profile"), [ast.Argument(ast.IntLit(128, 32, text="32w128"))]
    )


# --------------------------------------------------------------------------- statements


def test_apply_hit_miss_and_if_else_chain() -> None:
    body = stmts(
        "if (t.apply().hit) { x = 1; } else if (t.apply().miss) { x = 2; } else x = 3;",
        "action a() {} table t { actions = { a; } }",
    )
    top = body[0]
    assert isinstance(top, ast.If) and shape(top.cond) == "t.apply().hit"
    inner = top.other
    assert isinstance(inner, ast.If) and shape(inner.cond) == "t.apply().miss"
    assert isinstance(inner.other, ast.Assign)


def test_dangling_else_binds_to_nearest_if() -> None:
    body = stmts("if (x == 1) if (x == 2) x = 3; else x = 4;")
    outer = body[0]
    assert outer.other is None and isinstance(outer.then, ast.If)
    assert outer.then.other is not None


def test_switch_on_action_run_folds_fallthrough_labels() -> None:
    body = stmts(
        "switch (t.apply().action_run) { a: { x = 1; } b: c: { x = 2; } default: { } }",
        "action a() {} action b() {} action c() {} table t { actions = { a; b; c; } }",
    )
    sw = body[0]
    assert isinstance(sw, ast.Switch) and shape(sw.expr) == "t.apply().action_run"
    assert [[shape(lab) for lab in case.labels] for case in sw.cases] == [
        ["a"],
        ["b", "c"],
        ["Default"],
    ]
    assert all(case.body is not None for case in sw.cases)


def test_switch_on_values_and_trailing_label_without_block() -> None:
    sw = stmts("switch (x) { 1: { exit; } 2: 3: { return; } default: }")[0]
    assert [[shape(lab) for lab in c.labels] for c in sw.cases] == [["1"], ["2", "3"], ["Default"]]
    assert isinstance(sw.cases[0].body.stmts[0], ast.Exit)
    assert isinstance(sw.cases[1].body.stmts[0], ast.Return)
    assert sw.cases[2].body is None


def test_method_calls_header_stack_ops_and_empty_statement() -> None:
    body = stmts(
        "hs.push_front(1); hs.pop_front(2); hs[0].setValid(); x = hs.last.f;"
        " x = (bit<8>) hs.lastIndex; x = (bit<8>) hs.size; ;",
        params="inout bit<8> x, inout h_t[4] hs",
    )
    assert shape(body[0].call) == "hs.push_front(1)"
    assert shape(body[1].call) == "hs.pop_front(2)"
    assert shape(body[2].call) == "hs[0].setValid()"
    assert shape(body[3].value) == "hs.last.f"
    assert shape(body[4].value) == "(cast hs.lastIndex)"
    assert isinstance(body[6], ast.Empty)


def test_block_statement_annotations_and_compound_assignment() -> None:
    body = stmts("@atomic { x = 1; } x += 2; x |+|= 1; x >>= 3; x <<= 1;")
    assert isinstance(body[0], ast.Block) and body[0].annotations[0].name == "atomic"
    assert body[1] == ast.Assign(
        ast.Name("x"), ast.Binary("+", ast.Name("x"), ast.IntLit(2, text="2")), compound=True
    )
    assert [b.value.op for b in body[2:]] == ["|+|", ">>", "<<"]
    assert all(b.compound for b in body[2:])


def test_named_and_dontcare_arguments_and_dot_prefixed_names() -> None:
    body = stmts("f(a = 1, b = _); g(_, 2); .h(.K);")
    args = body[0].call.args
    assert [(a.name, type(a.value).__name__) for a in args] == [("a", "IntLit"), ("b", "DontCare")]
    assert body[1].call.args[0].value == ast.DontCare()
    call = body[2].call
    assert call.func == ast.Name("h", dot_prefix=True)
    assert call.args[0].value == ast.Name("K", dot_prefix=True)


def test_generic_function_call_statement_keeps_type_args() -> None:
    body = stmts("digest<bit<8>>(1, x);")
    call = body[0].call
    assert call.func == ast.Name("digest")
    assert call.type_args == [ast.BitType(ast.IntLit(8, text="8"))]


def test_type_arguments_as_call_arguments() -> None:
    e = expr("sizeInBits(h_t) + minSizeInBits(bit<4>)", "header h_t { bit<8> f; }")
    assert e.left.args[0].value == ast.TypeExpr(ast.NamedType("h_t"))
    assert e.right.args[0].value == ast.TypeExpr(ast.BitType(ast.IntLit(4, text="4")))


# --------------------------------------------------------------------------- expressions


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a + b * c", "(a + (b * c))"),
        ("a * b + c", "((a * b) + c)"),
        ("a - b - c", "((a - b) - c)"),
        ("a & b == c", "((a & b) == c)"),  # P4: bitwise binds tighter than ==
        ("a == b & c", "(a == (b & c))"),
        ("a | b ^ c & d", "(a | (b ^ (c & d)))"),
        ("a << 1 + 2", "(a << (1 + 2))"),
        ("a >> 1 & b", "((a >> 1) & b)"),
        ("a ++ b + c", "((a ++ b) + c)"),
        ("a |+| b |-| c", "((a |+| b) |-| c)"),
        ("a < b == c > d", "((a < b) == (c > d))"),
        ("a <= b && c >= d || a != b", "(((a <= b) && (c >= d)) || (a != b))"),
        ("a | b < c", "((a | b) < c)"),
        ("a ? b : c ? d : a", "(a ? b : (c ? d : a))"),
        ("-a * b", "((-a) * b)"),
        ("!a && ~b == c", "((!a) && ((~b) == c))"),
        ("(bit<8>) a + b", "((cast a) + b)"),
        ("a[7:0] ++ b[3:0]", "(a[7:0] ++ b[3:0])"),
        ("a % b / c", "((a % b) / c)"),
    ],
)
def test_operator_precedence_follows_p4_spec(text: str, expected: str) -> None:
    assert shape(expr(text, VARS)) == expected


def test_right_shift_vs_generic_closing_angles() -> None:
    e = expr("(bit<8>)(a >> 2) >> 1", VARS)
    assert shape(e) == "((cast (a >> 2)) >> 1)"
    with pytest.raises(P4Error):  # '> >' with a space is two tokens, not a shift
        expr("a > > b", VARS)


def test_less_than_is_not_confused_with_type_arguments() -> None:
    e = expr("a < b", VARS)
    assert e == ast.Binary("<", ast.Name("a"), ast.Name("b"))
    e = expr("a < b || c > (d)", VARS)
    assert shape(e) == "((a < b) || (c > d))"


def test_casts_to_typedef_enum_and_struct_initialiser() -> None:
    prelude = "typedef bit<8> byte_t; enum bit<8> E { A = 1 } struct s_t { bit<8> f; }"
    assert expr("(byte_t) a", prelude + VARS) == ast.Cast(ast.NamedType("byte_t"), ast.Name("a"))
    assert expr("(E) 1", prelude) == ast.Cast(ast.NamedType("E"), ast.IntLit(1, text="1"))
    e = expr("(s_t){ f = 1 }", prelude)
    assert e == ast.StructInit([("f", ast.IntLit(1, text="1"))], ast.NamedType("s_t"))
    assert expr("(a)", VARS) == ast.Name("a")


def test_enum_member_and_error_member_expressions() -> None:
    prelude = "enum E { A, B } error { Oops }"
    assert expr("E.B", prelude) == ast.Member(ast.Name("E"), "B")
    assert expr("error.Oops", prelude) == ast.ErrorMember("Oops")


@pytest.mark.parametrize(
    ("text", "value", "width", "signed"),
    [
        ("0x1F", 31, None, False),
        ("0b1010", 10, None, False),
        ("0o17", 15, None, False),
        ("0d19", 19, None, False),
        ("1_000_000", 1000000, None, False),
        ("8w255", 255, 8, False),
        ("8s127", 127, 8, True),
        ("32w0x0A000001", 0x0A000001, 32, False),
        ("16w0b1111_0000", 0xF0, 16, False),
        ("0", 0, None, False),
        ("010", 10, None, False),
    ],
)
def test_integer_literal_forms(text: str, value: int, width: int | None, signed: bool) -> None:
    lit = expr(text)
    assert isinstance(lit, ast.IntLit) and lit.text == text
    assert (lit.value, lit.width, lit.signed) == (value, width, signed)


def test_bool_string_list_and_struct_literals() -> None:
    assert expr("true") == ast.BoolLit(True) and expr("false") == ast.BoolLit(False)
    body = stmts('log_msg("v=\\"{}\\"\\n", {x, 1}); x = { f = 1, g = x }; x = {};')
    assert body[0].call.args[0].value == ast.StringLit('v="{}"\n')
    assert body[0].call.args[1].value == ast.ListExpr([ast.Name("x"), ast.IntLit(1, text="1")])
    assert body[1].value == ast.StructInit([("f", ast.IntLit(1, text="1")), ("g", ast.Name("x"))])
    assert body[2].value == ast.ListExpr([])


# --------------------------------------------------------------------------- annotations


def test_annotation_forms_are_kept_with_args_raw_and_kv() -> None:
    h = decl(
        '@name("ingress.h") @id(5) @hidden @pragma netro no_caching\n'
        '@entry[key="v", n=3] @weird(a b ++ c)\nheader h { @field_list(1) bit<8> f; }',
        "h",
    )
    names = [a.name for a in h.annotations]
    assert names == ["name", "id", "hidden", "pragma", "entry", "weird"]
    by = {a.name: a for a in h.annotations}
    assert by["name"].args == [ast.StringLit("ingress.h")] and by["name"].raw == '"ingress.h"'
    assert by["id"].args == [ast.IntLit(5, text="5")]
    assert by["hidden"].args == [] and by["hidden"].raw == ""
    assert by["pragma"].raw == "netro no_caching"
    assert by["entry"].kv == {"key": ast.StringLit("v"), "n": ast.IntLit(3, text="3")}
    assert by["weird"].args == [] and by["weird"].raw == "a b ++ c"
    assert h.fields[0].annotations[0].args == [ast.IntLit(1, text="1")]


def test_annotation_argument_locations_point_into_the_file() -> None:
    d = parse_text('\n  @name("x") @id(42)\nconst bit<8> k = 1;', "ann.p4").declarations[0]
    assert d.annotations[0].loc == SourceLoc("ann.p4", 2, 3)
    assert d.annotations[1].args[0].loc == SourceLoc("ann.p4", 2, 18)
    assert d.loc == SourceLoc("ann.p4", 2, 3)


# --------------------------------------------------------------------------- locations


def test_node_locations_are_first_token_positions() -> None:
    prog = parse_text(
        "const bit<8> a = 1;\ncontrol C(inout bit<8> x) {\n  apply {\n    x = a + 1;\n  }\n}\n",
        "loc.p4",
    )
    const, ctl = prog.declarations
    assert const.loc == SourceLoc("loc.p4", 1, 1)
    assert ctl.loc == SourceLoc("loc.p4", 2, 1)
    assign = ctl.body.stmts[0]
    assert assign.loc == SourceLoc("loc.p4", 4, 5)
    assert assign.value.loc == SourceLoc("loc.p4", 4, 9)
    assert assign.value.right.loc == SourceLoc("loc.p4", 4, 13)
    assert ctl.params[0].loc == SourceLoc("loc.p4", 2, 11)


def test_locations_of_nodes_from_included_file(tmp_path: Path) -> None:
    (tmp_path / "lib.p4").write_text("// library\n\nheader lib_t {\n    bit<8> f;\n}\n")
    main = tmp_path / "main.p4"
    main.write_text('#include "lib.p4"\nstruct s { lib_t l; }\n')
    prog = parse_program(str(main))
    lib, s = prog.declarations
    assert lib.loc == SourceLoc(str(tmp_path / "lib.p4"), 3, 1)
    assert lib.fields[0].loc == SourceLoc(str(tmp_path / "lib.p4"), 4, 5)
    assert s.loc.file == str(main) and s.loc.line == 2


def test_parse_source_uses_given_locator() -> None:
    prog = parse_source("const bit<8> a = 1;", lambda line, col: SourceLoc("x.p4", line + 10, col))
    assert prog.declarations[0].loc == SourceLoc("x.p4", 11, 1)


# --------------------------------------------------------------------------- errors


def test_missing_semicolon_reports_expected_semicolon_at_next_token() -> None:
    err = error_of("control C(inout bit<8> x) {\n  apply {\n    x = 1\n  }\n}\n")
    assert err.loc == SourceLoc("t.p4", 4, 3)
    assert err.message == "expected ';' but found '}'"


def test_missing_semicolon_before_apply() -> None:
    err = error_of("control C() {\n  bit<8> v\n  apply { }\n}\n")
    assert err.loc == SourceLoc("t.p4", 3, 3)
    assert err.message == "expected ';' or '=' but found 'apply'"


def test_unknown_character_is_reported_at_its_column() -> None:
    err = error_of("const bit<8> a = 1 $ 2;")
    assert err.loc == SourceLoc("t.p4", 1, 20)
    assert "unexpected character '$'" in err.message


def test_truncated_file_reports_unexpected_end_of_file() -> None:
    err = error_of("control C() {\n  apply {\n")
    assert err.message == "unexpected end of file"
    assert err.loc.line == 2


def test_unterminated_string_and_bad_integer_and_bad_annotation() -> None:
    assert error_of('const bit<8> a = "abc;').message == "unterminated string literal"
    assert error_of("const bit<8> a = 0xZZ;").message == "malformed integer literal"
    assert "annotation name" in error_of("@ 3 header h {}").message
    assert "missing ')'" in error_of('@name("x" header h {}').message


def test_expected_token_lists_are_specific() -> None:
    assert error_of("struct s { bit<8 x; }").message == "expected '>' but found 'x'"
    assert error_of("header h { bit<8> }").message == "expected a name but found '}'"
    err = error_of("control C() { apply { if (x { } } }")
    assert err.message == "expected ')' but found '{'"
    assert error_of("control C() { apply { x = ; } }").message.startswith("expected an expression")


def test_syntax_error_in_included_file_points_into_that_file(tmp_path: Path) -> None:
    (tmp_path / "bad.p4").write_text("header h {\n  bit<8> f\n}\n")
    main = tmp_path / "main.p4"
    main.write_text('const bit<8> a = 1;\n#include "bad.p4"\n')
    with pytest.raises(P4Error) as info:
        parse_program(str(main))
    assert info.value.loc == SourceLoc(str(tmp_path / "bad.p4"), 3, 1)
    assert "expected ';'" in info.value.message


def test_instantiation_inside_a_block_is_a_p4_error() -> None:
    err = error_of("extern E { E(); } control C() { apply { E() e; } }")
    assert "not allowed inside a block" in err.message


# --------------------------------------------------------------------------- robustness


def _token_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in re.finditer(r"[A-Za-z_0-9]+|\S", text)]


def test_random_truncations_and_token_deletions_raise_only_p4error() -> None:
    text = (PROGRAMS / "tunnel.p4").read_text()
    text = "\n".join("" if line.startswith("#") else line for line in text.splitlines())
    spans = _token_spans(text)
    rng = random.Random(1234)
    identity = lambda line, col: SourceLoc("fuzz.p4", line, col)  # noqa: E731
    outcomes = {"ok": 0, "error": 0}
    for i in range(200):
        if i % 2 == 0:
            mutated = text[: rng.randrange(len(text))]
        else:
            start, end = spans[rng.randrange(len(spans))]
            mutated = text[:start] + text[end:]
        try:
            parse_source(mutated, identity)
            outcomes["ok"] += 1
        except P4Error as err:
            assert err.loc.file == "fuzz.p4" and err.loc.line >= 1
            outcomes["error"] += 1
    assert outcomes["error"] > 100  # most mutations break the program


def test_600_line_program_parses() -> None:
    body = (PROGRAMS / "stacks_pvs.p4").read_text()
    text = body
    for i in range(5):  # more controls with fresh names: ~600 lines in all
        text += re.sub(
            r"\bStack(\w+)",
            rf"Stack\g<1>{i}",
            body.split("V1Switch")[0].split("#define MAX_LABELS 4")[1],
        )
    assert text.count("\n") > 500
    prog = parse_text(text, "big.p4")
    assert sum(isinstance(d, ast.ControlDecl) for d in prog.declarations) > 20


def test_variable_may_share_its_type_name() -> None:
    c = decl(
        "struct metadata { bit<8> a; }"
        " control C(inout metadata metadata) { apply { metadata.a = metadata.a + 1; } }",
        "C",
    )
    assert c.params[0].name == "metadata" and c.params[0].type == ast.NamedType("metadata")
    assign = c.body.stmts[0]
    assert shape(assign.target) == "metadata.a" and shape(assign.value) == "(metadata.a + 1)"


def test_direction_keywords_are_accepted_as_field_and_table_names() -> None:
    c = decl(
        "header h_t { bit<8> out; } control C(inout h_t h) { action a() {}"
        " table in { actions = { a; } } apply { in.apply(); h.out = 1; } }",
        "C",
    )
    assert c.locals[1].name == "in"
    assert shape(c.body.stmts[0].call) == "in.apply()"
    assert shape(c.body.stmts[1].target) == "h.out"


def test_bit_width_may_be_a_constant_name_and_this_is_a_name() -> None:
    s = decl("const int W = 8; struct s { bit<W> f; }", "s")
    assert s.fields[0].type == ast.BitType(ast.Name("W"))
    c = decl(
        "extern E { E(); abstract void f(); } control C() {"
        " E() e = { void f() { this.g(); } }; apply {} }",
        "C",
    )
    call = c.locals[0].initializer[0].body.stmts[0].call
    assert call.func == ast.Member(ast.Name("this"), "g")


def test_very_long_expression_chain_does_not_overflow_the_stack() -> None:
    text = " + ".join(["a"] * 3000)
    e = expr(text, "const bit<8> a = 1;")
    assert isinstance(e, ast.Binary) and e.op == "+" and e.right == ast.Name("a")


def test_keyword_only_nodes_get_their_keyword_location() -> None:
    prog = parse_text(
        "const bool b = true;\n"
        "control C(inout bit<8> x) { apply { exit; switch (x) { default: {} } } }\n",
        "kw.p4",
    )
    const, ctl = prog.declarations
    assert const.value.loc == SourceLoc("kw.p4", 1, 16)
    assert const.type.loc == SourceLoc("kw.p4", 1, 7)
    exit_stmt, switch = ctl.body.stmts
    assert exit_stmt.loc == SourceLoc("kw.p4", 2, 37)
    assert switch.cases[0].labels[0].loc == SourceLoc("kw.p4", 2, 56)


def test_empty_and_comment_only_programs_have_no_declarations() -> None:
    assert parse_text("", "e.p4").declarations == []
    assert parse_text("// nothing\n/* here */\n;", "e.p4").declarations == []
