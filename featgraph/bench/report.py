"""What every benchmark suite reports alongside its rows: the machine, table cells, the JSON file."""

from __future__ import annotations

import argparse
import json
import platform
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

from ..graph import Graph
from ..native import toolchain


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    return f"{cpu}, {torch.get_num_threads()} torch threads, {toolchain.cxx_version()}"


def device_name(device: str | torch.device) -> str:
    """The accelerator's name for a CUDA device (``torch.cuda.get_device_name``), else the device type."""
    device = torch.device(device)
    return torch.cuda.get_device_name(device) if device.type == "cuda" else device.type


def cell(value: float | None, spec: str) -> str:
    """A table cell: the number formatted, or "-" where there is none."""
    return "-" if value is None else format(value, spec)


def markdown_row(cells: list[object]) -> str:
    """One row of a markdown table."""
    return "| " + " | ".join(str(c) for c in cells) + " |"


def markdown_header(*titles: str) -> str:
    """A markdown table's title row and separator."""
    return markdown_row(list(titles)) + "\n|" + "---|" * len(titles)


def add_table_arguments(
    parser: argparse.ArgumentParser,
    graphs: Iterable[str],
    ops: Iterable[str],
    dims: list[int],
    repeat: int,
    threads: bool = True,
) -> None:
    """The options every per-graph, per-op, per-width table takes: ``--graphs --dims --ops [--threads]
    --repeat --scale --json``."""
    parser.add_argument("--graphs", nargs="+", default=list(graphs), choices=list(graphs))
    parser.add_argument("--dims", nargs="+", type=int, default=dims)
    parser.add_argument("--ops", nargs="+", default=list(ops), choices=list(ops))
    if threads:
        parser.add_argument("--threads", type=int, default=toolchain.num_threads())
    parser.add_argument("--repeat", type=int, default=repeat)
    parser.add_argument("--scale", type=float, default=1.0, help="shrink the graphs' vertex counts (tests)")
    parser.add_argument("--json", metavar="PATH", help="write every row as JSON")


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
