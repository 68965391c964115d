"""``featgraph bench output-pool``: where large CPU kernel outputs come from (``featgraph/backends/cpu/buffers.py``),
three ways, alternated in one process.

Rows: filling a fresh n x d float32 tensor (the page-fault cost alone), the GCN aggregation (SpMM) and GCN
forward + backward, each with every output fresh in 4 KiB pages (torch's allocator), fresh and released when
it dies, in 2 MiB huge pages above glibc's largest mmap threshold (``huge_page_memory``, the pool's own
setting for those outputs; below it from torch's allocator as before; "-" where the system has no transparent
huge pages), and recycled by the pool from outputs that died (outputs of 1 MiB and more kept, below the pool's
own floor of 32 MiB too). Best of ``--repeat`` runs, the settings interleaved so a noisy neighbour hits them
alike."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch

from ..backends.cpu import buffers
from ..timing import interleaved_best_ms
from .kernels import GRAPHS, bench_gcn_train, op_kernel
from .report import Table, add_common_arguments, each_graph, machine, write_json

KEEP_ALL = 1 << 40  # no practical bound on kept memory while measuring
RECYCLED_MIN_BYTES = 1024**2  # the recycled setting keeps outputs from 1 MiB up, below the pool's own floor too
TABLE = Table({
    "graph": "graph", "d": "d", "work": "work", "fresh 4 KiB pages ms": "fresh_4k_ms:.2f",
    "fresh huge pages ms": "fresh_huge_ms:.2f", "recycled ms": "recycled_ms:.2f",
    "4 KiB / recycled": "fresh_4k_over_recycled:.2f", "huge / recycled": "fresh_huge_over_recycled:.2f",
})  # fmt: skip


@dataclass
class Row:
    graph: str
    d: int
    work: str
    fresh_4k_ms: float
    fresh_huge_ms: float | None
    recycled_ms: float
    fresh_4k_over_recycled: float
    fresh_huge_over_recycled: float | None


def settings_ms(fn: Callable[[], object], repeat: int) -> dict[str, float]:
    """Best ms of ``fn`` with outputs fresh in 4 KiB pages, fresh in huge pages (where the system has them) and
    recycled, alternating run by run; the pool's own settings as they were afterwards, its kept buffers
    released."""
    pool = buffers.POOL
    fields = ("max_free_bytes", "huge_pages", "keep_huge", "min_bytes")
    before = tuple(getattr(pool, name) for name in fields)
    huge = buffers.huge_pages_available()
    # name: (free bytes kept, huge pages, huge-page buffers kept too, smallest pooled request)
    settings = {"fresh_4k": (0, False, False, before[3]), "recycled": (KEEP_ALL, huge, True, RECYCLED_MIN_BYTES)}
    if huge:
        settings["fresh_huge"] = (0, True, False, before[3])

    def under(kept: int, huge_pages: bool, keep_huge: bool, min_bytes: int) -> Callable[[], object]:
        def run() -> object:
            for name, value in zip(fields, (kept, huge_pages, keep_huge, min_bytes), strict=True):
                setattr(pool, name, value)
            return fn()

        return run

    try:
        return interleaved_best_ms({n: under(*s) for n, s in settings.items()}, repeat, warmup=0)
    finally:
        for name, value in zip(fields, before, strict=True):
            setattr(pool, name, value)
        buffers.release()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--graphs", nargs="+", default=list(GRAPHS), choices=list(GRAPHS))
    parser.add_argument("--dims", type=int, nargs="+", default=[128, 256, 512])
    add_common_arguments(parser, repeat=7, threads=2, scale=1.0)


def run(args: argparse.Namespace) -> list[Row]:
    torch.set_num_threads(args.threads)
    print(f"machine: {machine()}; {args.threads} threads")
    rows = []
    for name, g in each_graph(args.graphs, GRAPHS, args.scale, TABLE.header):
        for d in args.dims:
            x = torch.randn(g.num_nodes, d)
            spmm = op_kernel("gcn", g, d, args.threads)
            work = {
                "fill an n x d output": lambda shape=x.shape: buffers.empty(shape, torch.float32).fill_(1.0),
                "GCN aggregation (SpMM)": lambda spmm=spmm, x=x: spmm(XV=x),
                "GCN forward + backward": bench_gcn_train(g, d, args.threads)["featgraph"],
            }
            for label, fn in work.items():
                fn()  # compile and warm up outside the timing
                ms = settings_ms(fn, args.repeat)
                huge = ms.get("fresh_huge")
                recycled = ms["recycled"]
                rows.append(Row(
                    name, d, label, ms["fresh_4k"], huge, recycled, ms["fresh_4k"] / recycled,
                    None if huge is None else huge / recycled,
                ))  # fmt: skip
                print(TABLE.rows(rows[-1:]), flush=True)
    write_json(args.json, [asdict(r) for r in rows], threads=args.threads)
    return rows
