import multiprocessing
import os

import pytest

from featgraph.backends import toolchain
from featgraph.backends.cpu import compiler

SOURCE = '#include <cstdint>\nextern "C" void run(void** p, const int64_t* a) {{ ((int64_t*)p[0])[0] = a[0] * {k}; }}\n'


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FEATGRAPH_CACHE_DIR", str(tmp_path))
    compiler.load.cache_clear()
    yield tmp_path
    compiler.load.cache_clear()


def call(run, value: int) -> int:
    import ctypes

    box = (ctypes.c_int64 * 1)(0)
    run((ctypes.c_void_p * 1)(ctypes.addressof(box)), (ctypes.c_int64 * 1)(value))
    return box[0]


def test_compiles_once_into_the_cache_dir_and_reuses_it(cache):
    source = SOURCE.format(k=3)
    path = compiler.build(source)
    assert path.parent == cache and path.exists()
    stamp = path.stat().st_mtime_ns
    assert compiler.build(source) == path and path.stat().st_mtime_ns == stamp
    assert call(compiler.load(source), 7) == 21
    assert compiler.library_path(SOURCE.format(k=4)) != path
    assert not [p for p in cache.iterdir() if p.name.startswith(".build-")]  # no temporary left behind


def _compile_in_child(args):
    cache_dir, k = args
    os.environ["FEATGRAPH_CACHE_DIR"] = cache_dir
    compiler.load.cache_clear()
    return call(compiler.load(SOURCE.format(k=k)), 2)


def test_concurrent_processes_compiling_one_kernel_all_succeed(cache):
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        results = pool.map(_compile_in_child, [(str(cache), 5)] * 3)
    assert results == [10, 10, 10]
    assert len([p for p in cache.iterdir() if p.suffix == ".so"]) == 1


def test_compile_error_shows_compiler_output(cache):
    with pytest.raises(compiler.CompileError, match="C\\+\\+ compilation failed"):
        compiler.build("this is not C++")


def test_missing_compiler_says_what_to_install(cache, monkeypatch):
    monkeypatch.setattr(compiler, "cxx_compiler", lambda: None)
    with pytest.raises(compiler.CompilerNotFoundError, match="install g\\+\\+"):
        compiler.build(SOURCE.format(k=11))


def test_toolchain_finds_a_compiler():
    assert toolchain.cxx_compiler() is not None
