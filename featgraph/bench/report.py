"""What every benchmark suite shares: its common options, the machine, its markdown tables, the JSON file and
the worker processes that measure one row each."""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
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


class Table:
    """A markdown table of rows (dataclasses or dicts): per column title, how a row fills the cell: a field's
    name with an optional format spec after a colon (``"ms:.2f"``; "-" where the value is None), or a function
    of the row."""

    def __init__(self, columns: Mapping[str, str | Callable[[Any], object]]) -> None:
        self.columns = dict(columns)
        self.header = markdown_header(*self.columns)

    def rows(self, rows: Iterable[Any]) -> str:
        return "\n".join(markdown_row([self._cell(r, how) for how in self.columns.values()]) for r in rows)

    def __call__(self, rows: Iterable[Any]) -> str:
        """The whole table: the header, then ``rows``."""
        return self.header + "\n" + self.rows(rows)

    @staticmethod
    def _cell(row: Any, how: str | Callable[[Any], object]) -> object:
        if callable(how):
            return how(row)
        name, _, spec = how.partition(":")
        return cell(row[name] if isinstance(row, dict) else getattr(row, name), spec)


def add_common_arguments(
    parser: argparse.ArgumentParser,
    repeat: int | None = None,
    threads: int | None = None,
    scale: float | None = None,
    scale_help: str = "shrink the graphs' vertex counts (tests)",
) -> None:
    """``--repeat``, ``--threads`` and ``--scale`` where a default is given, then ``--json``."""
    if repeat is not None:
        parser.add_argument("--repeat", type=int, default=repeat)
    if threads is not None:
        parser.add_argument("--threads", type=int, default=threads)
    if scale is not None:
        parser.add_argument("--scale", type=float, default=scale, help=scale_help)
    parser.add_argument("--json", metavar="PATH", help="write every row as JSON")


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
    add_common_arguments(parser, repeat, toolchain.num_threads() if threads else None, scale=1.0)


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


def table_rows(
    args: argparse.Namespace,
    builders: dict[str, Callable[[float], Graph]],
    table: Table,
    measure: Callable[[str, Graph, str, int], list[Any]],
) -> list[Any]:
    """The rows of ``measure(graph name, graph, op, d)`` over ``add_table_arguments``' graphs, ops and widths,
    each batch printed under ``table`` as soon as it is measured."""
    rows: list[Any] = []
    for graph_name, g in each_graph(args.graphs, builders, args.scale, table.header):
        for op in args.ops:
            for d in args.dims:
                batch = measure(graph_name, g, op, d)
                print(table.rows(batch), flush=True)
                rows += batch
    return rows


def run_worker(module: str, spec: list[Any], env: Mapping[str, str] | None = None) -> dict[str, Any] | str:
    """One row measured in a fresh process (clean peak memory, no allocator caches shared between rows):
    ``python -m module 'spec as JSON'``, whose last line of output is the row as JSON. The row's fields, or
    why the worker failed."""
    done = subprocess.run(
        [sys.executable, "-m", module, json.dumps(spec)], capture_output=True, text=True, check=False, env=env
    )
    if done.returncode != 0:
        last_line = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return f"worker failed: {last_line[:80]}"
    return json.loads(done.stdout.strip().splitlines()[-1])
