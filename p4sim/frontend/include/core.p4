/*
 * p4sim: the P4_16 core library.
 *
 * Written for p4sim from the "core library" appendix of the P4_16 language
 * specification. Programs pull it in with `#include <core.p4>`; the names and
 * signatures match the specification so that existing programs compile
 * unchanged against it.
 */

#ifndef P4SIM_CORE_P4
#define P4SIM_CORE_P4
/* the guard macro p4c's own header defines: programs test it with #ifdef */
#define _CORE_P4_

/* Error codes every target knows. Programs may add their own codes with
 * further `error { ... }` declarations; all of them form one `error` type. */
error {
    NoError,                /* nothing went wrong */
    PacketTooShort,         /* extract/lookahead ran past the end of the packet */
    NoMatch,                /* no case of a select expression matched */
    StackOutOfBounds,       /* header stack index out of range (e.g. .next when full) */
    HeaderTooShort,         /* a varbit extract asked for more bits than the field holds */
    ParserTimeout,          /* the parser ran longer than the target allows */
    ParserInvalidArgument   /* a parser primitive got an argument it cannot handle */
}

/* The packet being parsed. The parser reads it front to back through a
 * cursor; every method below works at the cursor. */
extern packet_in {
    /* Fill the fixed-size header `hdr` from the next bits, mark it valid and
     * move the cursor past it. For a header stack's `.next`, fills the next
     * free element. */
    void extract<T>(out T hdr);

    /* Same, for a header ending in a varbit field: that field receives
     * `variableFieldSizeInBits` bits. */
    void extract<T>(out T variableSizeHeader,
                    in bit<32> variableFieldSizeInBits);

    /* Peek at the next sizeof(T) bits without moving the cursor. */
    T lookahead<T>();

    /* Skip `sizeInBits` bits. */
    void advance(in bit<32> sizeInBits);

    /* Total packet length in bytes (not all targets can tell it). */
    bit<32> length();
}

/* The packet being assembled by a deparser. */
extern packet_out {
    /* Append `hdr` when it is a valid header (a stack, union or struct
     * emits its members in order; invalid headers are skipped). */
    void emit<T>(in T hdr);
}

/* In a parser: when `check` is false, stop parsing and report `toSignal`. */
extern void verify(in bool check, in error toSignal);

/* An action that does nothing; the usual default action of tables. */
@noWarn("unused")
action NoAction() {}

/* Match kinds of table keys that every target implements. */
match_kind {
    exact,      /* the key equals the entry's value */
    ternary,    /* the key equals the value in the bits set in the mask */
    lpm         /* longest-prefix match */
}

/* Compile-time assertions: the compiler stops with `message` (or a default
 * text) when `check` is not true. They return a bool so that a program can
 * write `const bool ok = static_assert(X > 3);`. */
extern bool static_assert(bool check, string message);
extern bool static_assert(bool check);

#endif /* P4SIM_CORE_P4 */
