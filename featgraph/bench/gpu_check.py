"""``featgraph bench gpu-check``: the prepared device check, one command for a GPU machine lent for minutes, run
from the working tree with nothing installed::

    PYTHONPATH=. python3 -m featgraph bench gpu-check --out $OUT               # the first planned run
    PYTHONPATH=. python3 -m featgraph bench gpu-check --run second --out $OUT  # the second (and third)

Steps, each in its own process (a step of several commands, each command in its own) under a time limit
within ``--budget``, in planned runs of under 8 minutes each (``--run``), what the device has not run yet, or
has to run again after a fix, first; the third reruns the steps an H100 has measured:

- ``facts`` (every run): the device, its SMs, L2 and memory, the measured copy bandwidth, versions of python,
  torch, triton, PyG, numpy, the C++ and CUDA compilers;
- ``smoke``: a few GPU-template tests, so a kernel that does not compile shows within a minute;
- ``tests``: the suite's GPU tests (``pytest -m gpu``) on CUDA tensors;
- ``minibatch``: ``featgraph bench minibatch --device cuda``: GraphSAGE and GAT on products-like, featgraph's
  ``BlockLoader`` sampling on every CPU core into pinned memory, featgraph's and PyG's layers on the GPU, with
  the share of each step the GPU waits for its batch and the host operators behind the format share;
- ``linkpred``: ``featgraph bench linkpred --device cuda``, edge-prediction batches on the GPU;
- ``hetero`` (second run): the grouped segment products against a ``torch.mm`` per segment (``bench
  grouped-mm``), RGCN epochs on the AM-shaped graph (``bench rgcn-train``), RGAT, HGT and a
  ``to_hetero``-style sum of ``SAGEConv`` per edge type on the mag-like graph (``bench hetero``), against
  PyG's layers, peak memory;
- ``bf16``: ``bench gpu``'s 16-bit GCN aggregation and dot attention against float32 and cuSPARSE, and
  ``bench train --bf16``'s autocast epochs against float32;
- ``tc``: ``bench gpu --orders community``: GCN aggregation and dot attention at d = 32 and 64 on tensor cores
  (16 x 16 tiles and 8 x 1 vectors) and the other rows, on graphs with communities (the reddit-sized community
  graph, products-like), as given and renumbered in the community order (``Graph.reordered``);
- ``profile``: featgraph's GCN epoch eager and compiled under ``torch.profiler``, the kernels and host
  operators with the most self time and the kernel launches per epoch;
- ``kernels`` (third run): ``featgraph bench gpu`` at the paper's sizes, GCN aggregation and dot attention at
  d = 32..512 against cuSPARSE, with GB/s against the copy bandwidth;
- ``layers``: the same bench's MLP aggregation and forward + backward of GCN and GAT (PyG's ``GATConv``) at
  d = 64, with peak memory;
- ``tune``: the tuner's configuration of dot attention and the MLP aggregation on this GPU (``bench gpu
  --tune``), next to the defaults and cuSPARSE, at d = 64 and 256 on rand100k and the reddit-sized graph;
- ``train``: ``featgraph bench train --device cuda`` on rand100k-2.9M and the reddit-sized graph against PyG's layers;
- ``compile``: featgraph's and PyG's models under ``torch.compile`` on the GPU against eager.

Writes ``check.json`` (facts, each step's commands, status, seconds and the end of its output, the benchmarks'
rows by command) and ``check.md`` into ``--out``, with every step's whole output in ``steps.log``. ``--steps``
runs the steps named instead of a planned run's (a rerun after a fix); ``--dry-run`` runs the same steps on
the CPU through Triton's interpreter at tiny sizes, which is how the check itself is tested without a GPU.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..native import toolchain
from .measure import copy_gbps

# Planned runs of under 8 minutes each, what the device has not run yet, or has to run again, first; facts opens
# each. The caps come from an H200's runs of these steps (tests 102 s, the mini-batch rows about 25 s each,
# link prediction at scale 0.1 61 s, R-GCN on the AM shape with R-GAT, HGT and a per-relation sum 134 s, bf16
# 87 s, tensor cores 44 s before their 8 x 1 rows, the profile 80 s). The third holds the steps an H100 has run
# before.
RUNS = {
    "first": ("facts", "smoke", "tests", "minibatch", "linkpred"),
    "second": ("facts", "hetero", "bf16", "tc", "profile"),
    "third": ("facts", "kernels", "layers", "tune", "train", "compile"),
}
STEPS = tuple(dict.fromkeys(RUNS["first"] + RUNS["second"] + RUNS["third"]))
# seconds each step may take: the first three, which find what is broken, come first and get the most
CAPS = {
    "smoke": 50, "tests": 170, "minibatch": 110, "bf16": 100, "hetero": 165, "linkpred": 90, "tc": 85,
    "profile": 110, "kernels": 120, "layers": 60, "tune": 150, "train": 180, "compile": 200,
}  # fmt: skip
MINIBATCH_SIZES = ["--scale", "0.25", "--batches", "20", "--warmup", "3"]  # products-like: 600k vertices, 15M edges
# products-like at 0.1 (245k vertices, 4.7M message-passing edges): at 0.25 the step's minute ran out before its
# first row
LINKPRED_SIZES = ["--scale", "0.1", "--batches", "10", "--warmup", "2"]
# PyG's RGATConv holds an (E, in, heads x out) weight: 8 GB on mag-like at 0.1 with 16 channels
HETERO_SIZES = ["--mag-scale", "0.1", "--channels", "16", "--fast-max-gb", "16", "--repeat", "3"]
LOG = "steps.log"  # every step's whole output, one after another: the device sends back few files
FACTS_SECONDS = 20  # what the facts take of a run's budget (the copy bandwidth's measurement, nvidia-smi)
MIN_STEP_SECONDS = 20  # a step that would get less is skipped, not started
TAIL_CHARS = 4000
SMOKE_TESTS = "reducers_match_reference or sddmm_dot_attention or gradients_of_a_udf_gradcheck"


@dataclass
class StepResult:
    name: str
    commands: list[list[str]]
    status: str  # passed, failed, timed out, skipped
    seconds: float = 0.0
    returncode: int | None = None
    tail: str = ""
    data: Any = None  # the rows a benchmark step wrote


@dataclass
class Check:
    out: Path
    dry_run: bool
    budget: float
    start: float = field(default_factory=time.monotonic)

    def remaining(self) -> float:
        return self.budget - (time.monotonic() - self.start)

    def device(self) -> str:
        return "cpu" if self.dry_run else "cuda"


def _version(module: str) -> str:
    try:
        return getattr(importlib.import_module(module), "__version__", "installed")
    except Exception as err:  # noqa: BLE001 - any import failure is a fact to report
        return f"not importable: {type(err).__name__}: {str(err)[:120]}"


def _command_line(argv: list[str]) -> str:
    if shutil.which(argv[0]) is None:
        return "not found"
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    return (done.stdout or done.stderr).strip()


def device_facts(dry_run: bool) -> dict[str, Any]:
    """What the machine is: the facts a table from it must carry, and what the check relies on."""
    facts: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        **{name: _version(name) for name in ("triton", "torch_geometric", "numpy", "scipy", "xdist")},
        "cxx": toolchain.cxx_version(),
        "nvcc": _command_line(["nvcc", "--version"]).splitlines()[-1:],
        "nvidia_smi": _command_line(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
                                     "--format=csv,noheader"]),
        "triton_interpret": os.environ.get("TRITON_INTERPRET", ""),
    }  # fmt: skip
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        facts.update(
            gpu=props.name,
            capability=f"sm_{props.major}{props.minor}",
            sms=props.multi_processor_count,
            l2_mb=getattr(props, "L2_cache_size", 0) / 2**20,
            memory_gb=props.total_memory / 2**30,
            copy_gbps=copy_gbps(torch.device("cuda")),
        )
        torch.cuda.empty_cache()
    else:
        facts.update(gpu=None, copy_gbps=None if not dry_run else copy_gbps(torch.device("cpu"), 64))
    return facts


def step_commands(name: str, check: Check) -> list[list[str]]:
    """The command lines of step ``name``, run one after another from the working tree's root."""
    python, dry = sys.executable, check.dry_run
    json_at = lambda part: ["--json", str(check.out / f"{name}-{part}.json")]  # noqa: E731
    pytest = [python, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider"]
    if name == "smoke":
        return [[*pytest, "-x", "tests/backends/gpu/test_templates.py", "-k", SMOKE_TESTS]]
    if name == "tests":
        if dry:  # the interpreter runs the whole marker in minutes; two files show the step works
            return [[*pytest, "-m", "gpu", "tests/ops/test_edge_softmax.py", "tests/nn/test_gcn.py"]]
        workers = ["-n", str(min(8, os.cpu_count() or 1))] if _version("xdist")[0].isdigit() else []
        return [[*pytest, "-m", "gpu", *workers, "tests"]]
    featgraph = [python, "-m", "featgraph", "bench"]
    device = ["--device", check.device()]
    threads = ["--threads", str(os.cpu_count() or 1)]  # the CPU samples for the GPU with every core
    if name in ("kernels", "layers", "tune", "bf16", "tc"):
        ops = {
            "kernels": ["gcn", "attention"],
            "tc": ["gcn", "attention"],
            "layers": ["mlp", "gcn-train", "gat-train"],
            "tune": ["attention", "mlp"],
            "bf16": ["gcn-bf16", "attention-bf16"],
        }
        dims = {"kernels": ["32", "64", "128", "256", "512"], "layers": ["64"], "tune": ["64", "256"],
                "bf16": ["64", "128", "256"], "tc": ["32", "64"]}  # fmt: skip
        tiny = ["--scale", "0.001", "--dims", "8", "--repeat", "1", "--graphs", "uniform"]
        sizes = tiny if dry else ["--dims", *dims[name]]
        tuning = ["--tune", "1" if dry else "10"] if name == "tune" else []
        graphs = ["--graphs", "rand100k", "reddit-sized"] if name in ("tune", "bf16") and not dry else []
        if name == "tc":  # tensor cores on graphs with communities, as given and in the community order
            graphs = ["--orders", "community", "--graphs", "pubmed-like" if dry else "reddit-community"]
            graphs += [] if dry else ["products-like", "--scale", "0.5"]
        kernels = [*featgraph, "gpu", "--ops", *ops[name], *sizes, *graphs, *tuning, *json_at("kernels")]
        if name != "bf16":
            return [kernels]
        # featgraph's GCN and GAT epochs under bf16 autocast against its float32 ones, each row a process
        epochs = ["--models", "gcn", "--scale", "0.002", "--repeat", "1"] if dry else ["--models", "gcn", "gat"]
        return [kernels, [*featgraph, "train", *device, "--bf16", "--frameworks", "featgraph", "--graphs",
                          "rand100k-2.9M", *epochs, *json_at("epochs")]]  # fmt: skip
    models = ["--models", "gcn", "sage-mean", "gat"]
    frameworks = ["--frameworks", "featgraph", "pyg"]
    if name == "train":
        # PyG's layers hold E x d messages: rand100k-2.9M is a graph where they fit the GPU, reddit-sized is not
        graphs = ["rand100k-2.9M", "--scale", "0.002"] if dry else ["rand100k-2.9M", "reddit-sized"]
        return [[*featgraph, "train", *device, *models, *frameworks, "--graphs", *graphs, "--repeat",
                 "1" if dry else "3", *json_at("epochs")]]  # fmt: skip
    if name == "compile":  # Inductor compiles each model in its first epochs, each framework in its own process
        sizes = ["--models", "gcn", "--scale", "0.002", "--repeat", "1"] if dry else ["--models", "gcn"]
        return [[*featgraph, "train", *device, "--graphs", "rand100k-2.9M", *sizes, *frameworks, "--compile",
                 *json_at("epochs")]]  # fmt: skip
    if name == "profile":  # eager and compiled GCN epochs per operator: what the compiled epoch spends more on
        sizes = ["--scale", "0.002"] if dry else []
        return [[*featgraph, "profile", *device, "--graph", "rand100k-2.9M", "--model", "gcn", *sizes,
                 *json_at("operators")]]  # fmt: skip
    if name == "minibatch":  # products-like: the CPU samples, the GPU trains; how long the GPU waits for batches
        sizes = ["--scale", "0.002", "--batches", "1", "--warmup", "0"] if dry else MINIBATCH_SIZES
        return [[*featgraph, "minibatch", *device, *threads, "--models", "sage", "gat", "--frameworks", "featgraph",
                 "featgraph-pyg", *sizes, "--format-ops", "12", *json_at("epochs")]]  # fmt: skip
    if name == "linkpred":
        sizes = ["--scale", "0.002", "--batches", "1", "--warmup", "0"] if dry else LINKPRED_SIZES
        return [[*featgraph, "linkpred", *device, *threads, "--frameworks", "featgraph", "featgraph-blocks",
                 "featgraph-pyg", *sizes, *json_at("batches")]]  # fmt: skip
    if name == "hetero":  # RGCN on the AM shape; RGAT, HGT and a to_hetero model's sum on the mag-like graph
        rgcn = ["aifb", "--scale", "0.1", "--repeat", "1"] if dry else ["am", "--repeat", "3", "--fast-max-gb", "16"]
        frameworks = ["featgraph", "pyg"] if dry else ["featgraph", "pyg", "pyg-fast"]
        tiny = ["--mag-scale", "0.001", "--scale", "0.01", "--channels", "8", "--repeat", "1"]
        layers = tiny if dry else HETERO_SIZES
        grouped = ["--scale", "0.0003", "--repeat", "1", "--cases", "4 node types"] if dry else ["--repeat", "3"]
        return [
            [*featgraph, "grouped-mm", *device, *grouped, *json_at("grouped")],
            [*featgraph, "rgcn-train", *device, "--frameworks", *frameworks, "--shapes", *rgcn, *json_at("rgcn")],
            *([*featgraph, "hetero", *device, "--layer", layer, *layers, *json_at(layer)]
              for layer in ("rgat", "hgt", "heteroconv")),
        ]  # fmt: skip
    raise ValueError(f"no step named {name!r}; steps are {STEPS}")


def run_step(name: str, check: Check) -> StepResult:
    """Run one step's commands, each in a process group of its own, killed whole when the step's time limit
    runs out; their output is appended to ``steps.log`` under each command line."""
    commands = step_commands(name, check)
    limit = min(CAPS[name], check.remaining())
    if limit < MIN_STEP_SECONDS:
        return StepResult(name, commands, "skipped", tail=f"skipped: {check.remaining():.0f} s of the budget left")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if check.dry_run:
        env["TRITON_INTERPRET"] = "1"
    log_path = check.out / LOG
    start = time.monotonic()
    status, returncode, failed_code = "passed", 0, 0
    with open(log_path, "a") as log:
        log.write(f"\n===== {name}\n")
        offset = log.tell()
        for command in commands:
            log.write("$ " + " ".join(command) + "\n")
            log.flush()
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
            try:
                returncode = process.wait(timeout=max(0.0, start + limit - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                returncode, status = process.wait(), "timed out"
                break
            if returncode != 0 and status == "passed":
                status, failed_code = "failed", returncode  # the others still run: each is its own measurement

    with open(log_path, "rb") as log:
        log.seek(offset)
        tail = log.read().decode(errors="replace")[-TAIL_CHARS:]
    data = {}
    for path in sorted(check.out.glob(f"{name}-*.json")):
        data[path.stem.removeprefix(f"{name}-")] = json.loads(path.read_text())
        path.unlink()  # its rows live on in check.json: fewer files to bring back
    returncode = failed_code or returncode
    return StepResult(name, commands, status, round(time.monotonic() - start, 1), returncode, tail, data or None)


def summary_markdown(facts: dict[str, Any], results: list[StepResult]) -> str:
    """check.md: the facts, each step's outcome, and the tables the benchmark steps printed."""
    lines = ["# featgraph GPU check", "", "| fact | value |", "|---|---|"]
    lines += [f"| {key} | {value} |" for key, value in facts.items()]
    lines += ["", "| step | status | seconds | last line |", "|---|---|---|---|"]
    for r in results:
        last = next((line for line in reversed(r.tail.splitlines()) if line.strip()), "")
        lines.append(f"| {r.name} | {r.status} | {r.seconds} | {last[:160].replace('|', '/')} |")
    for r in results:
        table = [line for line in r.tail.splitlines() if line.startswith("|")]
        if table:
            lines += ["", f"## {r.name}", "", *table]
    return "\n".join(lines) + "\n"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default=os.environ.get("OUT", "gpu-check"), help="directory for the results")
    parser.add_argument(
        "--run", dest="planned", choices=list(RUNS), default="first", help="the planned run's steps (default: first)"
    )
    parser.add_argument("--steps", nargs="+", choices=STEPS, help="these steps instead of a planned run's, in order")
    parser.add_argument("--budget", type=float, default=480, help="seconds for all steps together (default 480)")
    parser.add_argument(
        "--dry-run", action="store_true", help="on the CPU through Triton's interpreter at tiny sizes (no GPU needed)"
    )


def run(args: argparse.Namespace) -> list[StepResult]:
    if not args.dry_run and not torch.cuda.is_available():
        raise SystemExit("gpu-check: torch sees no CUDA GPU here; --dry-run checks the steps on the CPU")
    check = Check(Path(args.out), args.dry_run, args.budget)
    check.out.mkdir(parents=True, exist_ok=True)
    steps = args.steps or RUNS[args.planned]
    facts = device_facts(args.dry_run) if "facts" in steps else {}
    print(json.dumps(facts, indent=1), flush=True)
    results: list[StepResult] = []
    for name in (s for s in STEPS if s in steps and s != "facts"):
        result = run_step(name, check)
        results.append(result)
        print(f"{name}: {result.status} in {result.seconds} s", flush=True)
        report = {"facts": facts, "steps": [asdict(r) for r in results]}
        (check.out / "check.json").write_text(json.dumps(report, indent=1))  # after every step: a kill keeps it
        (check.out / "check.md").write_text(summary_markdown(facts, results))
    if not results:
        (check.out / "check.json").write_text(json.dumps({"facts": facts, "steps": []}, indent=1))
        (check.out / "check.md").write_text(summary_markdown(facts, results))
    return results
