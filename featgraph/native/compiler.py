"""Compile C++ (generated kernels, and the hand-written files in ``cpp/``) to a shared library once, cache it on
disk by source hash, load it with ctypes.

The cache lives in ``$FEATGRAPH_CACHE_DIR`` (default ``~/.cache/featgraph/kernels``, created when missing).
Each library is compiled in a temporary ``.build-<pid>-*`` directory and moved into place with an atomic
rename, then a stamp beside it (``.stamp``) records its size and SHA-256. A library is checked against its
stamp before it is loaded: a truncated one would kill the process that maps it (SIGBUS) and a damaged one
would fail to load on every run, so one that does not match, or has no stamp, is rebuilt with a warning.
Builds of one library hold a lock file (``.lock``), so processes that need the same new kernel at once
compile it once; a build directory that a killed compile left behind is removed by a later build. A cache
that cannot be written still serves the libraries it holds; building a new one there raises
``CacheDirError`` naming the directory.

The standard headers every source includes (``cpp/standard.h``) are precompiled once per compiler, flags and
CPU into the cache (``precompiled_header``, g++'s ``.gch``, built and checked as a library is) and put before
each source: parsing them was nine tenths of a kernel's compile (173 ms against 563 ms a kernel, the same
machine code; ``featgraph bench compile``). A compiler that cannot build or read it compiles each source with its
own includes, as every source does with ``FEATGRAPH_PRECOMPILE_HEADERS=0``.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import torch

from .toolchain import cpu_signature, cxx_compiler, cxx_version

# -fno-math-errno lets exp/log/sqrt be treated as pure, so a weight computed once per edge is hoisted out
# of the feature loop instead of being recomputed for every element
FLAGS = (
    "-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=c++17", "-fno-loop-unroll-and-jam", "-fno-math-errno",
)  # fmt: skip
BUILD_PREFIX = ".build-"  # temporaries in the cache: ``.build-<pid>-<random>``
STALE_BUILD_S = 600  # a temporary this old whose process is gone was left by a killed build
MISSING = "missing"
STANDARD_HEADERS = Path(__file__).parent / "cpp" / "standard.h"
PRECOMPILE_SETTING = "FEATGRAPH_PRECOMPILE_HEADERS"  # "0": every source parses its own includes
_checked_headers: dict[Path, Path | None] = {}  # per precompiled-header directory: its header, or None if unusable


class CompilerNotFoundError(RuntimeError):
    pass


class CompileError(RuntimeError):
    pass


class CacheDirError(RuntimeError):
    """The kernel cache directory cannot be created or written."""


@contextmanager
def writing(directory: Path, setting: str = "FEATGRAPH_CACHE_DIR") -> Iterator[None]:
    """Report a failure to create or write in ``directory`` as a ``CacheDirError`` that names the directory
    and the environment variable choosing it."""
    try:
        yield
    except OSError as error:
        raise CacheDirError(
            f"featgraph cannot write to its cache directory {directory} ({error.strerror or error}): make it "
            f"writable or set {setting} to a writable directory"
        ) from error


def cache_dir() -> Path:
    root = os.environ.get("FEATGRAPH_CACHE_DIR")
    path = Path(root).expanduser() if root else Path.home() / ".cache" / "featgraph" / "kernels"
    with writing(path):
        path.mkdir(parents=True, exist_ok=True)
    return path


def _compiler() -> str:
    compiler = cxx_compiler()
    if compiler is not None:
        return compiler
    requested = os.environ.get("CXX")
    if requested:
        raise CompilerNotFoundError(
            f"$CXX is {requested!r}, which is neither an executable file nor a program on PATH: point CXX at a "
            "C++ compiler with OpenMP (such as g++), or unset it to use g++, c++ or clang++ from PATH"
        )
    raise CompilerNotFoundError(
        "featgraph's CPU backend needs a C++ compiler with OpenMP and none was found on PATH: "
        "install g++ (Debian/Ubuntu: apt-get install g++) or set CXX to your compiler"
    )


def library_path(source: str) -> Path:
    """Where the library for ``source`` lives: keyed by source, flags, compiler version and the CPU that
    ``-march=native`` targets."""
    key = hashlib.sha256("\0".join([source, *FLAGS, cxx_version() or "", cpu_signature()]).encode()).hexdigest()[:24]
    return cache_dir() / f"fg_{key}.so"


def _fingerprint(data: bytes) -> bytes:
    """What a stamp records about a library: its size and SHA-256."""
    return f"{len(data)} {hashlib.sha256(data).hexdigest()}".encode()


def _defect(library: Path) -> str | None:
    """Why ``library`` cannot be loaded as it is (``MISSING``, no stamp, other than its stamp records), or None."""
    try:
        data = library.read_bytes()
    except FileNotFoundError:
        return MISSING
    except OSError as error:
        return f"it cannot be read ({error.strerror or error})"
    try:
        expected = library.with_suffix(".stamp").read_bytes()
    except OSError:
        return "it has no readable stamp recording its size and checksum"
    if _fingerprint(data) == expected:
        return None
    built = expected.split(b" ", 1)[0].decode(errors="replace")
    if built != str(len(data)):
        return f"it is {len(data)} bytes, its stamp says {built}"
    return "its SHA-256 differs from the one recorded when it was built"


@contextmanager
def _build_lock(library: Path) -> Iterator[None]:
    """Hold the lock that serialises builds of ``library`` across processes (released if the holder dies)."""
    with writing(library.parent):
        descriptor = os.open(library.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def remove_stale_builds(directory: Path) -> None:
    """Remove the ``.build-<pid>-*`` temporaries in ``directory`` that builds killed midway left: older than
    ``STALE_BUILD_S`` and whose process is gone (both, so a slow build on another machine sharing the cache,
    or a reused process id, keeps its directory)."""
    now = time.time()
    for entry in os.scandir(directory):
        if not entry.name.startswith(BUILD_PREFIX):
            continue
        owner = entry.name[len(BUILD_PREFIX) :].split("-", 1)[0]
        try:
            if now - entry.stat(follow_symlinks=False).st_mtime < STALE_BUILD_S or (
                owner.isdigit() and _alive(int(owner))
            ):
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            pass  # removed by another process first, or not this user's to remove: no reason to fail a build


def _run_compiler(arguments: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([_compiler(), *FLAGS, *arguments], cwd=cwd, capture_output=True, text=True)


def _headers_directory() -> Path:
    """Where the standard headers precompiled for this compiler, FLAGS and CPU live in the cache."""
    text = STANDARD_HEADERS.read_text()
    key = hashlib.sha256("\0".join([text, *FLAGS, cxx_version() or "", cpu_signature()]).encode()).hexdigest()[:24]
    return cache_dir() / f"headers_{key}"


def precompiled_header() -> Path | None:
    """The header to put before every source (``-include``) with its precompiled form beside it, built on first
    use under the cache's lock and atomic rename, rebuilt when its stamp does not match it; None where the
    compiler cannot build it (each source then parses its own includes)."""
    if os.environ.get(PRECOMPILE_SETTING, "1") == "0":
        return None
    try:
        directory = _headers_directory()
    except OSError:  # the header itself is unreadable
        return None
    if directory in _checked_headers:
        return _checked_headers[directory]
    header = directory / STANDARD_HEADERS.name
    compiled = directory / f"{STANDARD_HEADERS.name}.gch"
    try:
        if _defect(compiled) is not None:
            with _build_lock(directory):
                if _defect(compiled) is not None:
                    _precompile(directory)
    except (CompileError, CacheDirError, OSError):
        header = None
    _checked_headers[directory] = header
    return header


def _precompile(directory: Path) -> None:
    """Compile ``STANDARD_HEADERS`` into ``directory`` (replacing what is there) by an atomic rename."""
    parent = directory.parent
    with writing(parent):
        tmp = Path(tempfile.mkdtemp(dir=parent, prefix=f"{BUILD_PREFIX}{os.getpid()}-"))
    try:
        name = STANDARD_HEADERS.name
        shutil.copyfile(STANDARD_HEADERS, tmp / name)
        result = _run_compiler(["-x", "c++-header", name, "-o", f"{name}.gch"], tmp)
        if result.returncode != 0:
            raise CompileError(f"precompiling {name} failed:\n{result.stderr[-2000:]}")
        (tmp / f"{name}.stamp").write_bytes(_fingerprint((tmp / f"{name}.gch").read_bytes()))
        with writing(parent):
            tmp.chmod(0o755)  # as readable as the libraries beside it (mkdtemp made it the owner's alone)
            shutil.rmtree(directory, ignore_errors=True)
            os.rename(tmp, directory)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _compile(source: str, target: Path) -> None:
    """Compile ``source`` into ``target`` (after the precompiled standard headers) and write its stamp, each by
    an atomic rename. A compile that fails with the precompiled headers runs again without them; where that
    one succeeds, the headers are not used again in this process and are rebuilt by the next one."""
    compiler = _compiler()
    directory = target.parent
    header = precompiled_header()
    with writing(directory):
        remove_stale_builds(directory)
        tmp = Path(tempfile.mkdtemp(dir=directory, prefix=f"{BUILD_PREFIX}{os.getpid()}-"))
    try:
        with writing(directory):
            (tmp / "kernel.cpp").write_text(source)
        # relative names: the build directory's name stays out of the library
        arguments = ["kernel.cpp", "-o", target.name]
        result = _run_compiler(["-include", str(header), *arguments] if header else arguments, tmp)
        if result.returncode != 0 and header is not None:
            alone = _run_compiler(arguments, tmp)
            if alone.returncode == 0:
                warnings.warn(
                    f"featgraph compiled {target.name} without its precompiled headers {header.parent}, which "
                    f"{compiler} could not use ({result.stderr.strip()[-300:]}); they are built again next time",
                    stacklevel=3,
                )
                _checked_headers[header.parent] = None
                with writing(directory):
                    header.with_name(f"{header.name}.stamp").unlink(missing_ok=True)
            result = alone
        if result.returncode != 0:
            raise CompileError(f"C++ compilation failed ({compiler}):\n{result.stderr[-4000:]}")
        with writing(directory):
            data = (tmp / target.name).read_bytes()
            if not data:
                raise CompileError(f"C++ compilation failed ({compiler}): it wrote an empty library")
            stamp = tmp / "stamp"
            stamp.write_bytes(_fingerprint(data))
            os.replace(tmp / target.name, target)
            os.replace(stamp, target.with_suffix(".stamp"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def build(source: str) -> Path:
    """The compiled library for ``source``: from the cache when it matches its stamp, else compiled (with a
    warning when a damaged library is replaced)."""
    target = library_path(source)
    if _defect(target) is None:
        return target
    with _build_lock(target):
        defect = _defect(target)  # another process may have built it while this one waited
        if defect is None:
            return target
        if defect != MISSING:
            warnings.warn(f"featgraph is rebuilding the kernel library {target}: {defect}", stacklevel=2)
        _compile(source, target)
    return target


@cache
def load(source: str) -> ctypes._CFuncPtr:
    """The ``run`` entry point of the kernel compiled from ``source`` (built or taken from the cache)."""
    library = ctypes.CDLL(str(build(source)))
    run = library.run
    run.restype = None
    run.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64)]
    return run


def launch(run: ctypes._CFuncPtr, pointers: Sequence[torch.Tensor | None], scalars: Sequence[int]) -> None:
    """Call a compiled ``run`` entry point with tensor data pointers (None for null) and int64 scalars."""
    ptrs = (ctypes.c_void_p * len(pointers))(*[None if t is None else t.data_ptr() for t in pointers])
    ints = (ctypes.c_int64 * len(scalars))(*scalars)
    run(ptrs, ints)
