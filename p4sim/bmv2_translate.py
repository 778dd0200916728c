"""p4c's BMv2 JSON back into P4_16, for a JSON whose source is not at hand.

``p4_from_bmv2_json(doc)`` writes a v1model program that does what the JSON's parser,
deparser, pipelines, actions, checksum calculations, register and counter arrays say, with
every table, action and extern under the JSON's own name (``@name(".X")``), so that the
P4Info p4c wrote for the JSON fits the program p4sim compiles from it. BMv2's expressions
are unbounded signed integers masked where p4c wants them to wrap; here each operation runs
in an int<> wide enough for its exact result (``two_comp_mod``, ``usat_cast`` and
``sat_cast`` included), and int<> fields and ``parser_error`` compare as BMv2 compares them.
A select that matches no case ends the parser with error.NoMatch, as in BMv2.

Covered: headers, header stacks (extract into next, ``last`` in select keys, push/pop,
elements by index), header unions (members extracted, assigned, emitted, ``valid_union``)
and metadata, parser extract/set/verify and select on fields and lookahead bits (value and
mask, parse value sets: a state matching one selects on its key fields concatenated), the
deparser's order, actions with assign, add_header/remove_header, mark_to_drop, exit,
register_read/write, count, execute_meter, hashes into a field
(modify_field_with_hash_based_offset), clones, resubmits and recirculations (preserving the
JSON's field lists: ``@field_list`` on those metadata fields), register/counter/meter arrays,
direct counters and direct meters (read into the meter's ``result_target`` by every action
of its table), tables (exact/lpm/ternary/range keys, default entries, const entries),
action profiles and selectors (indirect tables; a selector's input fields become
``selector`` keys) and conditionals chained by next_tables (by action, hit/miss), csum16
checksum verify/update. Anything else (stacks of header unions, varbit fields, other
extern instances) raises Bmv2JsonError naming it.

Example::

    source = p4_from_bmv2_json(json.loads(Path("build/basic.json").read_text()))
"""

from __future__ import annotations

import re
from typing import Any


class Bmv2JsonError(Exception):
    """A BMv2 JSON that p4sim cannot run (no source found, not the same program, or not
    translatable); ``p4sim.bmv2_json`` raises it too."""


_BIN = {"+", "-", "*", "&", "|", "^", "<<", ">>", "%", "/"}
_CMP = {"==", "!=", "<", ">", "<=", ">="}
_HASHES = {"crc16", "crc32", "crc16_custom", "crc32_custom", "identity", "csum16", "xor16"}
_EXTERN_PARAMS = {"register_array", "counter_array", "meter_array"}


#: the widest int<> an operation is computed in (its exact result would need more)
_MAX_BITS = 512


class Signed(int):
    """The width of an expression's value held as int<W> (signed), where an int width
    means bit<W>: BMv2's arithmetic is on unbounded signed integers."""


def _ident(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


class _Translator:
    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        self.types = {t["name"]: t for t in doc.get("header_types") or []}
        self.headers = {h["name"]: h for h in doc.get("headers") or []}
        self.actions = {a["id"]: a for a in doc.get("actions") or []}
        self.errors = {code: name for name, code in doc.get("errors") or []}
        self.calcs = {c["name"]: c for c in doc.get("calculations") or []}
        self.out: list[str] = []
        self.stacks = {st["name"]: st for st in doc.get("header_stacks") or []}
        self.elements = {  # "labels[1]" -> ("labels", 1)
            self.header_name(hid): (st["name"], i)
            for st in self.stacks.values()
            for i, hid in enumerate(st.get("header_ids") or [])
        }
        self.learn = {int(ll["id"]): ll for ll in doc.get("learn_lists") or []}
        for key in ("header_union_stacks", "extern_instances"):
            if doc.get(key):
                raise Bmv2JsonError(f"p4sim cannot run this BMv2 JSON without its source: {key}")
        utypes = {u["name"]: u for u in doc.get("header_union_types") or []}
        self.unions = {u["name"]: u for u in doc.get("header_unions") or []}
        self.members = {  # "u.a" -> ("u", "a"): union instance and member name
            self.header_name(hid): (u["name"], member[0])
            for u in self.unions.values()
            for hid, member in zip(
                u.get("header_ids") or [], utypes[u["union_type"]]["headers"], strict=True
            )
        }
        self.union_types = utypes
        self.vsets = {v["name"]: v for v in doc.get("parse_vsets") or []}
        self.field_lists: dict[tuple[str, str], list[int]] = {}  # field -> list ids
        for fl in doc.get("field_lists") or []:
            for el in fl.get("elements") or []:
                if el.get("type") == "field":
                    self.field_lists.setdefault(tuple(el["value"]), []).append(int(fl["id"]))

    # -- names and widths ------------------------------------------------------------

    def field_ref(self, ref: list[str], lvalue: bool = True) -> tuple[str, int]:
        header, field = ref
        h = self.headers.get(header)
        if h is None:
            raise Bmv2JsonError(f"BMv2 JSON names an unknown header {header}")
        if field == "$valid$":
            return f"((bit<1>)({self.header_ref(header)}.isValid()))", 1
        fields = {f[0]: f for f in self.types[h["header_type"]]["fields"]}
        if field not in fields:
            raise Bmv2JsonError(f"BMv2 JSON names an unknown field {header}.{field}")
        code, w = f"{self.header_ref(header)}.{_ident(field)}", int(fields[field][1])
        if not lvalue and len(fields[field]) > 2 and fields[field][2] is True:
            return f"((int<{w}>)({code}))", Signed(w)  # an int<W> field, declared bit<W>
        return code, w

    def header_name(self, hid: int) -> str:
        for name, h in self.headers.items():
            if h.get("id") == hid:
                return name
        raise Bmv2JsonError(f"a header stack names an unknown header id {hid}")

    def header_ref(self, header: str) -> str:
        if header in self.members:
            union, member = self.members[header]
            return f"hdr.{_ident(union)}.{_ident(member)}"
        if header in self.unions:
            return f"hdr.{_ident(header)}"
        if header in self.elements:
            stack, i = self.elements[header]
            return f"hdr.{_ident(stack)}[{i}]"
        if header in self.stacks:
            return f"hdr.{_ident(header)}"
        h = self.headers[header]
        if header == "standard_metadata":
            return "sm"
        if h.get("metadata"):
            return f"meta.{_ident(header)}"
        return f"hdr.{_ident(header)}"

    # -- expressions: (code, width); width 0 = unsized integer, -1 = bool --------------

    def expr(self, e: Any, rd: list[tuple[str, int]], lvalue: bool = False) -> tuple[str, int]:
        t, v = e.get("type"), e.get("value")
        if t == "field":
            return self.field_ref(v, lvalue)
        if t == "hexstr":
            return str(int(v, 16)), 0
        if t == "bool":
            return ("true" if v else "false"), -1
        if t == "runtime_data":
            name, w = rd[int(v)]
            return name, w
        if t in ("header", "header_stack", "header_union"):
            return self.header_ref(v), -2
        if t == "lookahead":  # [offset, width] in bits from the parser's position
            offset, width = (int(n) for n in v)
            total = offset + width
            code = f"pk.lookahead<bit<{total}>>()"
            return (code if offset == 0 else f"{code}[{width - 1}:0]"), width
        if t == "stack_field":  # a field of the stack's last element
            stack, field = v
            st = self.stacks[stack]
            widths = {f[0]: f[1] for f in self.types[st["header_type"]]["fields"]}
            return f"hdr.{_ident(stack)}.last.{_ident(field)}", int(widths[field])
        if t == "expression" and isinstance(v, dict) and "op" not in v:
            return self.expr(v, rd)  # {"type": "expression", "value": {"type": ...}}
        if t == "expression":
            return self.op(v, rd)
        raise Bmv2JsonError(f"p4sim cannot translate BMv2 expression of type {t}")

    def sized(self, code: str, w: int, to: int) -> str:
        if isinstance(w, Signed):  # sign-extended or cut to `to` bits, then unsigned
            return f"((bit<{to}>)((int<{to}>)({code})))"
        if w == 0:
            return f"{to}w{code}" if not code.startswith("-") else f"(bit<{to}>)({code})"
        if w == -1:
            return f"((bit<{to}>)(bit<1>)({code}))" if to > 1 else f"((bit<1>)({code}))"
        return code if w == to else f"((bit<{to}>)({code}))"

    def unsigned(self, code: str, w: int) -> tuple[str, int]:
        """A value of an expression as bit<W> (a signed result as its two's complement)."""
        if isinstance(w, Signed):
            return f"((bit<{int(w)}>)({code}))", int(w)
        return code, w

    def signed(self, code: str, w: int, to: int) -> str:
        """An operand as int<to> (to > its width): the unbounded integer BMv2 computes with."""
        if isinstance(w, Signed):
            return code if w == to else f"((int<{to}>)({code}))"
        if w == 0:
            return f"((int<{to}>)({code}))"
        if w == -1:
            return f"((int<{to}>)((bit<{to}>)((bit<1>)({code}))))"
        return f"((int<{to}>)((bit<{to}>)({code})))"

    def operand(self, e: Any, rd: list[tuple[str, int]]) -> tuple[str, int, int]:
        """(code, width as expr gives it, bits an int<> needs to hold its value)."""
        code, w = self.expr(e, rd)
        if w == -2:
            raise Bmv2JsonError("p4sim cannot translate a header used as a number")
        if isinstance(w, Signed):
            return code, w, int(w)
        if w == 0:
            v = int(code)
            return code, 0, (v if v >= 0 else ~v).bit_length() + 1
        return code, w, (2 if w == -1 else w + 1)

    def op(self, v: dict[str, Any], rd: list[tuple[str, int]]) -> tuple[str, int]:
        """BMv2 computes with unbounded signed integers and p4c masks (``&``) or wraps
        (``two_comp_mod``) where P4 wants a width: each operation here runs in an int<>
        wide enough for its exact result, up to _MAX_BITS (wider results keep their low
        bits, which is all a mask or a narrower field then takes)."""
        o = v["op"]
        if o == "?":
            c = self.boolean(v["cond"], rd)
            (a, wa, ka), (b, wb, kb) = self.operand(v["left"], rd), self.operand(v["right"], rd)
            if wa == wb == -1:
                return f"({c} ? {a} : {b})", -1
            k = max(ka, kb)
            return f"({c} ? {self.signed(a, wa, k)} : {self.signed(b, wb, k)})", Signed(k)
        if o in ("and", "or"):
            a, b = self.boolean(v["left"], rd), self.boolean(v["right"], rd)
            return f"({a} {'&&' if o == 'and' else '||'} {b})", -1
        if o == "not":
            return f"(!{self.boolean(v['right'], rd)})", -1
        if o in ("valid", "valid_union"):
            return f"{self.expr(v['right'], rd)[0]}.isValid()", -1
        if o == "d2b":
            code, w = self.expr(v["right"], rd)
            return (code, -1) if w == -1 else (f"({code} != 0)", -1)
        if o == "b2d":
            code, w = self.expr(v["right"], rd)
            return (f"((bit<1>)({code}))" if w == -1 else code), (1 if w == -1 else w)
        if o == "~":
            code, w, k = self.operand(v["right"], rd)
            return f"(~{self.signed(code, w, k)})", Signed(k)
        if o in ("two_comp_mod", "usat_cast", "sat_cast"):
            code, w, k = self.operand(v["left"], rd)
            width = int(self.expr(v["right"], rd)[0])
            k = max(k, width + 1)
            x = self.signed(code, w, k)
            if o == "two_comp_mod":  # the low `width` bits as a signed number
                return f"((int<{width}>)((bit<{width}>)((bit<{k}>)({x}))))", Signed(width)
            lo, hi = (0, (1 << width) - 1) if o == "usat_cast" else (
                -(1 << (width - 1)), (1 << (width - 1)) - 1)  # fmt: skip
            lo_c, hi_c = f"((int<{k}>)({lo}))", f"((int<{k}>)({hi}))"
            return f"({x} > {hi_c} ? {hi_c} : ({x} < {lo_c} ? {lo_c} : {x}))", Signed(k)
        if o in ("==", "!=") and (err := self.error_compare(v, o)):
            return err, -1
        if o in _BIN or o in _CMP:
            (a, wa, ka), (b, wb, kb) = self.operand(v["left"], rd), self.operand(v["right"], rd)
            if wa == 0 and wb == 0:
                val = eval(f"{a} {o.replace('/', '//')} {b}")  # noqa: S307 - two integers
                return (str(val), 0) if o in _BIN else (("true" if val else "false"), -1)
            if o in _CMP and wa == wb == -1:
                return f"({a} {o} {b})", -1
            if o in ("<<", ">>"):
                if wb == 0:
                    amount, most = b, int(b)
                else:
                    amount = self.unsigned(b, wb)[0] if isinstance(wb, Signed) else b
                    most = (1 << max(wb, 1)) - 1
                k = min(ka + most, _MAX_BITS) if o == "<<" else ka
                return f"({self.signed(a, wa, k)} {o} {amount})", Signed(k)
            k = {"+": max(ka, kb) + 1, "-": max(ka, kb) + 1, "*": ka + kb}.get(o, max(ka, kb))
            k = min(k, _MAX_BITS)
            if o in ("/", "%"):  # p4c only divides non-negative values
                x, y = (f"((bit<{k}>)({self.signed(c, w, k)}))" for c, w in ((a, wa), (b, wb)))
                return f"((int<{k}>)({x} {o} {y}))", Signed(k)
            code = f"({self.signed(a, wa, k)} {o} {self.signed(b, wb, k)})"
            return (code, -1) if o in _CMP else (code, Signed(k))
        raise Bmv2JsonError(f"p4sim cannot translate BMv2 operator {o!r}")

    def error_compare(self, v: dict[str, Any], o: str) -> str | None:
        """``sm.parser_error == error.X``: p4c compares the error's code, P4 the error."""
        sides = [v.get("left") or {}, v.get("right") or {}]
        fields = [x for x in sides if x.get("value") == ["standard_metadata", "parser_error"]]
        codes = [x for x in sides if x.get("type") == "hexstr"]
        if len(fields) != 1 or len(codes) != 1:
            return None
        name = self.errors.get(int(codes[0]["value"], 16))
        if name is None:
            raise Bmv2JsonError("BMv2 JSON compares parser_error with an unknown error code")
        return f"(sm.parser_error {o} error.{name})"

    def boolean(self, e: Any, rd: list[tuple[str, int]]) -> str:
        code, w = self.expr(e, rd)
        return code if w == -1 else f"({code} != 0)"

    # -- statements --------------------------------------------------------------------

    def primitive(self, p: dict[str, Any], rd: list[tuple[str, int]]) -> str:
        op, params = p["op"], p.get("parameters") or []
        if op in ("assign", "modify_field"):
            dst, w = self.expr(params[0], rd, lvalue=True)
            src, ws = self.expr(params[1], rd)
            if ws == -2:  # a whole header
                return f"{dst} = {src};"
            return f"{dst} = {self.sized(src, ws, w)};"
        if op in ("assign_header", "assign_union"):
            return f"{self.expr(params[0], rd)[0]} = {self.expr(params[1], rd)[0]};"
        if op == "add_header":
            return f"{self.expr(params[0], rd)[0]}.setValid();"
        if op == "remove_header":
            return f"{self.expr(params[0], rd)[0]}.setInvalid();"
        if op in ("mark_to_drop", "drop"):
            return "mark_to_drop(sm);"
        if op in ("push", "pop"):
            stack, _ = self.expr(params[0], rd)
            count, _ = self.expr(params[1], rd)
            return f"{stack}.{op}_front({int(count)});"
        if op == "exit":
            return "exit;"
        if op == "log_msg":
            return ""
        if op == "register_read":
            dst, _ = self.expr(params[0], rd)
            idx, wi = self.expr(params[2], rd)
            return f"{_ident(params[1]['value'])}.read({dst}, {self.sized(idx, wi, 32)});"
        if op == "register_write":
            reg = self.registers[params[0]["value"]]
            idx, wi = self.expr(params[1], rd)
            val, wv = self.expr(params[2], rd)
            return (
                f"{_ident(params[0]['value'])}.write({self.sized(idx, wi, 32)}, "
                f"{self.sized(val, wv, reg)});"
            )
        if op == "execute_meter":
            idx, wi = self.expr(params[1], rd)
            dst, _ = self.expr(params[2], rd)
            return f"{_ident(params[0]['value'])}.execute_meter({self.sized(idx, wi, 32)}, {dst});"
        if op == "modify_field_with_hash_based_offset":
            dst, w = self.expr(params[0], rd)
            base, wb = self.expr(params[1], rd)
            size, ws = self.expr(params[3], rd)
            calc = self.calcs[params[2]["value"]]
            algo = calc.get("algo")
            if algo not in _HASHES:
                raise Bmv2JsonError(f"p4sim cannot translate the hash algorithm {algo!r}")
            fields = ", ".join(self.expr(x, rd)[0] for x in calc["input"])
            return (
                f"hash({dst}, HashAlgorithm.{algo}, {self.sized(base, wb, w)}, {{ {fields} }}, "
                f"{self.sized(size, ws, 32)});"
            )
        if op in ("clone_ingress_pkt_to_egress", "clone_egress_pkt_to_egress"):
            session, ws = self.expr(params[0], rd)
            kind = "I2E" if op.startswith("clone_ingress") else "E2E"
            fl = self.field_list_id(params[1]) if len(params) > 1 else 0
            if fl:
                return (
                    f"clone_preserving_field_list(CloneType.{kind}, "
                    f"{self.sized(session, ws, 32)}, 8w{fl});"
                )
            return f"clone(CloneType.{kind}, {self.sized(session, ws, 32)});"
        if op in ("resubmit", "resubmit_preserving_field_list"):
            return f"resubmit_preserving_field_list(8w{self.field_list_id(params[0])});"
        if op in ("recirculate", "recirculate_preserving_field_list"):
            return f"recirculate_preserving_field_list(8w{self.field_list_id(params[0])});"
        if op == "generate_digest":
            receiver, wr = self.expr(params[0], rd)
            ll = self.learn[int(self.expr(params[1], rd)[0])]
            fields = ", ".join(self.expr(x, rd)[0] for x in ll.get("elements") or [])
            return (
                f"digest<{self.digest_type(ll)}>({self.sized(receiver, wr, 32)}, {{ {fields} }});"
            )
        if op == "count":
            idx, wi = self.expr(params[1], rd)
            return f"{_ident(params[0]['value'])}.count({self.sized(idx, wi, 32)});"
        raise Bmv2JsonError(f"p4sim cannot translate the BMv2 primitive {op!r}")

    def field_list_id(self, p: dict[str, Any]) -> int:
        code, w = self.expr(p, [])
        if w != 0 or not 0 <= int(code) < 256:
            raise Bmv2JsonError(f"a field list id must be a constant below 256, not {code}")
        return int(code)

    # -- program -------------------------------------------------------------------------

    def program(self) -> str:
        out = self.out
        out += ["#include <core.p4>", "#include <v1model.p4>", ""]
        meta_fields: list[str] = []
        hdr_fields: list[str] = []
        for st in self.stacks.values():
            t = self.types[st["header_type"]]
            tname = f"{_ident(t['name'])}_h"
            fields = [f for f in t["fields"] if not f[0].startswith("_padding")]
            body = " ".join(f"bit<{f[1]}> {_ident(f[0])};" for f in fields)
            if not any(line.startswith(f"header {tname} ") for line in out):
                out.append(f"header {tname} {{ {body} }}")
            hdr_fields.append(f"{tname}[{st['size']}] {_ident(st['name'])};")
        for name, h in self.headers.items():
            if name == "standard_metadata" or name in self.elements:
                continue
            t = self.types[h["header_type"]]
            fields = [f for f in t["fields"] if not f[0].startswith("_padding")]
            if any(f[1] == "*" for f in fields):
                raise Bmv2JsonError(f"p4sim cannot translate the varbit field of {t['name']}")
            kind = "struct" if h.get("metadata") else "header"
            tname = f"{_ident(t['name'])}_{kind[0]}"
            lists = [self.field_lists.get((name, f[0])) for f in fields]
            if any(lists):  # this instance's fields carry @field_list: a type of its own
                tname = f"{_ident(name)}_fl_s"
            body = " ".join(
                (f"@field_list({', '.join(map(str, ids))}) " if ids else "")
                + f"bit<{f[1]}> {_ident(f[0])};"
                for f, ids in zip(fields, lists, strict=True)
            )
            if not any(line.startswith(f"{kind} {tname} ") for line in out):
                out.append(f"{kind} {tname} {{ {body} }}")
            if name in self.members:
                continue
            (meta_fields if kind == "struct" else hdr_fields).append(f"{tname} {_ident(name)};")
        for u in self.unions.values():
            ut = self.union_types[u["union_type"]]
            uname = f"{_ident(ut['name'])}_u"
            members = " ".join(
                f"{_ident(self.types[ht]['name'])}_h {_ident(m)};" for m, ht in ut["headers"]
            )
            if not any(line.startswith(f"header_union {uname} ") for line in out):
                out.append(f"header_union {uname} {{ {members} }}")
            hdr_fields.append(f"{uname} {_ident(u['name'])};")
        out.append(f"struct headers_t {{ {' '.join(hdr_fields)} }}")
        out.append(f"struct meta_t {{ {' '.join(meta_fields)} }}")
        for ll in self.learn.values():  # digest<T>: P4Info names the digest by T
            members = " ".join(
                f"bit<{self.expr(x, [])[1]}> f{i};" for i, x in enumerate(ll.get("elements") or [])
            )
            out.append(f"struct {self.digest_type(ll)} {{ {members} }}")
        self.registers = {
            r["name"]: int(r["bitwidth"]) for r in self.doc.get("register_arrays") or []
        }
        out += self.parser()
        out += self.checksum_control("Verify", verify=True)
        out += self.pipeline("ingress", "Ingress")
        out += self.pipeline("egress", "Egress")
        out += self.checksum_control("Compute", verify=False)
        deparsers: list[dict[str, Any]] = self.doc.get("deparsers") or [{}]
        order = deparsers[0].get("order") or []
        emits = " ".join(f"pk.emit({self.header_ref(h)});" for h in order)
        out.append(f"control Deparser(packet_out pk, in headers_t hdr) {{ apply {{ {emits} }} }}")
        out.append("V1Switch(Parser(), Verify(), Ingress(), Egress(), Compute(), Deparser()) main;")
        return "\n".join(out) + "\n"

    def parser(self) -> list[str]:
        parsers = self.doc.get("parsers") or []
        if len(parsers) != 1:
            raise Bmv2JsonError("p4sim translates BMv2 JSON with exactly one parser")
        p = parsers[0]
        lines = [
            "parser Parser(packet_in pk, out headers_t hdr, inout meta_t meta,",
            "              inout standard_metadata_t sm) {",
        ]
        for vs in self.vsets.values():
            w, size = int(vs["compressed_bitwidth"]), int(vs.get("max_size") or 1024)
            lines.append(
                f'    @name(".{vs["name"]}") value_set<bit<{w}>>({size}) vs_{_ident(vs["name"])};'
            )
        for st in p["parse_states"]:
            name = "start" if st["name"] == p["init_state"] else f"s_{_ident(st['name'])}"
            body = []
            for op in st.get("parser_ops") or []:
                params = op.get("parameters") or []
                if op["op"] == "extract" and params and params[0]["type"] == "regular":
                    body.append(f"pk.extract({self.header_ref(params[0]['value'])});")
                elif op["op"] == "extract" and params and params[0]["type"] == "stack":
                    body.append(f"pk.extract(hdr.{_ident(params[0]['value'])}.next);")
                elif op["op"] == "set":
                    body.append(self.primitive({"op": "assign", "parameters": params}, []))
                elif op["op"] == "verify":
                    code, _ = self.expr(params[1], [])
                    err = self.errors.get(int(code), "NoError")
                    body.append(f"verify({self.boolean(params[0], [])}, error.{err});")
                elif op["op"] == "primitive":
                    body += [self.primitive(x, []) for x in params]
                else:
                    raise Bmv2JsonError(f"p4sim cannot translate the parser op {op['op']!r}")
            body.append(self.transition(st, p["init_state"]))
            lines.append(f"    state {name} {{ {' '.join(body)} }}")
        lines.append(
            "    state no_match_error { verify(false, error.NoMatch); transition reject; }"
        )
        if p["init_state"] not in {s["name"] for s in p["parse_states"]}:
            raise Bmv2JsonError(f"the parser's init_state {p['init_state']} is not a state")
        lines.append("}")
        return lines

    def _state(self, name: str | None, init: str) -> str:
        if name is None:
            return "accept"
        return "start" if name == init else f"s_{_ident(name)}"

    def transition(self, st: dict[str, Any], init: str) -> str:
        keys = [self.unsigned(*self.expr(k, [])) for k in st.get("transition_key") or []]
        trans = st.get("transitions") or []
        if not keys:
            nxt = next((t["next_state"] for t in trans if t["type"] == "default"), None)
            return f"transition {self._state(nxt, init)};"
        # a parse value set matches the key fields concatenated (their widths, no padding):
        # such a state selects on that one concatenation
        joined = any(t["type"] == "parse_vset" for t in trans)
        total = sum(w for _, w in keys)
        cases = []
        for t in trans:
            if t["type"] == "default":
                cases.append(f"default: {self._state(t['next_state'], init)};")
                continue
            if t["type"] == "parse_vset":
                vs = self.vsets.get(t["value"])
                if vs is None:
                    raise Bmv2JsonError(f"a transition names an unknown value set {t['value']}")
                if int(vs["compressed_bitwidth"]) != total:
                    raise Bmv2JsonError(
                        f"value set {t['value']} is {vs['compressed_bitwidth']} bits wide, "
                        f"its select key {total}"
                    )
                if t.get("mask") and int(t["mask"], 16) != (1 << total) - 1:
                    raise Bmv2JsonError(f"p4sim cannot translate a masked value set {t['value']}")
                cases.append(f"vs_{_ident(t['value'])}: {self._state(t['next_state'], init)};")
                continue
            if t["type"] != "hexstr":
                raise Bmv2JsonError(f"p4sim cannot translate a {t['type']} transition")
            value, mask = int(t["value"], 16), int(t["mask"], 16) if t.get("mask") else None
            parts, shift = [], sum((w + 7) // 8 * 8 for _, w in keys)
            vals, masks = [], []
            for _, w in keys:  # BMv2 concatenates the key fields, each in whole bytes
                shift -= (w + 7) // 8 * 8
                bits = (1 << w) - 1
                vals.append(((value >> shift) & bits, w))
                masks.append(((mask >> shift) & bits, w) if mask is not None else None)
                part = f"{w}w{(value >> shift) & bits}"
                if mask is not None:
                    part += f" &&& {w}w{(mask >> shift) & bits}"
                parts.append(part)
            if joined:
                label = f"{total}w{_concat(vals)}"
                if mask is not None:
                    label += f" &&& {total}w{_concat([m for m in masks if m is not None])}"
            else:
                label = parts[0] if len(parts) == 1 else f"({', '.join(parts)})"
            cases.append(f"{label}: {self._state(t['next_state'], init)};")
        if not any(c.startswith("default") for c in cases):
            cases.append("default: no_match_error;")  # BMv2: no case matches, error NoMatch
        key = " ++ ".join(k for k, _ in keys) if joined else ", ".join(k for k, _ in keys)
        return f"transition select({key}) {{ {' '.join(cases)} }}"

    def checksum_control(self, name: str, verify: bool) -> list[str]:
        calls = []
        for c in self.doc.get("checksums") or []:
            if not c.get("verify" if verify else "update"):
                continue
            calc = self.calcs[c["calculation"]]
            if calc.get("algo") != "csum16":
                raise Bmv2JsonError(f"p4sim cannot translate the checksum algorithm {calc['algo']}")
            fields = ", ".join(self.expr(x, [])[0] for x in calc["input"])
            target, _ = self.field_ref(c["target"])
            cond = self.boolean(c["if_cond"], []) if c.get("if_cond") else "true"
            fn = "verify_checksum" if verify else "update_checksum"
            calls.append(f"{fn}({cond}, {{ {fields} }}, {target}, HashAlgorithm.csum16);")
        head = f"control {name}(inout headers_t hdr, inout meta_t meta)"
        return [f"{head} {{ apply {{ {' '.join(calls)} }} }}"]

    def pipeline(self, which: str, ctl: str) -> list[str]:
        pipe = next((p for p in self.doc.get("pipelines") or [] if p["name"] == which), None)
        lines = [
            f"control {ctl}(inout headers_t hdr, inout meta_t meta,",
            "        inout standard_metadata_t sm) {",
        ]
        if pipe is None:
            return lines + ["    apply { }", "}"]
        self.tables = {t["name"]: t for t in pipe.get("tables") or []}
        self.conds = {c["name"]: c for c in pipe.get("conditionals") or []}
        self.profiles = {p["name"]: p for p in pipe.get("action_profiles") or []}
        used = {a for t in self.tables.values() for a in t["action_ids"]}
        lines += ["    " + d for d in self.externs(used, set(self.tables))]
        lines += ["    " + d for d in self.action_profiles()]
        self.meter_reads = self.direct_meter_reads()
        for aid in sorted(used):
            lines.append("    " + self.action(self.actions[aid]))
        for t in self.tables.values():
            lines += ["    " + line for line in self.table(t)]
        lines.append(f"    apply {{ {self.node(pipe.get('init_table'), 0)} }}")
        lines.append("}")
        return lines

    def digest_type(self, ll: dict[str, Any]) -> str:
        return _ident(str(ll.get("name") or f"digest_{ll['id']}"))

    def externs(self, actions: set[int], tables: set[str]) -> list[str]:
        """Declarations of the register, counter and meter arrays this pipeline uses (its
        actions name them, or they are bound to its tables)."""
        named = {
            p["value"]
            for aid in actions
            for prim in self.actions[aid].get("primitives") or []
            for p in prim.get("parameters") or []
            if isinstance(p, dict) and p.get("type") in _EXTERN_PARAMS
        }
        out = []
        for r in self.doc.get("register_arrays") or []:
            if r["name"] in named:
                out.append(
                    f'@name(".{r["name"]}") register<bit<{r["bitwidth"]}>>({r["size"]}) '
                    f"{_ident(r['name'])};"
                )
        for kind, key in (("counter", "counter_arrays"), ("meter", "meter_arrays")):
            for c in self.doc.get(key) or []:
                unit = "CounterType.packets_and_bytes" if kind == "counter" else "MeterType."
                if kind == "meter":
                    unit += "bytes" if c.get("type") == "bytes" else "packets"
                if c.get("is_direct"):
                    if c.get("binding") in tables and kind == "counter":
                        out.append(
                            f'@name(".{c["name"]}") direct_counter({unit}) {_ident(c["name"])};'
                        )
                    elif c.get("binding") in tables:
                        target = c.get("result_target")
                        if not target:
                            raise Bmv2JsonError(f"direct meter {c['name']} has no result_target")
                        _, w = self.field_ref(target)
                        out.append(
                            f'@name(".{c["name"]}") direct_meter<bit<{w}>>({unit}) '
                            f"{_ident(c['name'])};"
                        )
                elif c["name"] in named:
                    out.append(
                        f'@name(".{c["name"]}") {kind}({c["size"]}, {unit}) {_ident(c["name"])};'
                    )
        return out

    def action_profiles(self) -> list[str]:
        """Declarations of the pipeline's action profiles and selectors."""
        out = []
        for p in self.profiles.values():
            name, size = p["name"], int(p.get("max_size") or 1024)
            sel = p.get("selector")
            if sel is None:
                kind = f"action_profile(32w{size})"
            else:
                if sel.get("algo") not in _HASHES:
                    raise Bmv2JsonError(f"p4sim cannot translate the selector hash {sel['algo']}")
                kind = f"action_selector(HashAlgorithm.{sel['algo']}, 32w{size}, 32w32)"
            out.append(f'@name(".{name}") {kind} {_ident(name)};')
        return out

    def direct_meter_reads(self) -> dict[int, str]:
        """action id -> the statement reading its table's direct meter into the meter's
        ``result_target`` (BMv2 writes the colour there when the table hits)."""
        meters = {m["name"]: m for m in self.doc.get("meter_arrays") or [] if m.get("is_direct")}
        reads: dict[int, str] = {}
        users: dict[int, set[str]] = {}
        for t in self.tables.values():
            for aid in t["action_ids"]:
                users.setdefault(aid, set()).add(t["name"])
        for t in self.tables.values():
            name = t.get("direct_meters")
            if not name:
                continue
            m = meters.get(name)
            if m is None:
                raise Bmv2JsonError(f"table {t['name']} names an unknown direct meter {name}")
            dst, _ = self.field_ref(m["result_target"])
            for aid in t["action_ids"]:
                if users[aid] != {t["name"]}:  # also another table's action
                    if not self.actions[aid].get("primitives"):
                        continue  # an empty action (NoAction) reads nothing
                    raise Bmv2JsonError(
                        f"p4sim cannot translate action {self.actions[aid]['name']}: used by "
                        f"{sorted(users[aid])} and reading the direct meter of {t['name']}"
                    )
                reads[aid] = f"{_ident(name)}.read({dst});"
        return reads

    def action(self, a: dict[str, Any]) -> str:
        rd = [(_ident(p["name"]), int(p["bitwidth"])) for p in a["runtime_data"]]
        params = ", ".join(f"bit<{w}> {n}" for n, w in rd)
        body = " ".join(self.primitive(p, rd) for p in a.get("primitives") or [])
        if a["id"] in self.meter_reads:
            body = f"{self.meter_reads[a['id']]} {body}"
        return f'@name(".{a["name"]}") action a{a["id"]}({params}) {{ {body} }}'

    def table(self, t: dict[str, Any]) -> list[str]:
        kind = t.get("type", "simple")
        if kind not in ("simple", "indirect", "indirect_ws"):
            raise Bmv2JsonError(f"p4sim cannot translate table {t['name']} of type {kind}")
        keys = []
        for k in t.get("key") or []:
            if k["match_type"] not in ("exact", "lpm", "ternary", "range") or k.get("mask"):
                raise Bmv2JsonError(
                    f"p4sim cannot translate the {k['match_type']} key of {t['name']}"
                )
            code, _ = self.field_ref(k["target"])
            keys.append(f'{code}: {k["match_type"]} @name("{k["name"]}");')
        profile = None
        if kind != "simple":
            profile = self.profiles.get(t.get("action_profile") or "")
            if profile is None:
                raise Bmv2JsonError(f"table {t['name']} names no action profile of its pipeline")
            if kind == "indirect_ws":
                if profile.get("selector") is None:
                    raise Bmv2JsonError(f"table {t['name']}: {profile['name']} has no selector")
                for x in profile["selector"].get("input") or []:
                    keys.append(f"{self.expr(x, [])[0]}: selector;")
        actions = " ".join(f"a{i};" for i in t["action_ids"])
        hidden = "@hidden " if t["name"].startswith("tbl_") else ""  # p4c's own tables
        out = [f'{hidden}@name(".{t["name"]}") table t{t["id"]} {{']
        if keys:
            out.append(f"    key = {{ {' '.join(keys)} }}")
        out.append(f"    actions = {{ {actions} }}")
        out.append(f"    size = {t.get('max_size', 1024)};")
        if profile is not None:
            out.append(f"    implementation = {_ident(profile['name'])};")
        if t.get("direct_meters"):
            out.append(f"    meters = {_ident(t['direct_meters'])};")
        if t.get("with_counters"):
            direct = [
                c["name"]
                for c in self.doc.get("counter_arrays") or []
                if c.get("is_direct") and c.get("binding") == t["name"]
            ]
            if len(direct) != 1:
                raise Bmv2JsonError(f"table {t['name']} counts but names no direct counter")
            out.append(f"    counters = {_ident(direct[0])};")
        d = t.get("default_entry")
        if d is not None:
            args = ", ".join(str(int(x, 16)) for x in d.get("action_data") or [])
            const = "const " if d.get("action_const") else ""
            out.append(f"    {const}default_action = a{d['action_id']}({args});")
        entries = t.get("entries") or []
        if entries:
            out.append("    const entries = {")
            for e in entries:
                out.append(f"        {self.entry(t, e)}")
            out.append("    }")
        out.append("}")
        return out

    def entry(self, t: dict[str, Any], e: dict[str, Any]) -> str:
        parts = []
        for k, m in zip(t["key"], e["match_key"], strict=False):
            _, w = self.field_ref(k["target"])
            v = int(m["key"], 16)
            if m["match_type"] == "lpm":
                mask = ((1 << w) - 1) ^ ((1 << (w - int(m["prefix_length"]))) - 1)
                parts.append(f"{w}w{v} &&& {w}w{mask}")
            elif m["match_type"] == "ternary":
                parts.append(f"{w}w{v} &&& {w}w{int(m['mask'], 16)}")
            else:
                parts.append(f"{w}w{v}")
        ae = e["action_entry"]
        args = ", ".join(str(int(x, 16)) for x in ae.get("action_data") or [])
        key = parts[0] if len(parts) == 1 else f"({', '.join(parts)})"
        return f"{key} : a{ae['action_id']}({args});"

    def node(self, name: str | None, depth: int) -> str:
        if name is None:
            return ""
        if depth > 200:
            raise Bmv2JsonError("the BMv2 pipeline's control flow is too deep to translate")
        if name in self.conds:
            c = self.conds[name]
            cond = self.boolean(c["expression"], [])
            yes, no = self.node(c["true_next"], depth + 1), self.node(c["false_next"], depth + 1)
            return f"if ({cond}) {{ {yes} }} else {{ {no} }}"
        t = self.tables.get(name)
        if t is None:
            raise Bmv2JsonError(f"the BMv2 pipeline names an unknown table or conditional {name}")
        nxt = t.get("next_tables") or {}
        apply = f"t{t['id']}.apply()"
        if "__HIT__" in nxt or "__MISS__" in nxt:
            hit, miss = (
                self.node(nxt.get("__HIT__"), depth + 1),
                self.node(nxt.get("__MISS__"), depth + 1),
            )
            return f"if ({apply}.hit) {{ {hit} }} else {{ {miss} }}"
        targets = set(nxt.values()) if nxt else {t.get("base_default_next")}
        if len(targets) == 1:
            return f"{apply}; {self.node(targets.pop(), depth + 1)}"
        ids = {self.actions[i]["name"]: i for i in t["action_ids"]}
        cases = " ".join(
            f"a{ids[a]}: {{ {self.node(n, depth + 1)} }}" for a, n in nxt.items() if a in ids
        )
        rest = self.node(t.get("base_default_next"), depth + 1)
        return f"switch ({apply}.action_run) {{ {cases} default: {{ {rest} }} }}"


def _concat(parts: list[tuple[int, int]]) -> int:
    """Values of the given widths, concatenated (the first one highest)."""
    out = 0
    for v, w in parts:
        out = (out << w) | v
    return out


def p4_from_bmv2_json(doc: dict[str, Any]) -> str:
    """P4_16 source doing what the BMv2 JSON ``doc`` says (Bmv2JsonError if not covered)."""
    try:
        return _Translator(doc).program()
    except (KeyError, IndexError, TypeError, ValueError) as err:
        raise Bmv2JsonError(f"malformed or unsupported BMv2 JSON: {err!r}") from None
