"""Compile C source into a shared library once, cached by the hash of source and compiler.

Example::

    so = build(source_text, prefix="inc", cache=cache_dir("INC_NATIVE_CACHE", "inc"))
    lib = ctypes.CDLL(str(so))

The library lands in ``cache/PREFIX-DIGEST.so`` (the digest covers the source, the
compiler and the flags), with the source kept beside it to read. Builds of the same source
by several processes (or threads) at once each write their own temporary files and move the
result into place atomically, so a reader never loads half a library. ``CC`` names the
compiler (gcc by default). Failures raise ``BuildError`` with one line a user can act on.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path

DEFAULT_FLAGS = ("-O2", "-shared", "-fPIC")


class BuildError(RuntimeError):
    """The C source could not be compiled or the cache written."""


def compiler() -> str:
    return os.environ.get("CC", "gcc")


def cache_dir(env: str, name: str) -> Path:
    """``$env`` if set, else ``~/.cache/NAME``."""
    d = os.environ.get(env)
    return Path(d) if d else Path.home() / ".cache" / name


def build(source: str, prefix: str, cache: Path, flags: Sequence[str] = DEFAULT_FLAGS) -> Path:
    """The path of the compiled library of ``source`` (built now unless cached)."""
    cc = compiler()
    digest = hashlib.sha256((source + cc + " ".join(flags)).encode()).hexdigest()[:24]
    so = cache / f"{prefix}-{digest}.so"
    if so.exists():
        return so
    me = f"{os.getpid()}-{threading.get_ident()}"  # per process and thread: builds may race
    src = cache / f"{prefix}-{digest}.{me}.c"
    tmp = cache / f".{prefix}-{digest}-{me}.so"
    try:
        cache.mkdir(parents=True, exist_ok=True)
        src.write_text(source)
    except OSError as exc:
        raise BuildError(f"cannot write the build cache {cache}: {exc.strerror}") from None
    try:
        cmd = [cc, *flags, "-o", str(tmp), str(src)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except FileNotFoundError:
        raise BuildError(f"no C compiler ({cc}) on PATH") from None
    except (OSError, subprocess.SubprocessError) as exc:
        raise BuildError(f"cannot build in {cache}: {exc}") from None
    if r.returncode != 0:
        first = (r.stderr.strip().splitlines() or ["?"])[0]
        raise BuildError(f"the C compiler failed on {src}: {first}")
    os.replace(tmp, so)
    src.replace(cache / f"{prefix}-{digest}.c")  # kept beside the library, to read
    return so
