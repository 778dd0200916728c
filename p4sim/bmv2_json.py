"""p4c's BMv2 JSON as a device config: p4sim runs the P4 program the JSON was compiled from.

What ``p4c --target bmv2`` writes (and ``simple_switch`` takes) names its source: the
top-level ``"program"`` is the P4 file given to p4c. p4sim finds that file (as written when
absolute, else under each search directory: the JSON's folder and the one above it, the
working directory, any ``--p4-source-dir``), compiles it and checks that the JSON describes
the same program: every table of the program, with its actions, is a table of the JSON, and
every register, counter and meter array of the JSON is one of the program's with the same
size (a JSON that does not match its source is refused, saying how). A JSON whose source is
not at hand is run itself: ``p4sim.bmv2_translate`` writes it back as P4 (what it covers is
listed there), or the refusal says why it cannot.

Example::

    sw, source = switch_from_bmv2_json(Path("build/basic.json").read_bytes(),
                                       source_dirs(Path("build/basic.json")))
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from p4sim.bmv2_translate import Bmv2JsonError, p4_from_bmv2_json

log_ = logging.getLogger("p4sim")


def looks_like_bmv2_json(data: bytes) -> bool:
    """True for a JSON object with the keys p4c's BMv2 back end always writes."""
    if data.lstrip()[:1] != b"{":
        return False
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(doc, dict) and "pipelines" in doc and "header_types" in doc


def source_dirs(json_path: Path | None = None, extra: Sequence[str | Path] = ()) -> list[Path]:
    """Where a JSON's source is looked for: beside the JSON and one folder up (the
    tutorials' ``build/NAME.json`` beside ``NAME.p4``), the working directory, ``extra``."""
    dirs = [Path(d) for d in extra]
    if json_path is not None:
        dirs += [json_path.resolve().parent, json_path.resolve().parent.parent]
    dirs.append(Path.cwd())
    return list(dict.fromkeys(dirs))


def find_source(doc: dict[str, Any], dirs: Sequence[Path]) -> Path:
    """The P4 file named by the JSON's ``"program"`` (Bmv2JsonError when not found).

    ``p4c-bm2-ss`` names the source as it was given; the ``p4c`` driver names its
    preprocessed copy ``OUTDIR/NAME.p4i``, which holds the whole program (p4sim runs it),
    and failing that ``NAME.p4`` is looked for in ``dirs``."""
    program = doc.get("program")
    if not isinstance(program, str) or not program.endswith((".p4", ".p4i")):
        raise Bmv2JsonError(
            'this BMv2 JSON does not name its P4 program (no "program": "NAME.p4"); '
            "p4sim runs P4 source: give it the .p4 file"
        )
    given = Path(program)
    names = [given] if given.suffix == ".p4" else [given, given.with_suffix(".p4")]
    candidates: list[Path] = []
    for name in names:
        candidates += [name] if name.is_absolute() else [d / name for d in dirs]
        candidates += [d / name.name for d in dirs]  # p4c run from another folder
    for c in candidates:
        if c.is_file():
            return c
    looked = ", ".join(dict.fromkeys(str(c.parent) for c in candidates))
    raise Bmv2JsonError(
        f"this BMv2 JSON was compiled from {program}, which p4sim runs from source; "
        f"not found in {looked} (start p4sim in the program's folder or add --p4-source-dir)"
    )


def check_same_program(doc: dict[str, Any], switch: Any, source: Path) -> None:
    """Bmv2JsonError unless the JSON and the compiled ``switch`` describe one program."""
    info = switch.info
    tables = {
        t.get("name"): t
        for p in doc.get("pipelines") or []
        for t in p.get("tables") or []
        if isinstance(t, dict)
    }
    problems = []
    for t in info.tables:
        theirs = tables.get(t.name)
        if theirs is None:
            problems.append(f"table {t.name} is not in the JSON")
            continue
        listed = {str(a).lstrip(".") for a in theirs.get("actions") or []}
        missing = {r.action.lstrip(".") for r in t.actions} - listed
        if missing:
            problems.append(f"table {t.name}: actions {', '.join(sorted(missing))} not in the JSON")
    ours = {
        "register_arrays": {r.name: r.size for r in info.registers},
        "counter_arrays": {c.name: c.size for c in info.counters},
        "meter_arrays": {m.name: m.size for m in info.meters},
    }
    for key, arrays in ours.items():
        for a in doc.get(key) or []:
            if not isinstance(a, dict) or a.get("is_direct"):
                continue
            name, size = a.get("name"), a.get("size")
            if name not in arrays:
                problems.append(f"{key[:-7]} {name} is not in {source.name}")
            elif size is not None and size != arrays[name]:
                problems.append(f"{key[:-7]} {name} has size {size}, {arrays[name]} in the source")
    if problems:
        raise Bmv2JsonError(
            f"this BMv2 JSON does not describe {source}: " + "; ".join(problems[:5])
        )


def switch_from_bmv2_json(
    data: bytes,
    dirs: Sequence[Path],
    include_dirs: Sequence[str] = (),
    log: Any = None,
    tm: Any = None,
    backend: str = "python",
) -> tuple[Any, Path]:
    """``(Switch, source path)`` for a BMv2 JSON: its source compiled and checked against
    it (Bmv2JsonError; P4Error when the source does not compile)."""
    from p4sim.switch import Switch

    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as err:
        raise Bmv2JsonError(f"not a BMv2 JSON file: {err}") from None
    if not isinstance(doc, dict):
        raise Bmv2JsonError("not a BMv2 JSON file: the top level is not an object")
    try:
        source = find_source(doc, dirs)
    except Bmv2JsonError as missing:
        source = _translated(doc, missing)
    else:
        includes = (str(source.parent), *include_dirs)
        sw = Switch.from_file(str(source), include_dirs=includes, log=log, tm=tm, backend=backend)
        check_same_program(doc, sw, source)
        return sw, source
    log_.info("%s; running the JSON itself (translated to %s)", missing_text(doc), source)
    # p4sim's own reconstruction of a program p4c compiled: checked by p4c already
    sw = Switch.from_file(str(source), log=log, tm=tm, backend=backend, target="p4sim")
    return sw, source


def missing_text(doc: dict[str, Any]) -> str:
    return f"the P4 source of this BMv2 JSON ({doc.get('program')}) is not at hand"


def _translated(doc: dict[str, Any], missing: Bmv2JsonError) -> Path:
    """The JSON as P4 source (p4sim.bmv2_translate), kept in a file named by its hash."""
    import hashlib
    import tempfile

    try:
        text = p4_from_bmv2_json(doc)
    except Bmv2JsonError as err:
        raise Bmv2JsonError(f"{missing}; nor can p4sim run the JSON itself: {err}") from None
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / "p4sim-bmv2-json"
    folder.mkdir(exist_ok=True)
    name = Path(str(doc.get("program") or "program.p4")).stem
    path = folder / f"{_safe(name)}-{digest}.p4"
    path.write_text(text)
    return path


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name) or "program"
