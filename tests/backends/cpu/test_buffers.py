"""The output pool never hands out memory a live tensor uses, reuses what is free, and bounds what it keeps."""

from __future__ import annotations

import gc

import pytest
import torch

import featgraph as fg
from featgraph.backends.cpu import buffers
from featgraph.backends.cpu.buffers import BufferPool

MIB = 1024**2


@pytest.fixture
def pool() -> BufferPool:
    return BufferPool(max_free_bytes=8 * MIB, min_bytes=MIB)


def _overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    a_lo, b_lo = a.data_ptr(), b.data_ptr()
    a_hi, b_hi = a_lo + a.numel() * a.element_size(), b_lo + b.numel() * b.element_size()
    return a_lo < b_hi and b_lo < a_hi


def test_live_tensors_never_share_memory(pool: BufferPool) -> None:
    tensors = [pool.empty((512, 1024), torch.float32) for _ in range(4)]
    for n, a in enumerate(tensors):
        for b in tensors[n + 1 :]:
            assert not _overlaps(a, b)


def test_a_dead_tensors_buffer_is_reused(pool: BufferPool) -> None:
    a = pool.empty((512, 1024), torch.float32)
    address = a.data_ptr()
    del a
    gc.collect()
    b = pool.empty((512, 1024), torch.float32)
    assert b.data_ptr() == address
    assert b.data_ptr() % buffers.ALIGNMENT == 0


def test_a_slightly_smaller_request_takes_the_smallest_free_buffer_that_fits() -> None:
    """Mini-batches ask for a slightly different size each step: a free buffer up to ``FIT_SLACK`` larger
    serves, the smallest of them first; a much larger one does not."""
    pool = BufferPool(max_free_bytes=64 * MIB, min_bytes=MIB)
    big, near = pool.empty((16 * 256, 1024), torch.float32), pool.empty((9 * 256, 1024), torch.float32)
    big_address, near_address = big.data_ptr(), near.data_ptr()
    del big, near
    gc.collect()
    smaller = pool.empty((8 * 256, 1024), torch.float32)  # 8 MiB: the 9 MiB buffer serves
    assert smaller.data_ptr() == near_address
    other = pool.empty((4 * 256, 1024), torch.float32)  # 4 MiB: the free 16 MiB buffer is too large
    assert other.data_ptr() != big_address and not _overlaps(other, smaller) and len(pool._buffers) == 3


def test_a_view_keeps_the_buffer_in_use(pool: BufferPool) -> None:
    a = pool.empty((512, 1024), torch.float32)
    a.fill_(7.0)
    tail, alias = a[100:], a.view(-1)
    del a
    gc.collect()
    b = pool.empty((512, 1024), torch.float32).fill_(-1.0)
    assert not _overlaps(b, alias)
    assert torch.all(tail == 7.0) and torch.all(alias == 7.0)


def test_a_tensor_saved_by_autograd_keeps_the_buffer_in_use(pool: BufferPool) -> None:
    weight = torch.randn(1024, requires_grad=True)
    out = pool.empty((512, 1024), torch.float32).normal_()
    expected = out.clone()
    loss = (out * weight).sum()  # autograd saves ``out`` for weight's gradient
    del out
    gc.collect()
    pool.empty((512, 1024), torch.float32).fill_(0.0)
    loss.backward()
    torch.testing.assert_close(weight.grad, expected.sum(0))


def test_zeros_are_zero_in_a_reused_buffer(pool: BufferPool) -> None:
    pool.empty((512, 1024), torch.float64).fill_(3.0)  # dies at once, leaving its buffer dirty
    z = pool.zeros((512, 1024), torch.float64)
    assert z.dtype == torch.float64 and z.shape == (512, 1024)
    assert torch.count_nonzero(z) == 0


def test_free_memory_stays_within_the_bound(pool: BufferPool) -> None:
    for width in range(1, 12):  # a different size class each time: nothing is reused
        pool.empty((width * 256, 1024), torch.float32)
        assert pool.free_bytes <= pool.max_free_bytes + width * MIB + buffers.ALIGNMENT
    pool.release()
    assert pool.free_bytes == 0


def test_small_and_non_numpy_requests_come_from_torch(pool: BufferPool) -> None:
    small = pool.empty((4, 4), torch.float32)
    bf16 = pool.empty((1024, 1024), torch.bfloat16)
    assert small.shape == (4, 4) and bf16.dtype == torch.bfloat16 and bf16.shape == (1024, 1024)
    assert pool.free_bytes == 0 and not pool._buffers


def test_a_zero_bound_turns_the_pool_off() -> None:
    off = BufferPool(max_free_bytes=0, min_bytes=MIB)
    off.empty((512, 1024), torch.float32)
    assert not off._buffers


def test_the_bound_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEATGRAPH_POOL_MB", "3")
    assert buffers._pool_bytes_from_env() == 3 * MIB
    monkeypatch.setenv("FEATGRAPH_POOL_MB", "")
    assert buffers._pool_bytes_from_env() == buffers.DEFAULT_POOL_MB * MIB
    for value in ("lots", "-1", "inf", "nan"):  # int(inf) and int(nan) would fail without naming the setting
        monkeypatch.setenv("FEATGRAPH_POOL_MB", value)
        with pytest.raises(ValueError, match=f"FEATGRAPH_POOL_MB must be a .*number of MiB.*, got '{value}'"):
            buffers._pool_bytes_from_env()


def test_kernel_outputs_from_the_pool_stay_apart_and_correct(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two live SpMM outputs from pooled buffers: each equals the dense reference after the other is made,
    and a dead one's buffer serves the next call."""
    monkeypatch.setattr(buffers, "POOL", BufferPool(max_free_bytes=64 * MIB, min_bytes=1024))
    gen = torch.Generator().manual_seed(0)
    n, d = 300, 17
    src, dst = torch.randint(0, n, (2, 3000), generator=gen)
    g = fg.Graph(src, dst, n)
    dense = torch.zeros(n, n).index_put_((dst, src), torch.ones(3000), accumulate=True)
    kernel = fg.ops.gspmm
    x1, x2 = torch.randn(n, d, generator=gen), torch.randn(n, d, generator=gen)
    y1 = kernel(g, "copy_lhs", "sum", x1, None)
    y2 = kernel(g, "copy_lhs", "sum", x2, None)
    assert not _overlaps(y1, y2)
    torch.testing.assert_close(y1, dense @ x1, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(y2, dense @ x2, rtol=1e-4, atol=1e-4)
    address = y1.data_ptr()
    del y1
    gc.collect()
    y3 = kernel(g, "copy_lhs", "sum", x2, None)
    assert y3.data_ptr() == address
    torch.testing.assert_close(y3, dense @ x2, rtol=1e-4, atol=1e-4)


def test_contiguous_copies_an_expanded_tensor_and_keeps_a_contiguous_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(buffers, "POOL", BufferPool(max_free_bytes=64 * MIB, min_bytes=MIB))
    ones = torch.ones(()).expand(512, 1024)
    copy = buffers.contiguous(ones)
    assert copy.is_contiguous() and torch.equal(copy, torch.ones(512, 1024))
    assert buffers.POOL._buffers  # the copy came from the pool
    dense = torch.randn(3, 5)
    assert buffers.contiguous(dense) is dense
    transposed = torch.randn(5, 3).t()
    torch.testing.assert_close(buffers.contiguous(transposed), transposed)


def test_memory_freed_beyond_the_bound_goes_back_when_its_tensors_die() -> None:
    """The bound holds as tensors die, not only at the next request: freed outputs beyond it are released
    while the rest of the program allocates elsewhere, least recently used first."""
    pool = BufferPool(max_free_bytes=5 * MIB, min_bytes=MIB)
    tensors = [pool.empty((256, 1024), torch.float32) for _ in range(4)]  # 1 MiB each (+ alignment)
    newest = tensors[-1].data_ptr()
    del tensors
    assert pool.free_bytes <= 5 * MIB and len(pool._buffers) == 4  # all four fit under the bound
    more = [pool.empty((1024, 1024), torch.float32) for _ in range(2)]  # 4 MiB each: new buffers
    del more
    assert pool.free_bytes <= 5 * MIB
    kept = [b.memory.ctypes.data for b in pool._buffers]
    assert len(kept) == 1 and pool.free_bytes > 4 * MIB  # the most recently used 4 MiB buffer stayed
    again = pool.empty((256, 1024), torch.float32)
    assert again.data_ptr() != newest  # the 1 MiB buffers went back


def test_a_growing_request_replaces_the_free_buffers_just_too_small_for_it() -> None:
    """A request that changes a little from step to step (a mini-batch's outputs) keeps one buffer, not one per
    size: a new buffer for a larger step replaces the free ones within the fit slack below it, and serves the
    smaller steps after it; a much smaller free buffer stays."""
    pool = BufferPool(max_free_bytes=64 * MIB, min_bytes=MIB)
    small = pool.empty((MIB,), torch.float32)  # 4 MiB: far below the rest, kept
    rows = [4096, 4300, 4500, 4200, 4600, 4150]  # 16 to 18 MiB: within the slack of each other
    for n in rows:
        out = pool.empty((n, 1024), torch.float32)
        del out
        gc.collect()
    del small
    gc.collect()
    sizes = sorted(buffer.memory.nbytes for buffer in pool._buffers)
    assert len(sizes) == 2 and 4 * MIB <= sizes[0] < 5 * MIB and 18 * MIB <= sizes[1] < 19 * MIB
    assert pool.free_bytes == sum(sizes)
