"""Tuning results on disk, keyed by graph, op, shapes, dtype, target and machine.

One JSON file per key in ``$FEATGRAPH_TUNE_DIR`` (default ``~/.cache/featgraph/tuning``), written to a
temporary name and renamed into place, so concurrent tuners never leave a half-written record.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import tempfile
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import torch

from ..backends import cpu, toolchain
from ..templates.kernel import Kernel
from .space import with_split


def tune_dir() -> Path:
    root = os.environ.get("FEATGRAPH_TUNE_DIR")
    path = Path(root) if root else Path.home() / ".cache" / "featgraph" / "tuning"
    path.mkdir(parents=True, exist_ok=True)
    return path


@cache
def machine_signature(target: str = "cpu") -> str:
    """CPU model, core count and compiler (and the GPU's name for ``target="gpu"``): a result measured
    elsewhere is not trusted here."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpu = torch.cuda.get_device_name() if target == "gpu" and torch.cuda.is_available() else ""
    return f"{model}|{os.cpu_count()}|{toolchain.cxx_version()}|{gpu}"


def key(kernel: Kernel, threads: int) -> str:
    """Hash of the graph's fingerprint, the kernel's identity with every tunable choice reset to what the
    caller fixed (so the starting point does not matter), the target, threads and the machine."""
    params = type(kernel.spec.params)(**{n: getattr(kernel.spec.params, n) for n in kernel.fixed_params})
    identity = replace(kernel.spec, params=params, schedule=with_split(kernel.spec.schedule, None))
    machine = machine_signature(kernel.target)
    parts = [kernel.graph.fingerprint, cpu.source(identity), kernel.target, str(threads), machine]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def load(name: str) -> dict[str, Any] | None:
    """The stored record, or None when there is none (or it cannot be read)."""
    try:
        return json.loads((tune_dir() / f"{name}.json").read_text())
    except (OSError, ValueError):
        return None


def save(name: str, record: dict[str, Any]) -> None:
    directory = tune_dir()
    with tempfile.NamedTemporaryFile("w", dir=directory, prefix=".tmp-", suffix=".json", delete=False) as f:
        json.dump(record, f, indent=1)
    os.replace(f.name, directory / f"{name}.json")
