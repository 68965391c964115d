"""The Triton module cache: a damaged module file is written again before it is imported."""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path

import pytest
import torch

import featgraph as fg
from featgraph import te
from featgraph.backends.gpu import loader
from featgraph.native import compiler
from featgraph.templates.kernel import Kernel

N, D = 30, 5


def copy_sum(gpu: torch.device, seed: int = 0) -> tuple[Kernel, torch.Tensor, torch.Tensor]:
    """A GPU copy-u-sum SpMM, its input and the dense reference output ``A @ x``."""
    gen = torch.Generator().manual_seed(seed)
    src, dst = torch.randint(0, N, (2, 200), generator=gen)
    XV = te.placeholder((N, D), name="XV")
    graph = fg.Graph(src.to(gpu), dst.to(gpu), N)
    kernel = fg.spmm(graph, lambda s, t, e: te.compute((D,), lambda i: XV[s, i]), "sum", target="gpu")
    x = torch.randn(N, D, generator=gen)
    adjacency = torch.zeros(N, N).index_put_((dst, src), torch.ones(src.numel()), accumulate=True)
    return kernel, x.to(gpu), (adjacency @ x).to(gpu)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FEATGRAPH_CACHE_DIR", str(tmp_path))
    loader.load.cache_clear()
    yield tmp_path
    loader.load.cache_clear()


def test_a_truncated_module_is_rewritten_with_a_warning_and_computes_correctly(gpu, cache):
    path = loader.module_path(copy_sum(gpu)[0].source)
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    loader.load.cache_clear()
    with pytest.warns(UserWarning, match=f"rewriting the kernel module {path}"):
        kernel, x, expected = copy_sum(gpu)
    assert path.read_text() == text
    torch.testing.assert_close(kernel(XV=x), expected)
    loader.load.cache_clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        copy_sum(gpu)  # intact now: imported as it is


def test_temporaries_of_killed_writers_are_removed(gpu, cache):
    directory = cache / "triton"
    directory.mkdir()
    dead = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1  # no process has this id
    stale = directory / f"{compiler.BUILD_PREFIX}{dead}-x.tmp"
    stale.write_text("def run(")
    old = time.time() - 2 * compiler.STALE_BUILD_S
    os.utime(stale, (old, old))
    copy_sum(gpu)
    assert not stale.exists() and [p.suffix for p in directory.iterdir()] == [".py"]


def test_the_interpreter_takes_runtime_scalars_as_loop_bounds(interpreted_gpu):
    """A loop bound reduced in the kernel and one passed as an argument, as the templates' loops have; up to
    Triton 3.6 the interpreter fails both under NumPy 2.4 and later unless ``interpreter_scalar_index`` ran."""
    triton = pytest.importorskip("triton")
    tl = pytest.importorskip("triton.language")

    @triton.jit
    def count_steps(counts, out, n, BLOCK: tl.constexpr):
        lanes = tl.arange(0, BLOCK)
        total = tl.sum(tl.load(counts + lanes, mask=lanes < n, other=0), 0)
        steps = 0
        for _ in range(0, total, 2):
            steps += 1
        for _ in range(0, n):
            steps += 10
        tl.store(out, steps)

    loader.interpreter_scalar_index()
    out = torch.zeros(1, dtype=torch.int32)
    count_steps[(1,)](torch.tensor([3, 4, 0], dtype=torch.int32), out, 3, BLOCK=4)
    assert out.item() == 4 + 30
