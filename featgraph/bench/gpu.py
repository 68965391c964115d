"""GPU kernel benchmark: featgraph's Triton kernels against cuSPARSE (torch.sparse), the PyG-style
materialised path, PyG and DGL, on the paper's graphs at full size, with peak GPU memory.

Ops: GCN aggregation (featgraph GAR, with hubs staged, on tensor cores in 16 x 16 tiles and in 8 x 1 vectors;
cuSPARSE CSR SpMM; gather + index_add_), fused MLP aggregation (d1 = 8, max), dot-product attention (featgraph
SDDMM, on tensor cores, ``sampled_addmm``, gather + sum), forward + backward of GCN aggregation and of GAT
attention (4 heads) against torch.sparse and PyG's ``GATConv``, and the GCN aggregation and attention on bfloat16
and float16 features (``gcn-bf16`` ...: featgraph's 16-bit kernel against its own float32 kernel on the same
values, cuSPARSE and DGL in the same dtype where they take it). ``ratio`` is baseline time over featgraph time (for
the 16-bit ops, the float32 row's ratio is the 16-bit speed-up); GB/s is the op's least traffic over its time, in
the op's element size, read against the device's copy bandwidth measured first; the peak column is GPU memory.
Without a GPU it runs on CPU tensors through Triton's interpreter (``TRITON_INTERPRET=1``; tiny
``--scale`` only, for tests).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import asdict
from functools import partial

import torch

from .. import ops
from ..backends.gpu import aot
from ..datasets import rand100k, reddit_sized, uniform
from ..graph import Graph
from ..graph.interop import import_dgl
from ..graph.reorder import METHODS
from ..templates.kernel import default_target
from ..timing import best_ms
from ..tuning import synthetic_inputs, tune
from ..tuning.space import hub_threshold_candidate
from . import tc_fill
from .kernels import (
    HALF_OPS,
    MLP_INPUT_WIDTH,
    TABLE,
    ForwardBackward,
    Row,
    _optional,
    gather_bytes,
    half_impls,
    op_kernel,
    supported,
)
from .measure import copy_gbps, peak_extra_mb
from .report import Table, add_table_arguments, machine, table_rows, write_json

MATERIALISE_LIMIT_BYTES = 16 * 1024**3
GRAPHS: dict[str, Callable[[float], Graph]] = {
    "uniform": lambda scale: uniform(max(2, int(100_000 * scale)), 100, seed=0),
    "rand100k": lambda scale: rand100k(scale, 1.0 if scale >= 0.1 else 0.01, seed=0),  # 100k / 48M at scale 1
    "reddit-sized": reddit_sized,  # 233k / 115M
    # graphs with communities to find (tensor cores' fill), as TC-GNN measured on
    **{name: tc_fill.GRAPHS[name] for name in ("pubmed-like", "reddit-community", "products-like")},
}
OPS = ("gcn", "mlp", "attention", "gcn-train", "gat-train", *HALF_OPS)
TUNABLE = ("gcn", "mlp", "attention")  # single kernels, which the tuner searches

Impls = dict[str, Callable[[], object] | str]


def on_device(g: Graph, device: torch.device) -> Graph:
    src, dst = g.coo()
    return Graph(src.to(device), dst.to(device), g.num_nodes)


def _fits(g: Graph, width: int) -> bool:
    return g.num_edges * width * 4 <= MATERIALISE_LIMIT_BYTES


def bench_gcn(g: Graph, d: int) -> Impls:
    n, (src, dst), dev = g.num_nodes, g.coo(), g.device
    x = torch.randn(n, d, device=dev)
    kernel, adj = op_kernel("gcn", g, d, 1), g.adjacency()
    threshold = hub_threshold_candidate(kernel)
    hybrid = op_kernel("gcn", g, d, 1, hub_threshold=threshold) if threshold else None
    impls: Impls = {
        "featgraph": lambda: kernel(XV=x),
        "featgraph hybrid (hubs staged)": (lambda: hybrid(XV=x)) if hybrid else "skipped: no hub vertices",
        "featgraph tensor cores (TF32)": lambda: ops.tc_spmm(g, x),
        "featgraph tensor cores 8x1 (TF32)": lambda: ops.tc_spmm(g, x, tile_rows=8),
        "torch.sparse.mm (cuSPARSE CSR)": lambda: torch.sparse.mm(adj, x),
    }
    ok = _fits(g, d)
    impls["gather+index_add_ (PyG-style)"] = (
        (lambda: torch.zeros(n, d, device=dev).index_add_(0, dst, x[src])) if ok else "skipped: E x d too large"
    )
    dgl = import_dgl()
    if dgl is not None:
        dg = dgl.graph((src, dst), num_nodes=n)
        impls["DGL gspmm"] = lambda: dgl.ops.copy_u_sum(dg, x)
    return impls


def bench_mlp(g: Graph, d: int) -> Impls:
    n, (src, dst), dev = g.num_nodes, g.coo(), g.device
    x, w = torch.randn(n, MLP_INPUT_WIDTH, device=dev), torch.randn(MLP_INPUT_WIDTH, d, device=dev)
    kernel = op_kernel("mlp", g, d, 1)

    def materialised() -> torch.Tensor:
        messages = torch.relu((x[src] + x[dst]) @ w)
        return torch.zeros(n, d, device=dev).scatter_reduce_(0, dst.unsqueeze(1).expand_as(messages), messages, "amax")

    return {
        "featgraph": lambda: kernel(XV=x, W=w),
        "materialised (PyG-style)": materialised if _fits(g, d) else "skipped: E x d too large",
    }


def bench_attention(g: Graph, d: int) -> Impls:
    n, (src, dst), dev = g.num_nodes, g.coo(), g.device
    x = torch.randn(n, d, device=dev)
    kernel, pattern = op_kernel("attention", g, d, 1), g.adjacency()
    return {
        "featgraph": lambda: kernel(XV=x),
        "featgraph tensor cores (TF32)": lambda: ops.tc_sddmm(g, x, x),
        "featgraph tensor cores 8x1 (TF32)": lambda: ops.tc_sddmm(g, x, x, tile_rows=8),
        "torch.sparse.sampled_addmm": lambda: torch.sparse.sampled_addmm(pattern, x, x.t(), beta=0.0),
        "gather + sum (PyG-style)": (
            (lambda: (x[src] * x[dst]).sum(1, keepdim=True)) if _fits(g, 2 * d) else "skipped: E x d too large"
        ),
    }


def bench_gcn_train(g: Graph, d: int) -> Impls:
    x = torch.randn(g.num_nodes, d, device=g.device, requires_grad=True)
    adj = g.adjacency()
    return {
        "featgraph": ForwardBackward(lambda: ops.gcn_aggregate(g, x, add_self_loops=False, normalize=False), [x]),
        "torch.sparse.mm (cuSPARSE CSR)": ForwardBackward(lambda: torch.sparse.mm(adj, x), [x]),
    }


def bench_gat_train(g: Graph, d: int, heads: int = 4) -> Impls:
    from ..nn import GATConv  # featgraph.nn is built on PyG's classes: PyG stays optional to the other rows

    x = torch.randn(g.num_nodes, d, device=g.device)
    ours = GATConv(d, d // heads, heads=heads, add_self_loops=False).to(g.device)
    impls: Impls = {"featgraph": ForwardBackward(lambda: ours(x, g), list(ours.parameters()))}
    if _optional("torch_geometric.nn") is None:
        impls["PyG GATConv"] = "skipped: torch_geometric not installed"
        return impls
    from torch_geometric.nn import GATConv as PygGAT

    theirs = PygGAT(d, d // heads, heads=heads, add_self_loops=False).to(g.device)
    edge_index = torch.stack(g.coo())
    impls["PyG GATConv"] = ForwardBackward(lambda: theirs(x, edge_index), list(theirs.parameters()))
    return impls


def bench_half(op: str, dtype: str, g: Graph, d: int) -> Impls:
    """``op`` (gcn or attention) on ``dtype`` features: featgraph's 16-bit and float32 kernels and DGL (see
    ``half_impls``), and cuSPARSE in the same dtype where torch.sparse takes it."""
    x = torch.randn(g.num_nodes, d, device=g.device).to(getattr(torch, dtype))
    impls, pattern = half_impls(op, g, x, 1), g.adjacency().to(x.dtype)
    if op == "gcn":
        impls[f"torch.sparse.mm (cuSPARSE CSR, {dtype})"] = supported(lambda: torch.sparse.mm(pattern, x))
    else:
        sddmm = lambda: torch.sparse.sampled_addmm(pattern, x, x.t(), beta=0.0)  # noqa: E731
        impls[f"torch.sparse.sampled_addmm ({dtype})"] = supported(sddmm)
    return impls


BENCHES = {
    "gcn": bench_gcn,
    "mlp": bench_mlp,
    "attention": bench_attention,
    "gcn-train": bench_gcn_train,
    "gat-train": bench_gat_train,
    **{name: partial(bench_half, op, dtype) for name, (op, dtype) in HALF_OPS.items()},
}


def tuned_impl(g: Graph, op: str, d: int, budget_s: float) -> tuple[str, Callable[[], object]]:
    """The row of featgraph's kernel for ``op`` as the tuner configures it within ``budget_s`` seconds of search
    on this device: its name (with the configuration chosen) and its call."""
    tuned = tune(op_kernel(op, g, d, 1), budget_s=budget_s)
    inputs = synthetic_inputs(tuned)
    return f"featgraph tuned ({tuned.tuning.config.describe() or 'the default'})", lambda: tuned.evaluate(
        inputs, want_arg=False
    )


def run_rows(
    graph_name: str, g: Graph, op: str, d: int, repeat: int, tune_s: float = 0.0, orders: tuple[str, ...] = ()
) -> list[Row]:
    """Every implementation of ``op`` at width ``d`` on ``g``, then again on ``g`` renumbered in each of
    ``orders`` (``Graph.reordered``: built once and kept with the graph, so not timed; a model's features are
    permuted once into that order), each row's ratio against featgraph's first row."""
    rows = []
    impls = BENCHES[op](g, d)
    if tune_s > 0:
        impls.update([tuned_impl(g, op, d, tune_s)])
    for order in orders:
        impls.update((f"{name}, {order} order", fn) for name, fn in BENCHES[op](g.reordered(order)[0], d).items())
    for name, fn in impls.items():
        if isinstance(fn, str):
            rows.append(Row(op, graph_name, d, name, None, note=fn))
            continue
        try:
            ms = best_ms(fn, repeat)
            gbps = gather_bytes(op, g, d) / ms / 1e6
            rows.append(Row(op, graph_name, d, name, ms, gbps=gbps, peak_mb=peak_extra_mb(fn, g.device)))
        except torch.OutOfMemoryError:
            torch.cuda.empty_cache()
            rows.append(Row(op, graph_name, d, name, None, note="out of GPU memory"))
    ours = rows[0].ms
    for row in rows:
        row.ratio = None if row.ms is None or not ours else row.ms / ours
    return rows


COMPILE_TABLE = Table({
    "op": "op", "graph": "graph", "d": "d", "implementation": "impl", "kernel": "kernel", "registers": "registers",
    "spill bytes": "spills", "shared bytes": "shared_bytes",
})  # fmt: skip


def compile_rows(graph_name: str, g: Graph, op: str, d: int, arch: int) -> list[dict]:
    """Every Triton launch of the featgraph rows compiled for sm_``arch`` (no GPU needed): registers per
    thread, spilled bytes and shared memory, the static side of the GPU table."""
    rows = []
    for name, fn in BENCHES[op](g, d).items():
        if isinstance(fn, str) or not name.startswith("featgraph") or ("tensor cores" in name and arch < 80):
            continue
        with aot.compiling(arch) as launches:  # nothing runs: kernels are built, their launches recorded
            fn()
        rows += [{"op": op, "graph": graph_name, "d": d, "impl": name, **asdict(launch)} for launch in launches]
    return rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_table_arguments(parser, GRAPHS, OPS, [32, 64, 128, 256, 512], repeat=10, threads=False)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--orders", nargs="+", default=[], choices=list(METHODS),
        help="every row again on the graph renumbered in these locality orders (Graph.reordered)",
    )  # fmt: skip
    parser.add_argument(
        "--tune", type=float, default=0.0, metavar="SECONDS",
        help=f"add a row of the tuner's configuration, searched for at most SECONDS per row ({', '.join(TUNABLE)})",
    )  # fmt: skip
    parser.add_argument(
        "--compile-only",
        type=int,
        metavar="ARCH",
        help="no timing: compile every featgraph launch for sm_ARCH (e.g. 90) and report registers, spills, "
        "shared memory (needs no GPU; on CPU use a small --scale under TRITON_INTERPRET=1)",
    )


def run(args: argparse.Namespace) -> list[Row] | list[dict]:
    untunable = [op for op in args.ops if op not in TUNABLE]
    if args.tune > 0 and untunable:
        raise SystemExit(f"--tune: the tuner configures {', '.join(TUNABLE)}, not {', '.join(untunable)}")
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU (Triton interpreter)"
    print(f"machine: {machine()}; device: {name}")
    with default_target("gpu"):  # featgraph's rows take the Triton kernels, on CPU tensors too (interpreter)
        return _compile_only(args, device) if args.compile_only else _timed(args, device, name)


def _builders(device: torch.device) -> dict[str, Callable[[float], Graph]]:
    return {k: (lambda scale, build=v: on_device(build(scale), device)) for k, v in GRAPHS.items()}


def _timed(args: argparse.Namespace, device: torch.device, name: str) -> list[Row]:
    bandwidth = copy_gbps(device, 1024 if device.type == "cuda" else 16)
    print(f"device copy bandwidth: {bandwidth:.0f} GB/s (read + write; the GB/s column's bound)", flush=True)
    measure = lambda name, g, op, d: run_rows(name, g, op, d, args.repeat, args.tune, tuple(args.orders))  # noqa: E731
    rows = table_rows(args, _builders(device), TABLE, measure)
    write_json(args.json, [asdict(r) for r in rows], device=name, copy_gbps=bandwidth)
    return rows


def _compile_only(args: argparse.Namespace, device: torch.device) -> list[dict]:
    measure = partial(compile_rows, arch=args.compile_only)
    compiled = table_rows(args, _builders(device), COMPILE_TABLE, measure)
    write_json(args.json, compiled, arch=args.compile_only)
    return compiled
