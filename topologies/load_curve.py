"""Throughput against offered load, one panel per system, both designs in each (a PNG).

Example::

    plot_curves({"key-value reads": {"server only": [(4, 9e3), (64, 2e4)],
                                     "switch cache": [(4, 2e4), (64, 7e4)]}}, Path("c.png"))

Offered load is the requests in flight over all clients (clients x window). A design whose
curve goes flat as the load grows is saturated: more requests only queue.
"""

from __future__ import annotations

from pathlib import Path


def plot_curves(panels: dict[str, dict[str, list[tuple[int, float]]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4), squeeze=False)
    for ax, (title, curves) in zip(axes[0], panels.items(), strict=True):
        for mode, points in curves.items():
            xs, ys = zip(*sorted(points), strict=True)
            ax.plot(xs, ys, marker="o", label=mode)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("requests in flight (clients x window)")
        ax.set_ylabel("operations / s")
        ax.set_title(title)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
