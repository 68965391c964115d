"""PNG figures for the benchmark reports (matplotlib, an optional extra: without it no figure is drawn
and the reports say so)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt


def _saved(plt, fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def heatmap(
    values: Sequence[Sequence[float]],
    rows: Sequence[object],
    cols: Sequence[object],
    path: Path,
    title: str,
    row_label: str,
    col_label: str,
) -> Path | None:
    """A grid of numbers as coloured cells with the value written in each; None without matplotlib."""
    if not available():
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(1.1 * len(cols) + 2, 0.8 * len(rows) + 1.5))
    image = ax.imshow(values, cmap="viridis_r", aspect="auto")
    ax.set_xticks(range(len(cols)), [str(c) for c in cols])
    ax.set_yticks(range(len(rows)), [str(r) for r in rows])
    ax.set(xlabel=col_label, ylabel=row_label, title=title)
    for i, row in enumerate(values):
        for j, value in enumerate(row):
            ax.text(j, i, f"{value:.1f}", ha="center", va="center", color="white", fontsize=8)
    fig.colorbar(image, ax=ax)
    return _saved(plt, fig, path)


def lines(
    series: dict[str, tuple[Sequence[float], Sequence[float]]],
    path: Path,
    title: str,
    x_label: str,
    y_label: str,
    log_x: bool = False,
    log_y: bool = False,
) -> Path | None:
    """One line per named (x, y) series; None without matplotlib."""
    if not available():
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for name, (x, y) in series.items():
        style = "--" if name.startswith("bound") else "-o"
        ax.plot(x, y, style, label=name, markersize=4)
    if log_x:
        ax.set_xscale("log", base=2)
    if log_y:
        ax.set_yscale("log")
    ax.set(xlabel=x_label, ylabel=y_label, title=title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _saved(plt, fig, path)


def bars(
    groups: dict[str, dict[str, float]], path: Path, title: str, y_label: str, reference: float = 1.0
) -> Path | None:
    """Grouped bars on a log axis: one group per key of ``groups``, one bar per inner key (a colour per
    name across groups), and a line at ``reference``."""
    if not available():
        return None
    plt = _pyplot()
    names = sorted({name for members in groups.values() for name in members})
    colours = {name: plt.get_cmap("tab10")(k % 10) for k, name in enumerate(names)}
    fig, ax = plt.subplots(figsize=(1.7 * len(groups) + 2, 4.4))
    labelled: set[str] = set()
    for i, members in enumerate(groups.values()):
        width = 0.8 / max(len(members), 1)
        for k, (name, value) in enumerate(sorted(members.items())):
            label = None if name in labelled else name
            labelled.add(name)
            ax.bar(i - 0.4 + (k + 0.5) * width, value, width, color=colours[name], label=label)
    ax.axhline(reference, color="black", linewidth=0.8)
    ax.set_xticks(range(len(groups)), list(groups), fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel(y_label)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, ncol=2)
    return _saved(plt, fig, path)
