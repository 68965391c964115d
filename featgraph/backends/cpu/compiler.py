"""Compile generated C++ to a shared library once, cache it on disk by source hash, load it with ctypes.

The cache lives in ``$FEATGRAPH_CACHE_DIR`` (default ``~/.cache/featgraph/kernels``). Each library is built
under a unique temporary name and moved into place with an atomic rename, so processes compiling the same
kernel at once never see a half-written file.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile
from functools import cache
from pathlib import Path

from ..toolchain import cxx_compiler, cxx_version

# -fno-math-errno lets exp/log/sqrt be treated as pure, so a weight computed once per edge is hoisted out
# of the feature loop instead of being recomputed for every element
FLAGS = (
    "-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=c++17", "-fno-loop-unroll-and-jam", "-fno-math-errno",
)  # fmt: skip


class CompilerNotFoundError(RuntimeError):
    pass


class CompileError(RuntimeError):
    pass


def cache_dir() -> Path:
    root = os.environ.get("FEATGRAPH_CACHE_DIR")
    path = Path(root) if root else Path.home() / ".cache" / "featgraph" / "kernels"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _compiler() -> str:
    compiler = cxx_compiler()
    if compiler is None:
        raise CompilerNotFoundError(
            "featgraph's CPU backend needs a C++ compiler with OpenMP and none was found on PATH: "
            "install g++ (Debian/Ubuntu: apt-get install g++) or set CXX to your compiler"
        )
    return compiler


def library_path(source: str) -> Path:
    """Where the library for ``source`` lives: keyed by source, flags and compiler version."""
    key = hashlib.sha256("\0".join([source, *FLAGS, cxx_version() or ""]).encode()).hexdigest()[:24]
    return cache_dir() / f"fg_{key}.so"


def build(source: str) -> Path:
    """The compiled library for ``source``, compiling it only when the cache lacks it."""
    target = library_path(source)
    if target.exists():
        return target
    compiler = _compiler()
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as tmp:
        src = Path(tmp) / "kernel.cpp"
        src.write_text(source)
        partial = Path(tmp) / target.name
        result = subprocess.run([compiler, *FLAGS, str(src), "-o", str(partial)], capture_output=True, text=True)
        if result.returncode != 0:
            raise CompileError(f"C++ compilation failed ({compiler}):\n{result.stderr[-4000:]}")
        os.replace(partial, target)
    return target


@cache
def load(source: str) -> ctypes._CFuncPtr:
    """The ``run`` entry point of the kernel compiled from ``source`` (built or taken from the cache)."""
    library = ctypes.CDLL(str(build(source)))
    run = library.run
    run.restype = None
    run.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64)]
    return run
