"""``featgraph bench profile``: where a training epoch's time goes, per operator, for the training benchmark's
models (``featgraph bench train``), eager and under ``torch.compile`` side by side, on the CPU or a GPU.

Each framework runs in its own process: two warm-up epochs (Inductor compiles in them), then ``--epochs``
epochs under ``torch.profiler``. Per framework it prints the operators with the most self time on the device
(a GPU's kernels; the CPU's where there is no GPU) and on the host, per epoch, with the kernel launches an
epoch makes: what a compiled epoch slower than the eager one spends its time on.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field

import torch
from torch.profiler import ProfilerActivity, profile

from .report import Table, device_name, machine, run_worker, write_json
from .training import COMPILED, GRAPHS, LAYER_MODELS, MODELS, prepare

LAUNCHES = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx")  # runtime and driver


@dataclass
class OpRow:
    framework: str
    side: str  # "device" (a GPU's kernels, else the CPU's operators) or "host"
    op: str
    calls: float  # per epoch
    ms: float  # self time per epoch


@dataclass
class Profile:
    framework: str
    epoch_ms: float | None = None  # wall clock per profiled epoch, the profiler's overhead included
    launches: float | None = None  # kernel launches per epoch (GPU only)
    ops: list[OpRow] = field(default_factory=list)
    note: str = ""


def _self_ms(event: object, side: str) -> float:
    """An averaged event's self time in ms on ``side`` (the device total is named per torch version)."""
    if side == "host":
        return event.self_cpu_time_total / 1e3
    total = getattr(event, "self_device_time_total", None)
    return (total if total is not None else getattr(event, "self_cuda_time_total", 0.0)) / 1e3


def run_one(graph_name: str, scale: float, model: str, framework: str, device: str, epochs: int, top: int) -> Profile:
    """One framework's profile, meant for a fresh process."""
    prepared = prepare(graph_name, scale, model, framework, device)
    if isinstance(prepared, str):
        return Profile(framework, note=prepared)
    prepared.epochs_ms(1)  # warm-up: formats, kernels, Inductor's compilation
    gpu = torch.device(device).type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
    repeat = max(epochs - 2, 1)  # epochs_ms runs two epochs before the ones it times
    with profile(activities=activities) as profiler:
        _, epoch_ms = prepared.epochs_ms(repeat)
    counted = repeat + 2
    averages = profiler.key_averages()
    out = Profile(framework, epoch_ms)
    if gpu:
        out.launches = sum(e.count for e in averages if e.key in LAUNCHES) / counted
    for side in ("device", "host") if gpu else ("host",):
        ranked = sorted(averages, key=lambda e: _self_ms(e, side), reverse=True)[:top]
        out.ops += [OpRow(framework, side, e.key[:70], e.count / counted, _self_ms(e, side) / counted) for e in ranked]
    return out


TABLE = Table({"side": "side", "op": "op", "calls / epoch": "calls:.1f", "self ms / epoch": "ms:.3f"})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--graph", choices=list(GRAPHS), default="rand100k-2.9M")
    parser.add_argument("--model", choices=[*MODELS, *LAYER_MODELS], default="gcn")
    parser.add_argument(
        "--frameworks", nargs="+", default=["featgraph", "featgraph" + COMPILED],
        help="frameworks as bench train names them (a -compiled suffix: under torch.compile)",
    )  # fmt: skip
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--epochs", type=int, default=3, help="epochs profiled (at least 3) after the warm-up")
    parser.add_argument("--top", type=int, default=15, help="operators listed per side")
    parser.add_argument("--scale", type=float, default=1.0, help="shrink the synthetic graph (tests)")
    parser.add_argument("--json", metavar="PATH", help="write every profile as JSON")


def run(args: argparse.Namespace) -> list[Profile]:
    if args.epochs < 3 or args.top < 1:
        raise SystemExit("profile: --epochs must be at least 3 and --top at least 1")
    print(f"machine: {machine()}; device: {device_name(args.device)}; {args.graph}, {args.model}")
    profiles = []
    for framework in args.frameworks:
        spec = [args.graph, args.scale, args.model, framework, args.device, args.epochs, args.top]
        result = run_worker("featgraph.bench.profile", spec)
        if isinstance(result, str):
            profiles.append(Profile(framework, note=result))
        else:
            ops = [OpRow(**row) for row in result.pop("ops")]
            profiles.append(Profile(**result, ops=ops))
    for p in profiles:
        launches = "" if p.launches is None else f", {p.launches:.0f} kernel launches"
        timing = "" if p.epoch_ms is None else f"{p.epoch_ms:.1f} ms per epoch under the profiler{launches}"
        print(f"\n{p.framework}: {timing or p.note}")
        if p.ops:
            print(TABLE(p.ops))
    write_json(args.json, [asdict(p) for p in profiles], graph=args.graph, model=args.model, device=args.device)
    return profiles


if __name__ == "__main__":  # the worker: one profile as JSON on the last line of stdout
    print(json.dumps(asdict(run_one(*json.loads(sys.argv[1])))))
