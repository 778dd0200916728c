"""A text file's input splits, as Hadoop's text input and Spark's ``textFile`` cut them, and
their words counted in bounded chunks (ASK's own mappers' input).

Example::

    for counts in chunk_counts_of(Path("words.txt"), 4096, part=0, parts=2):
        ...                                     # Counter of about 4096 words of split 0
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterator
from pathlib import Path


def split_blocks(
    path: Path, part: int = 0, parts: int = 1, block: int = 1 << 20
) -> Iterator[bytes]:
    """Split ``part`` of ``parts`` of a file as Hadoop's text input splits it (and Spark's
    ``textFile``), in blocks of about ``block`` bytes of whole lines: split ``i`` is the
    byte range ``[i S / n, (i + 1) S / n)``; a line belongs to the split its first byte is
    in. Every line is in exactly one split."""
    size = path.stat().st_size
    start, end = size * part // parts, size * (part + 1) // parts
    with open(path, "rb") as f:
        if start:
            f.seek(start - 1)
            f.readline()  # the rest of a line that began before the split
        pos = f.tell()
        while pos < end:
            data = f.read(min(block, end - pos))
            if not data:
                break
            if not data.endswith(b"\n"):
                data += f.readline()  # the last line began in this split: all of it
            pos += len(data)
            yield data


def chunk_counts_of(
    path: Path, size: int, part: int = 0, parts: int = 1
) -> Iterator[dict[Hashable, int]]:
    """The words (``str.split`` of UTF-8 text) of split ``part`` of ``path``, counted in
    chunks of about ``size`` words (blocks of ``6 size`` bytes; a bounded map-side combine,
    ``Counter`` in C)."""
    for data in split_blocks(path, part, parts, max(1024, 6 * size)):
        yield Counter(data.decode("utf-8", errors="replace").split())
