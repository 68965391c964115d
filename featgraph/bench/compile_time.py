"""``featgraph bench compile``: how long a new CPU kernel takes to compile, each source parsing the standard
headers itself against after them precompiled once (``native.compiler.precompiled_header``), in one run.

Sources: the generated kernels of ``bench kernels``' ops (GCN aggregation, max, the fused MLP aggregation, dot
attention) at ``--widths`` feature widths, each a library of its own. Each mode builds every one into an empty
cache of its own, the modes taking turns source by source so both meet the machine alike; the precompiled
mode's one-off cost, building the header, is reported beside it. ``ratio``: the parsed mode's median over the
row's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from ..datasets import uniform
from ..native import compiler
from .kernels import op_kernel
from .report import Table, machine, write_json

OPS = ("gcn", "max", "mlp", "attention")
MODES = {"headers parsed by each source": "0", "headers precompiled": "1"}  # FEATGRAPH_PRECOMPILE_HEADERS


@dataclass
class Row:
    mode: str
    kernels: int
    median_ms: float
    mean_ms: float
    ratio: float | None = None
    header_s: float | None = None  # building the precompiled header, once per compiler, flags and CPU


TABLE = Table({
    "mode": "mode", "kernels": "kernels", "median ms / kernel": "median_ms:.0f", "mean ms / kernel": "mean_ms:.0f",
    "ratio": "ratio:.2f", "header built once, s": "header_s:.2f",
})  # fmt: skip


def kernel_sources(widths: list[int]) -> list[str]:
    """The C++ of each op's kernel at each width, on a small graph (the source does not depend on its size)."""
    g = uniform(200, 8, seed=0)
    return [op_kernel(op, g, width, 1).source for op in OPS for width in widths]


@contextmanager
def _mode(cache: Path, setting: str) -> Iterator[None]:
    """Builds go to ``cache`` with the precompiled headers on ("1") or off ("0")."""
    saved = {name: os.environ.get(name) for name in ("FEATGRAPH_CACHE_DIR", compiler.PRECOMPILE_SETTING)}
    os.environ["FEATGRAPH_CACHE_DIR"], os.environ[compiler.PRECOMPILE_SETTING] = str(cache), setting
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def measure(widths: list[int]) -> list[Row]:
    """Build every kernel source (``kernel_sources``) in each mode, each into a fresh cache; one row per mode.
    The sources come from kernels built in a throwaway cache of their own, so the user's stays untouched."""
    seconds: dict[str, list[float]] = {mode: [] for mode in MODES}
    header_s = None
    with tempfile.TemporaryDirectory(prefix="featgraph-compile-") as root:
        with _mode(Path(root) / "sources", "1"):
            sources = kernel_sources(widths)
        caches = {mode: Path(root) / f"cache{n}" for n, mode in enumerate(MODES)}
        with _mode(caches["headers precompiled"], "1"):
            start = time.perf_counter()
            if compiler.precompiled_header() is not None:
                header_s = time.perf_counter() - start
        for source in sources:
            for mode, setting in MODES.items():
                with _mode(caches[mode], setting):
                    start = time.perf_counter()
                    compiler.build(source)
                    seconds[mode].append(time.perf_counter() - start)
    rows = [
        Row(mode, len(times), statistics.median(times) * 1e3, statistics.fmean(times) * 1e3)
        for mode, times in seconds.items()
    ]
    for row in rows:
        row.ratio = rows[0].median_ms / row.median_ms
    rows[1].header_s = header_s
    return rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--widths", nargs="+", type=int, default=[8, 16, 32, 64, 128, 256])
    parser.add_argument("--json", default=None, help="write the rows as JSON here")


def run(args: argparse.Namespace) -> list[Row]:
    print(f"machine: {machine()}", flush=True)
    rows = measure(args.widths)
    if rows[1].header_s is None:
        print("the compiler could not precompile the headers: both rows parse them", flush=True)
    print(TABLE.header, flush=True)
    print(TABLE.rows(rows), flush=True)
    write_json(args.json, [asdict(row) for row in rows], widths=args.widths)
    return rows
