"""``featgraph bench gpu-check``: the prepared device check, one command for a GPU machine lent for minutes, run
from the working tree with nothing installed::

    PYTHONPATH=. python3 -m featgraph bench gpu-check --out $OUT

Steps, in the order a short lease needs them, each in its own process under a time limit within ``--budget``:

- ``facts``: the device, its SMs, L2 and memory, the measured copy bandwidth, versions of python, torch, triton,
  PyG, numpy, the C++ and CUDA compilers;
- ``smoke``: a few GPU-template tests, so a kernel that does not compile shows within a minute;
- ``tests``: the suite's GPU tests (``pytest -m gpu``) on CUDA tensors;
- ``kernels``: ``featgraph bench gpu`` at the paper's sizes, GCN aggregation and dot attention at d = 32..512
  against cuSPARSE, with GB/s against the copy bandwidth;
- ``layers``: the same bench's MLP aggregation and forward + backward of GCN and GAT (PyG's ``GATConv``) at
  d = 64, with peak memory;
- ``tune``: the tuner's configuration of dot attention and the MLP aggregation on this GPU (``bench gpu
  --tune``), next to the defaults and cuSPARSE, at d = 64 and 256 on rand100k and the reddit-sized graph;
- ``train``: ``featgraph bench train --device cuda`` on rand100k-2.9M and the reddit-sized graph against PyG's layers;
- ``compile``: featgraph's and PyG's models under ``torch.compile`` on the GPU against eager;
- ``profile``: featgraph's GCN epoch eager and compiled under ``torch.profiler``, the kernels and host
  operators with the most self time and the kernel launches per epoch.

Writes ``check.json`` (facts, each step's command, status, seconds and the end of its output, the benchmarks'
rows) and ``check.md`` into ``--out``, with every step's whole output in ``steps.log``. ``--steps`` runs some of
them (a rerun after a fix); ``--dry-run`` runs the same steps on the CPU through Triton's interpreter at tiny
sizes, which is how the check itself is tested without a GPU.
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

STEPS = ("facts", "smoke", "tests", "kernels", "layers", "tune", "train", "compile", "profile")
# seconds each step may take: the first three, which find what is broken, come first and get the most
CAPS = {
    "smoke": 60, "tests": 180, "kernels": 120, "layers": 60, "tune": 150, "train": 180, "compile": 200,
    "profile": 150,
}  # fmt: skip
LOG = "steps.log"  # every step's whole output, one after another: the device sends back few files
MIN_STEP_SECONDS = 20  # a step that would get less is skipped, not started
TAIL_CHARS = 4000
SMOKE_TESTS = "reducers_match_reference or sddmm_dot_attention or gradients_of_a_udf_gradcheck"


@dataclass
class StepResult:
    name: str
    command: list[str]
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


def step_command(name: str, check: Check) -> list[str]:
    """The command line of step ``name`` (run from the working tree's root)."""
    python, out, dry = sys.executable, check.out, check.dry_run
    pytest = [python, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider"]
    if name == "smoke":
        return [*pytest, "-x", "tests/backends/gpu/test_templates.py", "-k", SMOKE_TESTS]
    if name == "tests":
        if dry:  # the interpreter runs the whole marker in minutes; two files show the step works
            return [*pytest, "-m", "gpu", "tests/ops/test_edge_softmax.py", "tests/nn/test_gcn.py"]
        workers = ["-n", str(min(8, os.cpu_count() or 1))] if _version("xdist")[0].isdigit() else []
        return [*pytest, "-m", "gpu", *workers, "tests"]
    featgraph = [python, "-m", "featgraph", "bench"]
    if name in ("kernels", "layers", "tune"):
        ops = {
            "kernels": ["gcn", "attention"],
            "layers": ["mlp", "gcn-train", "gat-train"],
            "tune": ["attention", "mlp"],
        }
        dims = {"kernels": ["32", "64", "128", "256", "512"], "layers": ["64"], "tune": ["64", "256"]}
        tiny = ["--scale", "0.001", "--dims", "8", "--repeat", "1", "--graphs", "uniform"]
        sizes = tiny if dry else ["--dims", *dims[name]]
        tuning = ["--tune", "1" if dry else "10"] if name == "tune" else []
        graphs = ["--graphs", "rand100k", "reddit-sized"] if name == "tune" and not dry else []
        return [*featgraph, "gpu", "--ops", *ops[name], *sizes, *graphs, *tuning, "--json", str(out / f"{name}.json")]
    models = ["--models", "gcn", "sage-mean", "gat"]
    frameworks = ["--frameworks", "featgraph", "pyg"]
    if name == "train":
        # PyG's layers hold E x d messages: rand100k-2.9M is a graph where they fit the GPU, reddit-sized is not
        graphs = ["rand100k-2.9M", "--scale", "0.002"] if dry else ["rand100k-2.9M", "reddit-sized"]
        return [*featgraph, "train", "--device", check.device(), *models, *frameworks, "--graphs", *graphs, "--repeat",
                "1" if dry else "3", "--json", str(out / "train.json")]  # fmt: skip
    if name == "compile":  # Inductor compiles each model in its first epochs, each framework in its own process
        sizes = ["--models", "gcn", "--scale", "0.002", "--repeat", "1"] if dry else ["--models", "gcn"]
        return [*featgraph, "train", "--device", check.device(), "--graphs", "rand100k-2.9M", *sizes, *frameworks,
                "--compile", "--json", str(out / "compile.json")]  # fmt: skip
    if name == "profile":  # eager and compiled GCN epochs per operator: what the compiled epoch spends more on
        sizes = ["--scale", "0.002"] if dry else []
        return [*featgraph, "profile", "--device", check.device(), "--graph", "rand100k-2.9M", "--model", "gcn",
                *sizes, "--json", str(out / "profile.json")]  # fmt: skip
    raise ValueError(f"no step named {name!r}; steps are {STEPS}")


def run_step(name: str, check: Check) -> StepResult:
    """Run one step's command in a process group of its own, killed whole at its time limit; its output is
    appended to ``steps.log`` under the command line."""
    command = step_command(name, check)
    limit = min(CAPS[name], check.remaining())
    if limit < MIN_STEP_SECONDS:
        return StepResult(name, command, "skipped", tail=f"skipped: {check.remaining():.0f} s of the budget left")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if check.dry_run:
        env["TRITON_INTERPRET"] = "1"
    log_path = check.out / LOG
    start = time.monotonic()
    with open(log_path, "a") as log:
        log.write(f"\n===== {name}\n$ " + " ".join(command) + "\n")
        log.flush()
        offset = log.tell()
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            returncode = process.wait(timeout=limit)
            status = "passed" if returncode == 0 else "failed"
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            returncode, status = process.wait(), "timed out"
    with open(log_path, "rb") as log:
        log.seek(offset)
        tail = log.read().decode(errors="replace")[-TAIL_CHARS:]
    data_path = check.out / f"{name}.json"
    data = json.loads(data_path.read_text()) if data_path.exists() else None
    if data_path.exists():
        data_path.unlink()  # its rows live on in check.json: fewer files to bring back
    return StepResult(name, command, status, round(time.monotonic() - start, 1), returncode, tail, data)


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
    parser.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS), help="default: all, in order")
    parser.add_argument("--budget", type=float, default=480, help="seconds for all steps together (default 480)")
    parser.add_argument(
        "--dry-run", action="store_true", help="on the CPU through Triton's interpreter at tiny sizes (no GPU needed)"
    )


def run(args: argparse.Namespace) -> list[StepResult]:
    if not args.dry_run and not torch.cuda.is_available():
        raise SystemExit("gpu-check: torch sees no CUDA GPU here; --dry-run checks the steps on the CPU")
    check = Check(Path(args.out), args.dry_run, args.budget)
    check.out.mkdir(parents=True, exist_ok=True)
    facts = device_facts(args.dry_run) if "facts" in args.steps else {}
    print(json.dumps(facts, indent=1), flush=True)
    results: list[StepResult] = []
    for name in (s for s in STEPS if s in args.steps and s != "facts"):
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
