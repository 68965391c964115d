"""What this machine can compile and run: the C++ compiler, OpenMP threads, Triton and a GPU."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from functools import cache


@cache
def cxx_compiler() -> str | None:
    """Path of the C++ compiler: ``$CXX`` if set, else the first of g++, c++, clang++ on PATH."""
    candidates = [os.environ["CXX"]] if os.environ.get("CXX") else ["g++", "c++", "clang++"]
    for name in candidates:
        path = shutil.which(name)
        if path:
            return path
    return None


@cache
def cxx_version() -> str | None:
    compiler = cxx_compiler()
    if compiler is None:
        return None
    out = subprocess.run([compiler, "--version"], capture_output=True, text=True, check=False)
    return out.stdout.splitlines()[0] if out.stdout else compiler


def triton_available() -> bool:
    return importlib.util.find_spec("triton") is not None


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def num_threads() -> int:
    """Threads CPU kernels use: ``$OMP_NUM_THREADS`` if set, else torch's intra-op thread count."""
    import torch

    env = os.environ.get("OMP_NUM_THREADS")
    return int(env) if env and env.isdigit() and int(env) > 0 else torch.get_num_threads()
