"""``featgraph bench pyg-examples``: PyG's own example scripts as a benchmark. Each Planetoid example under
PyG's ``examples/`` that builds a layer ``featgraph.nn`` replaces runs unmodified in its own process three
ways: with PyG's classes ("pyg"); with featgraph's bound in their place ("featgraph": ``torch_geometric.nn``,
``torch_geometric.nn.conv`` and ``torch_geometric.nn.models.basic_gnn``, whose GCN/GraphSAGE/GIN/GAT models
build their layers from its own imports, before the script imports them); and with featgraph's dropout bound
as well ("featgraph+dropout": ``torch.nn.functional.dropout`` and ``torch.nn.Dropout``, on the small
Planetoid graphs torch's dropout of the input features is much of an epoch). A table gives each run's own
timer (the median seconds per epoch the script prints), the wall time of its process and its final metric,
and the speed-ups over the "pyg" run: the examples are code PyG users run as they are, so they show whether
featgraph's layers are a drop-in (the same results, no errors) and what they save there.

PyG's examples ship in neither PyG's wheel nor featgraph: check out PyG's repository at the installed
version's tag (``git archive 2.8.0.post1 examples | tar -x``) and point ``--examples`` at its ``examples``.
The scripts read Planetoid from a data folder next to themselves; each run sets the script's ``__file__`` to
a path in a temporary folder whose data folder links to the raw Planetoid files (``--planetoid``), so
Planetoid loads offline and nothing is written into the checkout. Examples that need what this machine lacks
(a package, a GPU, a download) are listed with the reason, not run."""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .report import cell, markdown_header, markdown_row, write_json

LAYERS = (
    "AGNNConv", "APPNP", "EdgeConv", "GATConv", "GATv2Conv", "GCNConv", "GINConv", "GINEConv", "GraphConv",
    "SAGEConv", "SGConv", "TransformerConv",
)  # fmt: skip
MODES = ("pyg", "featgraph", "featgraph+dropout")
MEDIAN_TIME = r"Median time per epoch: ([0-9.]+)s"
TEST = r"Test: ([0-9.]+)"
LAYERS_BUILT = "pyg-examples layers built: "


@dataclass(frozen=True)
class Example:
    """One of PyG's example scripts and how to read its output."""

    path: str  # relative to examples/
    dataset: str  # the Planetoid dataset the script loads
    data: str  # the Planetoid root relative to the script's folder, as the script joins it
    args: tuple[str, ...] = ()
    timer: str | None = MEDIAN_TIME  # its first match: the script's median seconds per epoch; None: it prints none
    metric: str | None = TEST  # its last match: the script's final metric; None: it prints none
    metric_name: str = "test acc"
    note: str = ""


EXAMPLES = (
    Example("gcn.py", "Cora", "../data/Planetoid"),
    Example("gat.py", "Cora", "../data/Planetoid"),
    Example("agnn.py", "Cora", "../data/Cora", timer=None),
    Example("sgc.py", "Cora", "../data/Cora", timer=None),
    Example(
        "glnn.py", "Cora", "../data/Planetoid", metric_name="student MLP test acc",
        note="own timer: the GCN teacher's epochs; the metric is the distilled MLP's",
    ),
    Example("jit/gcn.py", "Cora", "data/Planetoid", timer=None, note="torch.jit.script of the model"),
    Example("compile/gcn.py", "Cora", "../../data/Planetoid", note="torch.compile of the model"),
    Example(
        "contrib/rbcd_attack.py", "Cora", "data/Planetoid", timer=None, metric=r"Clean accuracy: ([0-9.]+)",
        metric_name="GCN clean test acc", note="GRBCD/PRBCD attacks on a GCN and a GATConv subclass",
    ),
)  # fmt: skip
SKIPPED = {
    "ar_link_pred.py": "needs scikit-learn",
    "argva_node_clustering.py": "needs scikit-learn",
    "autoencoder.py": "needs scikit-learn (GAE.test's roc_auc_score)",
    "infomax_transductive.py": "needs scikit-learn (DeepGraphInfomax.test's LogisticRegression)",
    "link_pred.py": "needs scikit-learn",
    "seal_link_pred.py": "needs scikit-learn",
    "graph_sage_unsup.py": "needs scikit-learn, and pyg-lib or torch-sparse for LinkNeighborLoader",
    "tensorboard_logging.py": "needs tensorboard",
    "explain/captum_explainer.py": "needs captum",
    "explain/gnn_explainer.py": "needs pandas (Explanation.visualize_feature_importance)",
    "explain/gnn_explainer_link_pred.py": "needs scikit-learn",
    "explain/graphmask_explainer.py": (
        "fails with PyG's own layers (torch_geometric 2.8.1: GraphMaskExplainer on the multi-head GATConv, "
        "'RuntimeError: Sizes of tensors must match except in dimension 0. Expected size 8 but got size 1'); "
        "featgraph's layers run PyG's forward in explain mode"
    ),
    "contrib/pgm_explainer_node_classification.py": "needs pgmpy",
    "contrib/rbcd_attack_poisoning.py": "needs higher",
    "multi_gpu/model_parallel.py": "needs two GPUs",
    "jit/gat.py": (
        "fails with PyG's own GATConv under torch.jit.script (torch 2.13, torch_geometric 2.8.1: "
        "'Could not cast value of type Optional[Tensor] to bool')"
    ),
    "arma.py": "no layer featgraph.nn replaces (ARMAConv)",
    "cora.py": "no layer featgraph.nn replaces (SplineConv)",
    "dna.py": "no layer featgraph.nn replaces (DNAConv); needs scikit-learn",
    "gcn2_cora.py": "no layer featgraph.nn replaces (GCN2Conv)",
    "graph_unet.py": "no layer featgraph.nn replaces (GraphUNet's GCNConv comes from its own import)",
    "mixhop.py": "no layer featgraph.nn replaces (MixHopConv)",
    "node2vec.py": "no layer featgraph.nn replaces (Node2Vec)",
    "ogc.py": "no layer featgraph.nn replaces",
    "pmlp.py": "no layer featgraph.nn replaces (PMLP's SimpleConv)",
    "rect.py": "no layer featgraph.nn replaces (RECT_L); needs scikit-learn",
    "super_gat.py": "no layer featgraph.nn replaces (SuperGATConv)",
    "tagcn.py": "no layer featgraph.nn replaces (TAGConv)",
}

# Runs RUN under a file name in linecache, so torch.jit.script can read the source of the functions it binds
BOOT = """import linecache, sys
source, name = sys.argv.pop(1), "<pyg-examples prelude>"
linecache.cache[name] = (len(source), None, source.splitlines(True), name)
exec(compile(source, name, "exec"))
"""
# Runs in the child: argv = mode, seed, the script, the path its __file__ takes, then the script's arguments.
RUN = """
import functools, linecache, os, sys, torch
mode, seed, script, file, args = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
torch.manual_seed(seed)
from torch_geometric.nn.conv import MessagePassing
built, init = set(), MessagePassing.__init__

@functools.wraps(init)
def recording_init(self, *a, **k):
    built.add(type(self).__module__ + "." + type(self).__qualname__)
    init(self, *a, **k)

MessagePassing.__init__ = recording_init
if mode != "pyg":
    import torch_geometric.nn, torch_geometric.nn.conv, torch_geometric.nn.models.basic_gnn, featgraph.nn
    for name in {layers}:
        for module in torch_geometric.nn, torch_geometric.nn.conv, torch_geometric.nn.models.basic_gnn:
            if hasattr(module, name):
                setattr(module, name, getattr(featgraph.nn, name))
if mode == "featgraph+dropout":
    import featgraph.nn, torch.nn.functional
    torch.nn.functional.dropout = featgraph.nn.functional.dropout
    torch.nn.Dropout = featgraph.nn.Dropout
sys.argv = [file, *args]
sys.path.insert(0, os.path.dirname(script))
with open(script) as f:
    source = f.read()
linecache.cache[file] = (len(source), None, source.splitlines(True), file)  # inspect.getsource finds the code
code = compile(source, file, "exec")
try:
    exec(code, {{"__name__": "__main__", "__file__": file, "__builtins__": __builtins__}})
finally:
    print("\\n{marker}" + ",".join(sorted(built)), flush=True)
"""


@dataclass
class Run:
    """One process: an example with one mode and one seed."""

    example: str
    mode: str
    seed: int
    wall_s: float
    timer_s: float | None
    metric: float | None
    layers: list[str]
    fallbacks: list[str]  # featgraph's FallbackWarnings: calls its layers left to PyG's forward, and why
    error: str | None  # the tail of stderr when the process failed


@dataclass
class Row:
    """An example with one mode over the seeds: medians of the timers, the metric's mean and range."""

    example: str
    mode: str
    layers: list[str]
    timer_ms: float | None
    wall_s: float
    metric: float | None
    metric_min: float | None
    metric_max: float | None
    seeds: int
    fallbacks: list[str] = field(default_factory=list)
    speedup_timer: float | None = None
    speedup_wall: float | None = None
    error: str | None = None
    runs: list[dict] = field(default_factory=list)


def parse_timer(example: Example, stdout: str) -> float | None:
    """The script's own median seconds per epoch (the first the script prints), None where it prints none."""
    match = re.search(example.timer, stdout) if example.timer else None
    return float(match.group(1)) if match else None


def parse_metric(example: Example, stdout: str) -> float | None:
    """The script's final metric (the last value its pattern matches), None where it prints none."""
    found = re.findall(example.metric, stdout) if example.metric else []
    return float(found[-1]) if found else None


def parse_layers(stdout: str) -> list[str]:
    """The message-passing classes the script built, as the prelude lists them at the end."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(LAYERS_BUILT):
            return [name for name in line[len(LAYERS_BUILT) :].split(",") if name]
    return []


def parse_fallbacks(stderr: str) -> list[str]:
    """The distinct ``FallbackWarning`` messages a run printed (featgraph's layer ran PyG's forward)."""
    found = re.findall(r"FallbackWarning: (.+)", stderr)
    return sorted(set(found))


def prepare(root: Path, example: Example, planetoid: Path) -> Path:
    """The path the script's ``__file__`` takes under ``root``, with its Planetoid raw files linked where the
    script looks for them and processed once (so no timed run pays for it)."""
    file = root / "examples" / example.path
    data = Path(os.path.normpath(file.parent / example.data))
    raw = data / example.dataset / "raw"
    if not raw.exists():
        raw.mkdir(parents=True)
        for source in sorted(planetoid.glob(f"ind.{example.dataset.lower()}.*")):
            (raw / source.name).symlink_to(source.resolve())
        from torch_geometric.datasets import Planetoid

        Planetoid(str(data), example.dataset)
    return file


def run_script(
    example: Example, mode: str, seed: int, examples: Path, file: Path, timeout: float
) -> tuple[str, str, float, bool]:
    """The script in a fresh process (working directory: an empty temporary folder, for the files it writes):
    its stdout, stderr, wall seconds and whether it failed."""
    import featgraph

    code = RUN.format(layers=LAYERS, marker=LAYERS_BUILT)
    env = dict(os.environ)
    package_root = str(Path(featgraph.__file__).resolve().parents[1])  # the child imports this featgraph
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    script = (examples / example.path).resolve()
    argv = [sys.executable, "-c", BOOT, code, mode, str(seed), str(script), str(file), *example.args]
    with tempfile.TemporaryDirectory(prefix="pyg-example-") as cwd:
        start = time.perf_counter()
        try:
            done = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout, check=False)
            stdout, stderr, failed = done.stdout, done.stderr, done.returncode != 0
        except subprocess.TimeoutExpired as timed_out:
            stdout = timed_out.stdout.decode() if isinstance(timed_out.stdout, bytes) else timed_out.stdout or ""
            stderr, failed = f"timed out after {timeout:.0f} s", True
        return stdout, stderr, time.perf_counter() - start, failed


def run_once(example: Example, mode: str, seed: int, examples: Path, file: Path, timeout: float) -> Run:
    """One run of the script, its output parsed."""
    stdout, stderr, wall, failed = run_script(example, mode, seed, examples, file, timeout)
    layers = parse_layers(stdout)
    timer, metric = parse_timer(example, stdout), parse_metric(example, stdout)
    error = error_tail(stderr) if failed else None
    return Run(example.path, mode, seed, wall, timer, metric, layers, parse_fallbacks(stderr), error)


def error_tail(stderr: str, lines: int = 25) -> str:
    """The end of a failed run's stderr: the traceback and its message."""
    return "\n".join(stderr.strip().splitlines()[-lines:])


def summarise(example: Example, mode: str, runs: list[Run]) -> Row:
    """One row from an example's runs in one mode (every seed)."""
    timers = [r.timer_s for r in runs if r.timer_s is not None]
    metrics = [r.metric for r in runs if r.metric is not None]
    errors = [r.error for r in runs if r.error]
    return Row(
        example.path,
        mode,
        sorted({name for r in runs for name in r.layers}),
        statistics.median(timers) * 1e3 if timers else None,
        statistics.median(r.wall_s for r in runs),
        statistics.fmean(metrics) if metrics else None,
        min(metrics) if metrics else None,
        max(metrics) if metrics else None,
        len(runs),
        sorted({message for r in runs for message in r.fallbacks}),
        error=errors[0] if errors else None,
        runs=[asdict(r) for r in runs],
    )


def add_speedups(rows: list[Row]) -> None:
    """Each row's speed-up over the "pyg" row of its example, by the script's own timer and by wall time."""
    base = {r.example: r for r in rows if r.mode == "pyg" and r.error is None}
    for r in rows:
        pyg = base.get(r.example)
        if pyg is None or r.error is not None:
            continue
        if pyg.timer_ms and r.timer_ms:
            r.speedup_timer = pyg.timer_ms / r.timer_ms
        r.speedup_wall = pyg.wall_s / r.wall_s


def layer_cell(layers: list[str]) -> str:
    """The replaced layers a run built, each marked with whose class it was."""
    names = []
    for qualified in layers:
        module, _, name = qualified.rpartition(".")
        if name in LAYERS or module.startswith("featgraph"):
            names.append(f"{'featgraph' if module.startswith('featgraph') else 'PyG'} {name}")
        elif module.startswith("__main__"):
            names.append(f"script's {name}")
    return ", ".join(names) or "-"


def metric_cell(r: Row) -> str:
    if r.metric is None:
        return "-"
    if r.seeds == 1 or r.metric_min == r.metric_max:
        return f"{r.metric:.4f}"
    return f"{r.metric:.4f} ({r.metric_min:.4f}-{r.metric_max:.4f})"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--examples", type=Path, required=True, help="PyG's examples directory")
    parser.add_argument(
        "--planetoid",
        type=Path,
        default=Path("../shared/data/planetoid"),
        help="folder with Planetoid's raw files (ind.cora.x, ...)",
    )
    names = [e.path for e in EXAMPLES]
    parser.add_argument("--only", nargs="+", choices=names, default=names, metavar="EXAMPLE", help="run these")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--seeds", type=int, default=1, help="runs per example and mode, seeds 0..N-1")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds one run may take")
    parser.add_argument("--json", metavar="PATH", help="write every row as JSON")


def run(args: argparse.Namespace) -> list[Row]:
    missing = [e.path for e in EXAMPLES if e.path in args.only and not (args.examples / e.path).exists()]
    if missing:
        raise SystemExit(f"--examples: no {', '.join(missing)} (point --examples at PyG's examples directory)")
    if not any(args.planetoid.glob("ind.cora.*")):
        raise SystemExit(f"--planetoid: no ind.cora.* in {args.planetoid} (the raw Planetoid files)")
    for path, reason in SKIPPED.items():
        if (args.examples / path).exists():
            print(f"skipped {path}: {reason}", flush=True)
    rows = []
    header = markdown_header(
        "example", "run", "layers built", "own timer (ms/epoch)", "wall (s)", "final metric",
        "speed-up, own timer", "speed-up, wall",
    )  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="pyg-examples-") as tmp:
        for example in (e for e in EXAMPLES if e.path in args.only):
            file = prepare(Path(tmp), example, args.planetoid)
            runs: dict[str, list[Run]] = {mode: [] for mode in args.modes}
            for seed in range(args.seeds):  # the modes in turns, so a noisy machine slows them alike
                for mode in args.modes:
                    runs[mode].append(run_once(example, mode, seed, args.examples, file, args.timeout))
            example_rows = [summarise(example, mode, runs[mode]) for mode in args.modes]
            add_speedups(example_rows)
            for r in example_rows:
                print(
                    f"{r.example} [{r.mode}]: {'FAILED' if r.error else 'ok'}, wall {r.wall_s:.1f} s, "
                    f"timer {cell(r.timer_ms, '.2f')} ms, {example.metric_name} {metric_cell(r)}",
                    flush=True,
                )
                for message in r.fallbacks:
                    print(f"    FallbackWarning: {message}", flush=True)
                if r.error:
                    print("    " + r.error.replace("\n", "\n    "), flush=True)
            rows += example_rows
    print("\n" + header)
    notes = {e.path: e for e in EXAMPLES}
    for r in rows:
        example = notes[r.example]
        print(
            markdown_row([
                r.example, r.mode,
                layer_cell(r.layers) + "".join(f"; FallbackWarning: {message}" for message in r.fallbacks),
                cell(r.timer_ms, ".2f") if example.timer else "none printed",
                f"{r.wall_s:.1f}",
                "failed" if r.error else (f"{example.metric_name} {metric_cell(r)}" if example.metric else "-"),
                cell(r.speedup_timer, ".2f"), cell(r.speedup_wall, ".2f"),
            ])
        )  # fmt: skip
    write_json(args.json, [asdict(r) for r in rows], seeds=args.seeds, skipped=SKIPPED)
    return rows
