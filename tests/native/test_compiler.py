import ctypes
import multiprocessing
import os
import tempfile
import time
import warnings
from pathlib import Path

import pytest
import torch

import featgraph as fg
from featgraph import te
from featgraph.native import compiler, toolchain
from featgraph.templates.kernel import Kernel

SOURCE = '#include <cstdint>\nextern "C" void run(void** p, const int64_t* a) {{ ((int64_t*)p[0])[0] = a[0] * {k}; }}\n'
N, D = 40, 6


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FEATGRAPH_CACHE_DIR", str(tmp_path))
    compiler.load.cache_clear()
    yield tmp_path
    compiler.load.cache_clear()


@pytest.fixture
def fresh_toolchain(monkeypatch):
    """``cxx_compiler`` and ``cxx_version`` are cached per process: look the compiler up again in this test
    and again after it (with the environment restored)."""
    toolchain.cxx_compiler.cache_clear()
    toolchain.cxx_version.cache_clear()
    yield
    toolchain.cxx_compiler.cache_clear()
    toolchain.cxx_version.cache_clear()


def call(run, value: int) -> int:
    box = (ctypes.c_int64 * 1)(0)
    run((ctypes.c_void_p * 1)(ctypes.addressof(box)), (ctypes.c_int64 * 1)(value))
    return box[0]


def copy_sum_case(seed: int = 0) -> tuple[Kernel, torch.Tensor, torch.Tensor]:
    """A copy-u-sum SpMM, its input and the dense reference output ``A @ x``."""
    gen = torch.Generator().manual_seed(seed)
    src, dst = torch.randint(0, N, (2, 300), generator=gen)
    XV = te.placeholder((N, D), name="XV")
    kernel = fg.spmm(fg.Graph(src, dst, N), lambda s, t, e: te.compute((D,), lambda i: XV[s, i]), "sum")
    x = torch.randn(N, D, generator=gen)
    adjacency = torch.zeros(N, N).index_put_((dst, src), torch.ones(src.numel()), accumulate=True)
    return kernel, x, adjacency @ x


def replace_bytes(path: Path, data: bytes) -> None:
    """Give ``path`` new contents in a new file: a library this process has mapped must never be truncated
    in place (its next call would die of SIGBUS)."""
    fresh = path.with_name(path.name + ".new")
    fresh.write_bytes(data)
    os.replace(fresh, path)


def refuses_writes(directory: Path) -> bool:
    try:
        os.rmdir(tempfile.mkdtemp(dir=directory))
    except OSError:
        return True
    return False


def test_compiles_once_into_the_cache_dir_and_reuses_it(cache):
    source = SOURCE.format(k=3)
    path = compiler.build(source)
    assert path.parent == cache and path.exists()
    stamp = path.stat().st_mtime_ns
    assert compiler.build(source) == path and path.stat().st_mtime_ns == stamp
    assert call(compiler.load(source), 7) == 21
    assert compiler.library_path(SOURCE.format(k=4)) != path
    assert not [p for p in cache.iterdir() if p.name.startswith(".build-")]  # no temporary left behind


CORRUPTIONS = {
    "truncated": lambda data: data[: len(data) // 2],
    "empty": lambda data: b"",
    "garbage": lambda data: bytes(255 - b for b in data),  # the same size, other bytes
}


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_a_damaged_library_is_rebuilt_with_a_warning_and_computes_correctly(tmp_path, monkeypatch, corruption):
    """Loading a truncated library kills the process (SIGBUS) and an empty or garbage one fails to load on
    every run: each is rebuilt before it is loaded. The kernel's source comes from a first cache directory,
    so the damaged library is one this process has never mapped (a path it had loaded would be served
    from memory rather than from the rebuilt file)."""
    monkeypatch.setenv("FEATGRAPH_CACHE_DIR", str(tmp_path / "first"))
    compiler.load.cache_clear()
    source = copy_sum_case()[0].source
    monkeypatch.setenv("FEATGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    library = compiler.build(source)
    replace_bytes(library, CORRUPTIONS[corruption](library.read_bytes()))
    reason = "SHA-256" if corruption == "garbage" else "bytes, its stamp says"
    with pytest.warns(UserWarning, match=f"rebuilding the kernel library {library}: .*{reason}"):
        assert compiler.build(source) == library
    compiler.load.cache_clear()
    kernel, x, expected = copy_sum_case()
    torch.testing.assert_close(kernel(XV=x), expected)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert compiler.build(source) == library  # verified, not rebuilt again
    compiler.load.cache_clear()


def test_a_library_without_its_stamp_is_rebuilt(cache):
    """A build killed after moving its library into place but before writing the stamp, or a partial file
    at the library's path: not trusted, rebuilt."""
    source = SOURCE.format(k=5)
    library = compiler.build(source)
    data = library.read_bytes()
    library.with_suffix(".stamp").unlink()
    replace_bytes(library, data[:1000])
    with pytest.warns(UserWarning, match="no readable stamp"):
        compiler.build(source)
    assert library.read_bytes() == data
    assert call(compiler.load(source), 3) == 15


def test_builds_left_by_a_killed_compile_are_removed(cache):
    dead = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1  # no process has this id
    old = time.time() - 2 * compiler.STALE_BUILD_S
    entries = {
        "stale": cache / f".build-{dead}-k1ll3d",
        "unnamed owner": cache / ".build-abc123",
        "stale module": cache / f".build-{dead}-w0rd.tmp",
        "recent": cache / f".build-{dead}-busy",
        "owner alive": cache / f".build-{os.getpid()}-slow",
    }
    for name, path in entries.items():
        if path.suffix == ".tmp":
            path.write_text("def run(")
        else:
            path.mkdir()
            (path / "kernel.cpp").write_text("extern")
            (path / "fg_partial.so").write_bytes(b"\x7fELF")
        if name != "recent":
            os.utime(path, (old, old))
    assert call(compiler.load(SOURCE.format(k=6)), 7) == 42
    assert sorted(p for p in cache.iterdir() if p.name.startswith(".build-")) == sorted(
        [entries["recent"], entries["owner alive"]]
    )


def test_a_missing_cache_dir_is_created(tmp_path, monkeypatch):
    nested = tmp_path / "not" / "yet"
    monkeypatch.setenv("FEATGRAPH_CACHE_DIR", str(nested))
    assert compiler.build(SOURCE.format(k=7)).parent == nested


def test_a_cache_dir_that_cannot_be_written_is_named(tmp_path, monkeypatch):
    """No fallback: a directory the user chose that cannot hold kernels is reported, with the variable that
    chooses another. (Permissions do not stop root, so as root a sysfs directory plays the part.)"""
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    read_only.chmod(0o555)
    if not refuses_writes(read_only):
        read_only = Path("/sys/kernel")
        if not read_only.is_dir() or not refuses_writes(read_only):
            pytest.skip("no directory here refuses this user's writes")
    monkeypatch.setenv("FEATGRAPH_CACHE_DIR", str(read_only))
    with pytest.raises(compiler.CacheDirError, match=f"{read_only} .*FEATGRAPH_CACHE_DIR"):
        compiler.build(SOURCE.format(k=8))
    file = tmp_path / "file"
    file.write_text("")
    monkeypatch.setenv("FEATGRAPH_CACHE_DIR", str(file))
    with pytest.raises(compiler.CacheDirError, match=f"{file} .*FEATGRAPH_CACHE_DIR"):
        compiler.build(SOURCE.format(k=8))


def test_a_read_only_cache_serves_the_libraries_it_holds(cache):
    """Loading a verified library writes nothing (no lock, no temporary), so a cache that cannot be written
    still serves what it holds."""
    source = SOURCE.format(k=9)
    compiler.build(source)
    snapshot = sorted((p.name, p.stat().st_mtime_ns) for p in cache.iterdir()), cache.stat().st_mtime_ns
    cache.chmod(0o555)
    try:
        assert call(compiler.load(source), 2) == 18
    finally:
        cache.chmod(0o755)
    assert (sorted((p.name, p.stat().st_mtime_ns) for p in cache.iterdir()), cache.stat().st_mtime_ns) == snapshot


def _compile_in_child(args):
    cache_dir, k = args
    os.environ["FEATGRAPH_CACHE_DIR"] = cache_dir
    compiler.load.cache_clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call(compiler.load(SOURCE.format(k=k)), 2)
    return result, [str(w.message) for w in caught]


def test_concurrent_processes_compiling_one_kernel_all_succeed(cache):
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        results = pool.map(_compile_in_child, [(str(cache), 5)] * 3)
    assert results == [(10, [])] * 3  # none saw another's library half-installed
    (library,) = cache.glob("*.so")
    assert compiler._defect(library) is None
    assert not [p for p in cache.iterdir() if p.name.startswith(".build-")]


def test_compile_error_shows_compiler_output(cache):
    with pytest.raises(compiler.CompileError, match="C\\+\\+ compilation failed"):
        compiler.build("this is not C++")


@pytest.mark.parametrize(
    ("cxx", "message"),
    [(None, "none was found on PATH: install g\\+\\+"), ("/opt/nowhere/g++", "\\$CXX is '/opt/nowhere/g\\+\\+'")],
)
def test_missing_compiler_says_what_to_install(cache, tmp_path, monkeypatch, fresh_toolchain, cxx, message):
    monkeypatch.setenv("PATH", str(tmp_path / "no-compilers"))
    if cxx is None:
        monkeypatch.delenv("CXX", raising=False)
    else:
        monkeypatch.setenv("CXX", cxx)
    with pytest.raises(compiler.CompilerNotFoundError, match=message):
        compiler.build(SOURCE.format(k=11))


def test_toolchain_finds_a_compiler():
    assert toolchain.cxx_compiler() is not None


def test_the_standard_headers_are_precompiled_once_and_put_before_every_source(cache, monkeypatch):
    """The first build precompiles ``cpp/standard.h`` into the cache (with its stamp); every compile then puts
    it first (``-include``), and a kernel built so computes what one built without it does."""
    commands = []
    run = compiler._run_compiler

    def recorded(arguments, cwd):
        commands.append(arguments)
        return run(arguments, cwd)

    monkeypatch.setattr(compiler, "_run_compiler", recorded)
    compiler._checked_headers.clear()
    kernel, x, expected = copy_sum_case(seed=4)
    torch.testing.assert_close(kernel(XV=x), expected)
    header = compiler.precompiled_header()
    assert header is not None and header.parent.parent == cache
    assert compiler._defect(header.with_name(header.name + ".gch")) is None
    assert [c[:2] for c in commands].count(["-x", "c++-header"]) == 1  # once, for every kernel after it
    built = [c for c in commands if "kernel.cpp" in c]
    assert built and all(c[:2] == ["-include", str(header)] for c in built)
    assert call(compiler.load(SOURCE.format(k=12)), 3) == 36
    assert [c[:2] for c in commands].count(["-x", "c++-header"]) == 1


def test_precompiled_headers_the_compiler_cannot_use_are_left_out_with_a_warning_and_built_again(cache):
    """A damaged precompiled header makes the compiler fail: the source compiles again without it (a warning
    says so), this process stops using it, and the next one (here: a fresh check) rebuilds it."""
    compiler._checked_headers.clear()
    header = compiler.precompiled_header()
    compiled = header.with_name(header.name + ".gch")
    replace_bytes(compiled, compiled.read_bytes()[:1000])
    with pytest.warns(UserWarning, match="without its precompiled headers"):
        assert call(compiler.load(SOURCE.format(k=13)), 2) == 26
    assert compiler.precompiled_header() is None  # not again in this process
    compiler._checked_headers.clear()
    assert compiler.precompiled_header() == header and compiler._defect(compiled) is None
    assert call(compiler.load(SOURCE.format(k=14)), 2) == 28


def test_a_compiler_that_cannot_precompile_still_builds_every_source(cache, monkeypatch):
    compiler._checked_headers.clear()
    monkeypatch.setattr(compiler, "STANDARD_HEADERS", cache / "missing" / "standard.h")
    assert compiler.precompiled_header() is None
    assert call(compiler.load(SOURCE.format(k=15)), 2) == 30
