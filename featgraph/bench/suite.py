"""``featgraph bench all``: the FeatGraph paper's evaluation, reproduced on this machine in one run.

Sections (the paper's numbering): Table III, kernels on one thread against torch.sparse (MKL), scipy,
PyG-style paths and DGL; Figure 10, thread scaling (1 and 2 threads here); the roofline, every SpMM/SDDMM
row placed between the perfect-reuse and no-reuse bounds at the measured triad bandwidth and against the
machine's random-row gather rate, with the gather-bound targets checked against that rate; Table V,
density; Figure 14, the partition x tile heat map; tuning, default against tuned; Table VI, end-to-end
training epochs against PyG and DGL. Writes ``report.md``, PNG figures and ``all.json`` to one folder.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from . import feasibility, kernels, plots, sensitivity, training, tuning
from .kernels import GRAPHS
from .report import Table, machine
from .roofline import gather_gbps, place, traffic, triad_gbps

KERNEL_OPS = ("gcn", "mlp", "attention")
THREADS = (1, 2)
NO_REUSE_TARGET_D = 128  # GCN at d >= this must beat the no-reuse bound
PERFECT_TARGET = 5.0  # ... and come within this factor of the perfect-reuse bound on the uniform graph


@dataclass
class RooflineRow:
    op: str
    graph: str
    d: int
    threads: int
    ms: float
    perfect_ms: float
    no_reuse_ms: float
    gather_ms: float
    x_perfect: float  # measured / perfect-reuse bound
    vs_no_reuse: float  # no-reuse bound / measured (above 1: beats it)
    x_gather: float  # measured / gather bound (near 1: rows read as fast as the machine gathers them)


def kernel_rows(args: argparse.Namespace, graphs: dict, threads: int) -> list[kernels.Row]:
    torch.set_num_threads(threads)
    rows: list[kernels.Row] = []
    for graph_name, g in graphs.items():
        for op in args.ops:
            for d in args.dims:
                batch = kernels.run_rows(graph_name, g, op, d, threads, args.repeat)
                print(kernels.TABLE.rows(batch), flush=True)
                rows += batch
    return rows


def roofline_rows(rows_by_threads: dict[int, list[kernels.Row]], graphs: dict) -> list[RooflineRow]:
    placed = []
    for threads, rows in rows_by_threads.items():
        bandwidth = triad_gbps(threads)
        for r in rows:
            if r.impl != "featgraph" or r.ms is None:
                continue
            bytes_moved = traffic(r.op, graphs[r.graph], r.d)
            rate = gather_gbps(threads, bytes_moved.array, bytes_moved.row)
            p = place(bytes_moved, r.ms, bandwidth, rate)
            placed.append(RooflineRow(r.op, r.graph, r.d, threads, r.ms, *asdict(p).values()))
    return placed


ROOFLINE_TABLE = Table({
    "op": "op", "graph": "graph", "d": "d", "threads": "threads", "featgraph ms": "ms:.2f",
    "perfect-reuse ms": "perfect_ms:.2f", "no-reuse ms": "no_reuse_ms:.2f", "gather bound ms": "gather_ms:.2f",
    "x perfect": "x_perfect:.1f", "no-reuse / ms": "vs_no_reuse:.2f", "x gather": "x_gather:.2f",
})  # fmt: skip
SCALING_TABLE = Table({
    "op": "op", "graph": "graph", "d": "d", "implementation": "impl", "1 thread ms": "one:.2f",
    "2 threads ms": "two:.2f", "speedup": "speedup:.2f",
})  # fmt: skip


def roofline_targets(rows: list[RooflineRow]) -> str:
    gcn = [r for r in rows if r.op == "gcn" and r.d >= NO_REUSE_TARGET_D]
    if not gcn:
        return f"roofline targets: no GCN row at d >= {NO_REUSE_TARGET_D} measured"
    beats = all(r.vs_no_reuse > 1 for r in gcn)
    uniform = [r for r in gcn if r.graph == "uniform"]
    worst = max(uniform, key=lambda r: r.x_perfect) if uniform else None
    within = worst is not None and worst.x_perfect <= PERFECT_TARGET
    slowest = min(gcn, key=lambda r: r.vs_no_reuse)
    return (
        f"GCN at d >= {NO_REUSE_TARGET_D} beats the no-reuse bound on every graph: {'met' if beats else 'NOT met'} "
        f"(closest {slowest.vs_no_reuse:.2f}x: {slowest.graph} d={slowest.d}, {slowest.threads} threads); "
        f"within {PERFECT_TARGET:.0f}x of the perfect-reuse bound on uniform: "
        + ("no uniform row" if worst is None else f"{'met' if within else 'NOT met'} (worst {worst.x_perfect:.1f}x"
           f" at d={worst.d}, {worst.threads} threads)")
    )  # fmt: skip


def scaling_markdown(rows_by_threads: dict[int, list[kernels.Row]]) -> tuple[str, dict]:
    """Figure 10: time at 1 thread over time at 2 threads, per implementation and row."""
    one = {(r.op, r.graph, r.d, r.impl): r.ms for r in rows_by_threads[1] if r.ms}
    two = {(r.op, r.graph, r.d, r.impl): r.ms for r in rows_by_threads[2] if r.ms}
    rows, series = [], {}
    for key in one:
        if key not in two:
            continue
        op, graph, d, impl = key
        speedup = one[key] / two[key]
        rows.append(
            {"op": op, "graph": graph, "d": d, "impl": impl, "one": one[key], "two": two[key], "speedup": speedup}
        )
        if op == "gcn":
            xs, ys = series.setdefault(f"{impl} ({graph})", ([], []))
            xs.append(d)
            ys.append(speedup)
    return SCALING_TABLE(rows), series


HEADLINE_D = 128


def draw_headline(rows: list[kernels.Row], folder: Path) -> Path | None:
    """The README's figure: each baseline's time over featgraph's (2 threads, d = 128), per op and graph."""
    groups: dict[str, dict[str, float]] = {}
    for r in rows:
        if r.d == HEADLINE_D and r.impl != "featgraph" and r.ratio:
            groups.setdefault(f"{r.op}\n{r.graph}", {})[r.impl] = r.ratio
    if not groups:
        return None
    return plots.bars(groups, folder / "headline.png", f"baseline time / featgraph time (d={HEADLINE_D}, 2 threads; "
                      "above 1: featgraph faster)", "time / featgraph")  # fmt: skip


def section(title: str, body: str) -> str:
    return f"\n## {title}\n\n{body}\n"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="results/all", help="folder for report.md, figures and all.json")
    parser.add_argument("--graphs", nargs="+", default=list(GRAPHS), choices=list(GRAPHS))
    parser.add_argument("--dims", nargs="+", type=int, default=[32, 128, 512])
    parser.add_argument("--ops", nargs="+", default=list(KERNEL_OPS), choices=list(KERNEL_OPS))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="shrink every graph's vertex count (tests)")
    parser.add_argument("--density-vertices", type=int, default=50_000)
    parser.add_argument("--degrees", nargs="+", type=int, default=list(sensitivity.DEGREES))
    parser.add_argument("--heatmap-dim", type=int, default=256)
    parser.add_argument("--tune-budget", type=float, default=30.0, help="search seconds per tuning row at most")
    parser.add_argument("--train-models", nargs="*", default=["gcn", "gat"], choices=list(training.MODELS))
    parser.add_argument("--train-graphs", nargs="+", default=["email-Enron"], choices=list(training.GRAPHS))
    parser.add_argument("--json", metavar="PATH", help="also write all.json here")


def run(args: argparse.Namespace) -> dict:
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    graphs = {name: GRAPHS[name](args.scale) for name in args.graphs}
    bandwidth = {t: triad_gbps(t) for t in THREADS}
    header = [
        "# featgraph benchmark suite",
        "",
        f"machine: {machine()}",
        "triad bandwidth: "
        + ", ".join(f"{t} thread{'s' if t > 1 else ''} {bw:.1f} GB/s" for t, bw in bandwidth.items()),
        "graphs: " + "; ".join(f"{n} {g.num_nodes} vertices / {g.num_edges} edges" for n, g in graphs.items()),
    ]
    print("\n".join(header), flush=True)
    report = ["\n".join(header)]
    figures: list[Path | None] = []

    rows_by_threads = {t: kernel_rows(args, graphs, t) for t in THREADS}
    table = kernels.TABLE(rows_by_threads[1])
    report.append(section("Table III: kernels, 1 thread (time / featgraph above 1: featgraph faster)", table))
    report.append(section("Kernels, 2 threads", kernels.TABLE(rows_by_threads[2])))
    figures.append(draw_headline(rows_by_threads[2], folder))
    scaling, series = scaling_markdown(rows_by_threads)
    report.append(section("Figure 10: thread scaling (speedup of 2 threads over 1)", scaling))
    figures.append(plots.lines(series, folder / "thread-scaling.png", "GCN aggregation: 2 threads over 1",
                               "feature length", "speedup", log_x=True))  # fmt: skip

    placed = roofline_rows(rows_by_threads, graphs)
    report.append(
        section("Roofline: featgraph between the bounds", ROOFLINE_TABLE(placed) + "\n\n" + roofline_targets(placed))
    )
    times = {(r.op, r.graph, r.d, t, r.impl): r.ms for t, rows in rows_by_threads.items() for r in rows if r.ms}
    checked = feasibility.rows_from(times, graphs)
    report.append(section("Gather-bound targets against this machine's gather rate", feasibility.TABLE(checked)))
    for graph_name in graphs:
        gcn = sorted(
            (r for r in placed if r.op == "gcn" and r.graph == graph_name and r.threads == 2), key=lambda r: r.d
        )
        if gcn:
            ds = [r.d for r in gcn]
            figures.append(plots.lines(
                {"featgraph": (ds, [r.ms for r in gcn]), "bound: perfect reuse": (ds, [r.perfect_ms for r in gcn]),
                 "bound: no reuse": (ds, [r.no_reuse_ms for r in gcn])},
                folder / f"roofline-{graph_name}.png", f"GCN aggregation on {graph_name}, 2 threads",
                "feature length", "ms", log_x=True, log_y=True,
            ))  # fmt: skip

    density = sensitivity.density_rows(
        max(2, int(args.density_vertices * args.scale)), NO_REUSE_TARGET_D, 2, args.repeat, tuple(args.degrees)
    )
    report.append(
        section(
            f"Table V: density (GCN aggregation, d={NO_REUSE_TARGET_D}, 2 threads)",
            sensitivity.density_markdown(density),
        )
    )
    figures.append(sensitivity.draw_density(density, NO_REUSE_TARGET_D, folder))

    heat_graph = args.graphs[0]
    heat = sensitivity.heatmap(heat_graph, graphs[heat_graph], args.heatmap_dim, 2, args.repeat)
    report.append(section("Figure 14: graph partitions x feature partitions", sensitivity.heatmap_markdown(heat)))
    figures.append(sensitivity.draw_heatmap(heat, folder))

    tuned = [
        tuning.measure_row(op, name, g, d, 2, args.repeat, args.tune_budget)
        for name, g in graphs.items() for op in args.ops for d in args.dims
    ]  # fmt: skip
    body = tuning.TABLE(tuned) + "\n\n" + tuning.summary(tuned)
    report.append(section("Tuning: heuristic default against tuned (2 threads)", body))

    trained: list[training.Row] = []
    for graph_name in args.train_graphs:
        for model in args.train_models:
            trained += training.run_rows(graph_name, args.scale, model, list(training.FRAMEWORKS), args.repeat)
    if trained:
        report.append(section("Table VI: end-to-end training epochs", training.TABLE(trained)))

    drawn = [f.name for f in figures if f is not None]
    report.append(section("Figures", "\n".join(f"![{name}]({name})" for name in drawn) if drawn
                          else "none drawn: matplotlib is not installed"))  # fmt: skip
    (folder / "report.md").write_text("\n".join(report) + "\n")
    results = {
        "machine": machine(),
        "triad_gbps": bandwidth,
        "kernels": {t: [asdict(r) for r in rows] for t, rows in rows_by_threads.items()},
        "roofline": [asdict(r) for r in placed],
        "feasibility": [{**asdict(r), "verdict": r.verdict} for r in checked],
        "density": [asdict(r) for r in density],
        "heatmap": asdict(heat),
        "tuning": [asdict(r) for r in tuned],
        "training": [asdict(r) for r in trained],
    }
    for path in filter(None, [folder / "all.json", args.json]):
        Path(path).write_text(json.dumps(results, indent=1))
    print(f"report: {folder / 'report.md'}; figures: {', '.join(drawn) or 'none'}")
    return results
