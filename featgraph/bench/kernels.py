"""Kernel benchmark in the style of the FeatGraph paper's tables: featgraph against what users run today.

Ops: GCN aggregation (copy_u + sum), max aggregation with argmax, fused MLP aggregation (d1 = 8, max),
dot-product attention (SDDMM); the GCN aggregation and attention on bfloat16 and float16 features
(``gcn-bf16`` ...: featgraph's 16-bit kernel against its own float32 kernel on the same values).
Baselines in the same run: torch.sparse (CSR, MKL), scipy, the PyG-style gather + scatter path, PyG's own
``scatter`` and DGL's ``gspmm``/``gsddmm`` where those are installed.
``ratio`` is baseline time over featgraph time (above 1: featgraph is faster).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from .. import ops, te
from ..datasets import rand100k, uniform
from ..graph import Graph
from ..graph.interop import import_dgl
from ..templates.kernel import TORCH_DTYPES, Kernel
from ..templates.params import EDGE_ORDERS, staging_buckets
from ..timing import best_ms, interleaved_best_ms
from ..tuning import sddmm, spmm
from .measure import peak_extra_mb
from .report import Table, add_table_arguments, each_graph, machine, write_json

MATERIALISE_LIMIT_BYTES = 3 * 1024**3  # skip baselines that would build per-edge tensors larger than this
GRAPHS: dict[str, Callable[[float], Graph]] = {
    "uniform": lambda scale: uniform(max(2, int(50_000 * scale)), 30, seed=0),
    "rand100k": lambda scale: rand100k(0.5 * scale, 0.1, seed=0),
}
HALF_OPS = {
    f"{op}-{short}": (op, dtype)
    for op in ("gcn", "attention")
    for short, dtype in (("bf16", "bfloat16"), ("fp16", "float16"))
}
OPS = ("gcn", "max", "mlp", "attention", "gcn-train", "gat-train", "mlp-train", *HALF_OPS)


@dataclass
class Row:
    op: str
    graph: str
    d: int
    impl: str
    ms: float | None
    ratio: float | None = None  # impl ms / featgraph ms
    gbps: float | None = None  # effective bandwidth of the gather traffic
    peak_mb: float | None = None
    note: str = ""


def _optional(module: str):
    try:
        return importlib.import_module(module)
    except Exception:  # noqa: BLE001 - any import failure means "not available"
        return None


def _scipy_csr(g: Graph) -> sp.csr_matrix:
    indptr, indices, _ = g.csr()
    return sp.csr_matrix((np.ones(g.num_edges, np.float32), indices.numpy(), indptr.numpy()), (g.num_nodes,) * 2)


def _too_big(g: Graph, width: int) -> bool:
    return g.num_edges * width * 4 > MATERIALISE_LIMIT_BYTES


def _unless_too_big(g: Graph, width: int, fn: Callable[[], object]) -> Callable[[], object] | str:
    """``fn``, or why it is skipped where it would build per-edge tensors of ``width`` floats beyond the limit."""
    return "skipped: would materialise E x d" if _too_big(g, width) else fn


def _scatter_argmax(messages: torch.Tensor, dst: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """torch's best path that also yields the argmax: scatter_reduce(amax), then the winning edge ids."""
    index = dst.unsqueeze(1).expand_as(messages)
    out = torch.full((n, messages.shape[1]), float("-inf")).scatter_reduce(0, index, messages, "amax")
    edge_ids = torch.arange(messages.shape[0]).unsqueeze(1).expand_as(messages)
    winners = torch.where(messages == out[dst], edge_ids, -1)
    arg = torch.full((n, messages.shape[1]), -1).scatter_reduce(0, index, winners, "amax")
    return out.masked_fill(arg < 0, 0), arg


MLP_INPUT_WIDTH = 8  # d1 of the paper's MLP aggregation
ATTENTION_HEADS = 4  # the ``heads`` op's, as in GAT's first layer


def op_kernel(op: str, g: Graph, d: int, threads: int, dtype: str = "float32", **options: Any) -> Kernel:
    """The featgraph kernel of a benchmark op (``gcn``: copy_u + sum, ``max``: copy_u + max, ``mlp``: the
    fused MLP aggregation with max, ``attention``: dot-product SDDMM) on features of ``dtype`` (gcn, max,
    attention); ``options`` go to ``spmm``/``sddmm`` (template parameters, ``tune``)."""
    n = g.num_nodes
    if op in ("gcn", "max"):
        XV = te.placeholder((n, d), dtype=dtype, name="XV")
        reducer = "sum" if op == "gcn" else "max"
        return spmm(g, lambda s, t, e: te.compute((d,), lambda i: XV[s, i]), reducer, num_threads=threads, **options)
    if op == "mlp":
        d1 = MLP_INPUT_WIDTH
        XV, W = te.placeholder((n, d1), name="XV"), te.placeholder((d1, d), name="W")

        def msgfunc(s, t, e):
            k = te.reduce_axis((0, d1), name="k")
            return te.compute((d,), lambda i: te.max(te.sum((XV[s, k] + XV[t, k]) * W[k, i], axis=k), 0))

        return spmm(g, msgfunc, "max", num_threads=threads, **options)
    if op == "attention":
        XV = te.placeholder((n, d), dtype=dtype, name="XV")

        def edgefunc(s, t, e):
            k = te.reduce_axis((0, d), name="k")
            return te.compute((1,), lambda i: te.sum(XV[s, k] * XV[t, k], axis=k))

        return sddmm(g, edgefunc, num_threads=threads, **options)
    if op == "heads":  # GAT's attention-gradient dot products: ATTENTION_HEADS heads of d / ATTENTION_HEADS
        width = max(1, d // ATTENTION_HEADS)
        XV = te.placeholder((n, ATTENTION_HEADS, width), dtype=dtype, name="XV")

        def head_dots(s, t, e):
            k = te.reduce_axis((0, width), name="k")
            return te.compute((ATTENTION_HEADS,), lambda h: te.sum(XV[s, h, k] * XV[t, h, k], axis=k))

        return sddmm(g, head_dots, num_threads=threads, **options)
    if op == "edge-add":  # GAT's attention logits, el[u] + er[v], with d heads
        XV = te.placeholder((n, d), dtype=dtype, name="XV")
        return sddmm(g, lambda s, t, e: te.compute((d,), lambda i: XV[s, i] + XV[t, i]), num_threads=threads, **options)
    raise ValueError(f"no kernel for op {op!r}")


def bench_gcn(g: Graph, d: int, threads: int) -> dict[str, Callable[[], object] | str]:
    n, (src, dst) = g.num_nodes, g.coo()
    x = torch.randn(n, d)
    kernel = op_kernel("gcn", g, d, threads)
    adj, adj_sp = g.adjacency(), _scipy_csr(g)
    x_np = x.numpy()
    impls: dict[str, Callable[[], object] | str] = {
        "featgraph": lambda: kernel(XV=x),
        "torch.sparse.mm (CSR)": lambda: torch.sparse.mm(adj, x),
        "scipy (1 thread)": lambda: adj_sp @ x_np,
    }
    if _too_big(g, d):
        impls["gather+index_add_ (PyG-style)"] = "skipped: would materialise E x d"
    else:
        impls["gather+index_add_ (PyG-style)"] = lambda: torch.zeros(n, d).index_add_(0, dst, x[src])
        pyg_utils = _optional("torch_geometric.utils")
        if pyg_utils is not None:
            from torch_geometric.utils import scatter

            impls["PyG scatter"] = lambda: scatter(x[src], dst, 0, dim_size=n, reduce="sum")
    dgl = import_dgl()
    if dgl is not None:
        dg = dgl.graph((src, dst), num_nodes=n)
        impls["DGL gspmm"] = lambda: dgl.ops.copy_u_sum(dg, x)
    return impls


def bench_max(g: Graph, d: int, threads: int) -> dict[str, Callable[[], object] | str]:
    n, (src, dst) = g.num_nodes, g.coo()
    x = torch.randn(n, d)
    kernel = op_kernel("max", g, d, threads)
    impls: dict[str, Callable[[], object] | str] = {"featgraph": lambda: kernel.run(return_arg=True, XV=x)}
    impls["scatter_reduce + argmax (torch)"] = _unless_too_big(g, 3 * d, lambda: _scatter_argmax(x[src], dst, n))
    dgl = import_dgl()
    if dgl is not None:
        dg = dgl.graph((src, dst), num_nodes=n)
        impls["DGL copy_u_max (argmax kept inside)"] = lambda: dgl.ops.copy_u_max(dg, x)
    return impls


def _mlp_pair(g: Graph, d: int, threads: int, x: torch.Tensor, w: torch.Tensor):
    """The fused MLP aggregation kernel and the materialised torch version of the same function."""
    n, (src, dst) = g.num_nodes, g.coo()
    kernel = op_kernel("mlp", g, d, threads)

    def materialised() -> torch.Tensor:
        messages = torch.relu((x[src] + x[dst]) @ w)
        index = dst.unsqueeze(1).expand_as(messages)
        return torch.zeros(n, d).scatter_reduce(0, index, messages, "amax", include_self=False)

    return (lambda: kernel(XV=x, W=w)), materialised


def bench_mlp(g: Graph, d: int, threads: int) -> dict[str, Callable[[], object] | str]:
    d1 = MLP_INPUT_WIDTH
    ours, materialised = _mlp_pair(g, d, threads, torch.randn(g.num_nodes, d1), torch.randn(d1, d))
    return {"featgraph": ours, "materialised torch": _unless_too_big(g, 2 * d, materialised)}


def bench_attention(g: Graph, d: int, threads: int) -> dict[str, Callable[[], object] | str]:
    n, (src, dst) = g.num_nodes, g.coo()
    x = torch.randn(n, d)
    kernel = op_kernel("attention", g, d, threads)
    pattern = g.adjacency()
    impls: dict[str, Callable[[], object] | str] = {
        "featgraph": lambda: kernel(XV=x),
        "torch.sparse.sampled_addmm": lambda: torch.sparse.sampled_addmm(pattern, x, x.t(), beta=0.0),
    }
    impls["gather + sum (PyG-style)"] = _unless_too_big(g, 2 * d, lambda: (x[src] * x[dst]).sum(1, keepdim=True))
    dgl = import_dgl()
    if dgl is not None:
        dg = dgl.graph((src, dst), num_nodes=n)
        impls["DGL gsddmm"] = lambda: dgl.ops.u_dot_v(dg, x, x)
    return impls


def supported(call: Callable[[], object]) -> Callable[[], object] | str:
    """``call``, or why not where a first call raises: a library refusing a dtype on this device is a note in
    the table, not a failed run."""
    try:
        call()
    except Exception as error:  # noqa: BLE001 - each library raises its own type for a dtype it does not take
        return f"unsupported: {str(error).splitlines()[0].split(': ', 1)[-1]}"
    return call


def half_impls(op: str, g: Graph, x: torch.Tensor, threads: int) -> dict[str, Callable[[], object] | str]:
    """``op`` (gcn or attention) on the 16-bit features ``x``: featgraph's kernel in their dtype, its float32
    kernel on the same values, and DGL's op where it takes the dtype (DGL 2.1's CPU kernels refuse float16)."""
    dtype = str(x.dtype).removeprefix("torch.")
    wide = x.float()
    half, full = op_kernel(op, g, x.shape[1], threads, dtype), op_kernel(op, g, x.shape[1], threads)
    impls: dict[str, Callable[[], object] | str] = {
        "featgraph": lambda: half(XV=x),
        "featgraph float32": lambda: full(XV=wide),
    }
    dgl = import_dgl()
    if dgl is not None:
        dg = dgl.graph(g.coo(), num_nodes=g.num_nodes)
        impls[f"DGL ({dtype})"] = supported(
            (lambda: dgl.ops.copy_u_sum(dg, x)) if op == "gcn" else (lambda: dgl.ops.u_dot_v(dg, x, x))
        )
    return impls


def bench_half(op: str, dtype: str, g: Graph, d: int, threads: int) -> dict[str, Callable[[], object] | str]:
    """``op`` (gcn or attention) on random ``dtype`` features on ``g``'s device (see ``half_impls``)."""
    return half_impls(op, g, torch.randn(g.num_nodes, d, device=g.device).to(getattr(torch, dtype)), threads)


@dataclass
class ForwardBackward:
    """One training step of an op: forward, ``sum().backward()``, gradients left on ``leaves``."""

    forward: Callable[[], torch.Tensor]
    leaves: list[torch.Tensor]

    def __call__(self) -> None:
        for leaf in self.leaves:
            leaf.grad = None
        self.forward().sum().backward()


def bench_gcn_train(g: Graph, d: int, threads: int) -> dict[str, Callable[[], object] | str]:
    """Forward + backward of GCN's normalised aggregation (self loops included)."""
    n = g.num_nodes
    x = torch.randn(n, d, requires_grad=True)
    impls: dict[str, Callable[[], object] | str] = {"featgraph": ForwardBackward(lambda: ops.gcn_aggregate(g, x), [x])}
    full_src, full_dst = g.with_self_loops().coo()  # PyG's add_remaining_self_loops: one loop per vertex
    degree = torch.bincount(full_dst, minlength=n).float()
    norm = (degree[full_src] * degree[full_dst]).rsqrt().unsqueeze(1)
    gathered = ForwardBackward(lambda: torch.zeros(n, d).index_add(0, full_dst, x[full_src] * norm), [x])
    impls["gather+index_add_ (PyG-style)"] = _unless_too_big(g, 2 * d, gathered)
    indptr_graph = Graph(full_src, full_dst, n)
    adj = indptr_graph.adjacency(norm.squeeze(1))
    impls["torch.sparse.mm (CSR)"] = ForwardBackward(lambda: torch.sparse.mm(adj, x), [x])
    dgl = import_dgl()
    if dgl is not None:  # DGL's GraphConv path: self loops as edges, norm as two vertex scalings
        dg = dgl.graph((full_src, full_dst), num_nodes=n)
        scale = degree.rsqrt().unsqueeze(1)
        impls["DGL copy_u_sum"] = ForwardBackward(lambda: dgl.ops.copy_u_sum(dg, x * scale) * scale, [x])
    return impls


def bench_gat_train(g: Graph, d: int, threads: int, heads: int = 4) -> dict[str, Callable[[], object] | str]:
    """Forward + backward of GAT attention (scores, edge softmax, weighted aggregation), 4 heads of d/4."""
    n, (src, dst) = g.num_nodes, g.coo()
    width = max(1, d // heads)
    feat = torch.randn(n, heads, width, requires_grad=True)
    a_src, a_dst = torch.randn(heads, width, requires_grad=True), torch.randn(heads, width, requires_grad=True)
    leaves = [feat, a_src, a_dst]
    impls: dict[str, Callable[[], object] | str] = {
        "featgraph": ForwardBackward(lambda: ops.gat_attention(g, feat, a_src, a_dst), leaves)
    }

    def materialised() -> torch.Tensor:
        scores = torch.nn.functional.leaky_relu((feat * a_src).sum(-1)[src] + (feat * a_dst).sum(-1)[dst], 0.2)
        peak = torch.full((n, heads), float("-inf")).scatter_reduce(
            0, dst.unsqueeze(1).expand_as(scores), scores, "amax"
        )
        weights = (scores - peak[dst]).exp()
        total = torch.zeros(n, heads).index_add(0, dst, weights)
        alpha = weights / total[dst]
        return torch.zeros(n, heads, width).index_add(0, dst, alpha.unsqueeze(-1) * feat[src])

    impls["gather+scatter (PyG-style)"] = _unless_too_big(g, 3 * d, ForwardBackward(materialised, leaves))
    dgl = import_dgl()
    if dgl is not None:  # DGL's GATConv path through dgl.ops
        dg = dgl.graph((src, dst), num_nodes=n)

        def dgl_gat() -> torch.Tensor:
            logits = dgl.ops.u_add_v(dg, (feat * a_src).sum(-1), (feat * a_dst).sum(-1))
            alpha = dgl.ops.edge_softmax(dg, torch.nn.functional.leaky_relu(logits, 0.2))
            return dgl.ops.u_mul_e_sum(dg, feat, alpha.unsqueeze(-1))

        impls["DGL ops"] = ForwardBackward(dgl_gat, leaves)
    return impls


def bench_mlp_train(g: Graph, d: int, threads: int) -> dict[str, Callable[[], object] | str]:
    """Forward + backward of the fused MLP aggregation (max), gradients for x and W from the UDF."""
    d1 = MLP_INPUT_WIDTH
    x, w = torch.randn(g.num_nodes, d1, requires_grad=True), torch.randn(d1, d, requires_grad=True)
    ours, materialised = _mlp_pair(g, d, threads, x, w)
    return {
        "featgraph": ForwardBackward(ours, [x, w]),
        "materialised torch": _unless_too_big(g, 3 * d, ForwardBackward(materialised, [x, w])),
    }


BENCHES = {
    "gcn": bench_gcn,
    "max": bench_max,
    "mlp": bench_mlp,
    "attention": bench_attention,
    "gcn-train": bench_gcn_train,
    "gat-train": bench_gat_train,
    "mlp-train": bench_mlp_train,
    **{name: partial(bench_half, op, dtype) for name, (op, dtype) in HALF_OPS.items()},
}
TRAINING_OPS = ("gcn-train", "gat-train", "mlp-train")


def gather_bytes(op: str, g: Graph, d: int) -> int:
    """Bytes the op must at least move if nothing is reused: one feature row read per edge endpoint it
    touches, plus indices and the output."""
    base, dtype = HALF_OPS.get(op, (op, "float32"))
    size = TORCH_DTYPES[dtype].itemsize
    row_reads = {"gcn": d, "max": d, "mlp": 2 * 8, "attention": 2 * d}
    row_reads.update({"gcn-train": 2 * d, "gat-train": 2 * d, "mlp-train": 4 * 8})
    per_edge = row_reads[base] * size + 8
    out = g.num_edges * size if base == "attention" else g.num_nodes * d * size
    return g.num_edges * per_edge + out


def run_rows(graph_name: str, g: Graph, op: str, d: int, threads: int, repeat: int) -> list[Row]:
    impls = BENCHES[op](g, d, threads)
    times = interleaved_best_ms({name: fn for name, fn in impls.items() if not isinstance(fn, str)}, repeat)
    rows = []
    for name, fn in impls.items():
        if isinstance(fn, str):
            rows.append(Row(op, graph_name, d, name, None, note=fn))
            continue
        ms = times[name]
        peak = peak_extra_mb(fn) if op in ("mlp", *TRAINING_OPS) else None
        rows.append(Row(op, graph_name, d, name, ms, gbps=gather_bytes(op, g, d) / ms / 1e6, peak_mb=peak))
    ours = rows[0].ms
    for row in rows:
        row.ratio = None if row.ms is None or not ours else row.ms / ours
    return rows


def ablation_rows(graph_name: str, g: Graph, d: int, threads: int, repeat: int, parts: int, tiles: int) -> list[Row]:
    """The paper's Figure 11 for GCN aggregation (graph partitioning alone, feature tiling alone, both,
    versus neither), the SDDMM edge orders (Hilbert, user, CSR) for dot-product attention (one score an edge
    and GAT's ``ATTENTION_HEADS``) and for a
    ``u_add_v`` (GAT's attention logits; ``params.cpu_edge_order`` picks between the orders), and the dot
    product's Hilbert visit's writes staged in buckets against direct, for one score an edge and for GAT's
    ``ATTENTION_HEADS`` (``params.default_write_buckets`` stages the first only). ``ratio`` here is the
    speedup over the first variant."""
    gcn = {"neither": (1, 1), f"partition x{parts}": (parts, 1), f"tiling x{tiles}": (1, tiles)}
    gcn[f"both ({parts} x {tiles})"] = (parts, tiles)
    kernels = {
        name: op_kernel("gcn", g, d, threads, num_partitions=p, num_feature_tiles=t) for name, (p, t) in gcn.items()
    }
    orders, head_orders, add_orders = (
        {order_label(kernel): kernel for kernel in order_kernels(op, g, d, threads)}
        for op in ("attention", "heads", "edge-add")
    )
    writes, head_writes = (
        {
            "staged writes": op_kernel(op, g, d, threads, write_buckets=staging_buckets(g.num_edges * 4 * scores)),
            "direct writes (write_buckets=0)": op_kernel(op, g, d, threads, write_buckets=0),
        }
        for op, scores in (("attention", 1), ("heads", ATTENTION_HEADS))
    )
    strategies = {
        f"{name} ({strategy})": op_kernel("gcn", g, d, threads, strategy=strategy)
        for name, strategy in (("vertex-centric", "gar"), ("edge-centric", "gas"))
    }
    rows = [Row("csr-build", graph_name, d, "CSR from COO (once per graph)", _csr_build_ms(g, repeat))]
    x = torch.randn(g.num_nodes, d)
    by_head = torch.randn(g.num_nodes, ATTENTION_HEADS, max(1, d // ATTENTION_HEADS))
    groups = (
        ("gcn-ablation", kernels, x), ("attention-order", orders, x), ("heads-order", head_orders, by_head),
        ("attention-writes", writes, x), ("heads-writes", head_writes, by_head), ("edge-add-order", add_orders, x),
        ("gcn-strategy", strategies, x),
    )  # fmt: skip
    for op, group, inputs in groups:  # a group's variants take turns, so a slow spell hits them alike
        times = interleaved_best_ms({name: partial(kernel, XV=inputs) for name, kernel in group.items()}, repeat)
        first = len(rows)
        rows += [Row(op, graph_name, d, name, ms) for name, ms in times.items()]
        for row in rows[first:]:
            row.ratio = rows[first].ms / row.ms
    return rows


def order_kernels(op: str, g: Graph, d: int, threads: int) -> list[Kernel]:
    """``op``'s kernel in each edge order: the CSR walked in its default source segments, and in one."""
    kernels = [op_kernel(op, g, d, threads, edge_order=order) for order in EDGE_ORDERS]
    if kernels[-1].spec.params.num_partitions > 1:
        kernels.append(op_kernel(op, g, d, threads, edge_order="csr", num_partitions=1))
    return kernels


def order_label(kernel: Kernel) -> str:
    """``edge order hilbert``, ``edge order csr, 4 segments`` and so on."""
    params = kernel.spec.params
    segments = params.num_partitions
    walk = f", {segments} segment{'s' if segments > 1 else ''}" if params.edge_order == "csr" else ""
    return f"edge order {params.edge_order}{walk}"


def _csr_build_ms(g: Graph, repeat: int) -> float:
    src, dst = g.coo()
    return best_ms(lambda: Graph(src, dst, g.num_nodes).csr(), repeat)


TABLE = Table({
    "op": "op", "graph": "graph", "d": "d", "implementation": "impl", "ms": "ms:.2f", "time / featgraph": "ratio:.2f",
    "GB/s": "gbps:.1f", "peak extra MB": "peak_mb:.0f", "note": "note",
})  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_table_arguments(parser, GRAPHS, OPS, [32, 64, 128, 256, 512], repeat=5)
    parser.add_argument("--ablation", action="store_true", help="also run the partition/tiling ablation")
    parser.add_argument(
        "--ablation-dims", type=int, nargs="+", default=[32, 128, 512], help="feature widths of the ablation rows"
    )


def run(args: argparse.Namespace) -> list[Row]:
    torch.set_num_threads(args.threads)
    print(f"machine: {machine()}; featgraph threads: {args.threads}")
    rows: list[Row] = []
    for graph_name, g in each_graph(args.graphs, GRAPHS, args.scale, TABLE.header):
        jobs = [
            partial(run_rows, graph_name, g, op, d, args.threads, args.repeat) for op in args.ops for d in args.dims
        ]
        if args.ablation:
            ablate = partial(ablation_rows, graph_name, g, threads=args.threads, repeat=args.repeat, parts=2, tiles=2)
            jobs += [partial(ablate, d=d) for d in args.ablation_dims]
        for job in jobs:
            batch = job()
            print(TABLE.rows(batch), flush=True)  # each batch as soon as it is measured
            rows += batch
    write_json(args.json, [asdict(r) for r in rows], threads=args.threads)
    return rows
