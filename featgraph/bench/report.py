"""What every benchmark suite reports alongside its rows: the machine, table cells, the JSON file."""

from __future__ import annotations

import json
import platform
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ..backends import toolchain
from ..graph import Graph


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    return f"{cpu}, {torch.get_num_threads()} torch threads, {toolchain.cxx_version()}"


def cell(value: float | None, spec: str) -> str:
    """A table cell: the number formatted, or "-" where there is none."""
    return "-" if value is None else format(value, spec)


def markdown_row(cells: list[object]) -> str:
    """One row of a markdown table."""
    return "| " + " | ".join(str(c) for c in cells) + " |"


def markdown_header(*titles: str) -> str:
    """A markdown table's title row and separator."""
    return markdown_row(list(titles)) + "\n|" + "---|" * len(titles)


def write_json(path: str | None, rows: list[dict[str, Any]], **extra: Any) -> None:
    """``{"machine": ..., **extra, "rows": rows}`` to ``path`` (nothing when no path was asked for)."""
    if path:
        with open(path, "w") as f:
            json.dump({"machine": machine(), **extra, "rows": rows}, f, indent=1)


def each_graph(
    names: list[str], builders: dict[str, Callable[[float], Graph]], scale: float, header: str
) -> Iterator[tuple[str, Graph]]:
    """Build each named graph in turn, announcing its size and the table header its rows will follow."""
    for name in names:
        g = builders[name](scale)
        print(f"graph {name}: {g.num_nodes} vertices, {g.num_edges} edges", flush=True)
        print(header, flush=True)
        yield name, g
