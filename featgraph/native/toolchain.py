"""What this machine can compile and run: the C++ compiler, OpenMP threads, Triton and a GPU."""

from __future__ import annotations

import importlib.util
import numbers
import os
import shutil
import subprocess
import warnings
from functools import cache
from pathlib import Path

# more threads than any machine runs: OpenMP aborts the process when it cannot create the threads it is
# asked for, and a count beyond a C int wraps around to nonsense
MAX_THREADS = 4096


@cache
def cxx_compiler() -> str | None:
    """Absolute path of the C++ compiler: ``$CXX`` if set, else the first of g++, c++, clang++ on PATH."""
    candidates = [os.environ["CXX"]] if os.environ.get("CXX") else ["g++", "c++", "clang++"]
    for name in candidates:
        path = shutil.which(name)
        if path:
            return os.path.abspath(path)  # builds run in their own directory
    return None


@cache
def cxx_version() -> str | None:
    compiler = cxx_compiler()
    if compiler is None:
        return None
    out = subprocess.run([compiler, "--version"], capture_output=True, text=True, check=False)
    return out.stdout.splitlines()[0] if out.stdout else compiler


@cache
def cpu_signature(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The CPU that ``-march=native`` compiles for: the model name and instruction-set flags of the first
    processor Linux lists (empty where it lists none), so a kernel cache shared by machines with other CPUs
    never hands one a library built for instructions it lacks."""
    try:
        text = Path(cpuinfo).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    lines = text.split("\n\n", 1)[0].splitlines()
    fields = {key.strip(): value.strip() for key, value in (line.split(":", 1) for line in lines if ":" in line)}
    return " ".join(fields.get(name, "") for name in ("model name", "flags")).strip()


def triton_available() -> bool:
    return importlib.util.find_spec("triton") is not None


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def checked_threads(value: object, name: str) -> int:
    """``value`` as a thread count for the OpenMP kernels, or a ValueError naming the setting ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 1 <= value <= MAX_THREADS:
        raise ValueError(f"{name} must be an integer from 1 to {MAX_THREADS}, got {value!r}")
    return int(value)


def num_threads() -> int:
    """Threads CPU kernels use: ``$OMP_NUM_THREADS`` if set (its first entry, the outer level, where it lists
    one per nesting level), else torch's intra-op thread count. A value that is no thread count is
    reported with a warning (once per value) and torch's count used, as OpenMP itself ignores it."""
    import torch

    return _omp_threads(os.environ.get("OMP_NUM_THREADS")) or torch.get_num_threads()


@cache
def _omp_threads(env: str | None) -> int | None:
    """``num_threads``'s reading of ``$OMP_NUM_THREADS``, once per value (every kernel launch asks)."""
    if not env:
        return None
    try:
        return checked_threads(int(env.split(",")[0]), "OMP_NUM_THREADS")
    except ValueError:
        warnings.warn(
            f"OMP_NUM_THREADS={env!r} is not a thread count from 1 to {MAX_THREADS}: featgraph's CPU kernels use "
            "torch's intra-op thread count",
            stacklevel=3,
        )
        return None
