"""What experiments leave behind: a JSON record, a terminal table and plots, in one style.

Example:
    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp())
    >>> write_record(out / "run.json", {"switch": {"iter_time_s": 0.061}}).name
    'run.json'
    >>> t = table("demo", ["method", "iter time"], [["switch", "61.0 ms"]])
    >>> t.row_count
    1
    >>> plot_lines(out / "acc.png", {"switch": ([1, 2], [0.5, 0.9])}, "s", "accuracy").exists()
    True

Every experiment writes its record as JSON next to its PNGs under ``results/`` (or
``--results``), prints one rich table, and names the files it wrote.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def write_record(path: Path, record: Mapping[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1))
    return path


def table(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> Any:
    """A rich table: the first column left-aligned (names), the others right (figures)."""
    from rich.table import Table

    t = Table(title=title)
    for i, col in enumerate(columns):
        t.add_column(col, justify="left" if i == 0 else "right")
    for row in rows:
        t.add_row(*row)
    return t


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_lines(
    path: Path,
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    xlabel: str,
    ylabel: str,
    title: str = "",
) -> Path:
    """One line (with markers) per label."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, (xs, ys) in series.items():
        ax.plot(xs, ys, marker="o", label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def plot_bars(path: Path, panels: Sequence[tuple[str, Mapping[str, float]]]) -> Path:
    """Side-by-side bar panels, each ``(y label, {bar label: value})``."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 3.5), squeeze=False)
    colours = ("tab:blue", "tab:orange", "tab:green", "tab:red")
    for i, (ax, (ylabel, bars)) in enumerate(zip(axes[0], panels, strict=True)):
        ax.bar(list(bars), list(bars.values()), color=colours[i % len(colours)])
        ax.set_ylabel(ylabel)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path
