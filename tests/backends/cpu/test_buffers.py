"""The output pool never hands out memory a live tensor uses, reuses what is free, and bounds what it keeps."""

from __future__ import annotations

import gc
import mmap
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

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


def test_small_requests_come_from_torch_and_every_dtype_is_pooled() -> None:
    pool = BufferPool(max_free_bytes=64 * MIB, min_bytes=MIB)
    small = pool.empty((4, 4), torch.float32)
    assert small.shape == (4, 4) and pool.free_bytes == 0 and not pool._buffers
    for dtype in (torch.bfloat16, torch.float16, torch.int32, torch.bool, torch.complex64):
        t = pool.empty((1024, 1025), dtype)  # at least the pool's 1 MiB in every dtype
        assert t.dtype == dtype and t.shape == (1024, 1025) and t.is_contiguous()
        t.fill_(1)  # every element writable
        assert bool((t == 1).all())
        address = t.data_ptr()
        del t
        again = pool.empty((1024, 1025), dtype)
        assert again.data_ptr() == address
        del again


def test_by_default_only_requests_above_glibcs_mmap_threshold_are_pooled() -> None:
    """Below glibc's largest mmap threshold its heap recycles freed memory, and torch's allocations share it, so a
    kept buffer would only wait: the default pool leaves those requests to torch, even one just below it."""
    pool = BufferPool(max_free_bytes=256 * MIB)  # keeps memory, no huge pages: whatever it takes, it keeps
    below = pool.empty((buffers.MMAP_THRESHOLD_MAX // 4 - 1,), torch.float32)
    assert not pool._buffers and below.numel() == buffers.MMAP_THRESHOLD_MAX // 4 - 1
    at = pool.empty((buffers.MMAP_THRESHOLD_MAX // 4,), torch.float32)
    address = at.data_ptr()
    del at
    assert pool.free_bytes >= buffers.MMAP_THRESHOLD_MAX  # kept for the next request of its size
    assert pool.empty((buffers.MMAP_THRESHOLD_MAX // 4,), torch.float32).data_ptr() == address


@pytest.mark.parametrize("huge_pages", [False, True])
def test_a_zero_bound_keeps_nothing(huge_pages: bool) -> None:
    """Nothing is kept: each large request gets fresh memory (2 MiB-aligned huge pages where asked for and the
    request is above glibc's largest mmap threshold), released when its tensor dies."""
    off = BufferPool(max_free_bytes=0, min_bytes=MIB, huge_pages=huge_pages)
    for shape in ((512, 1024), (1024, 1024), (3, 1025, 1023), (8 * 1024 + 1, 1024)):
        a, b = off.empty(shape, torch.float32), off.empty(shape, torch.float32)
        assert not _overlaps(a, b) and a.shape == shape and not off._buffers
        a.fill_(2.0)
        b.fill_(3.0)
        assert bool((a == 2.0).all()) and bool((b == 3.0).all())
        if huge_pages and a.numel() * 4 >= buffers.MMAP_THRESHOLD_MAX:
            assert a.data_ptr() % buffers.HUGE_PAGE == 0 and b.data_ptr() % buffers.HUGE_PAGE == 0


def _mapped(address: int) -> bool:
    """Whether ``address`` lies in one of this process's mappings (``/proc/self/maps``)."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        low, high = (int(bound, 16) for bound in line.split()[0].split("-"))
        if low <= address < high:
            return True
    return False


def test_keeping_huge_page_outputs_is_read_from_the_environment(monkeypatch):
    for value, keep in (("1", True), ("0", False), ("", False)):
        monkeypatch.setenv("FEATGRAPH_POOL_HUGE", value)
        assert buffers._keep_huge_from_env() is keep
    monkeypatch.delenv("FEATGRAPH_POOL_HUGE")
    assert buffers._keep_huge_from_env() is False
    for value in ("yes", "2", " 1"):
        monkeypatch.setenv("FEATGRAPH_POOL_HUGE", value)
        with pytest.raises(ValueError, match=f"FEATGRAPH_POOL_HUGE must be 0 or 1, got '{value}'"):
            buffers._keep_huge_from_env()


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs Linux's /proc/self/maps")
def test_huge_page_memory_is_aligned_writable_and_unmapped_with_its_last_view() -> None:
    memory = buffers.huge_page_memory(3 * buffers.HUGE_PAGE + 5)
    address = memory.ctypes.data
    assert memory.nbytes == 3 * buffers.HUGE_PAGE + 5 and address % buffers.HUGE_PAGE == 0
    memory[:] = 7
    view = torch.from_numpy(memory[10:20])
    del memory
    gc.collect()
    assert _mapped(address) and bool((view == 7).all())
    del view
    gc.collect()
    assert not _mapped(address)


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs Linux's /proc/self/maps")
@pytest.mark.parametrize("keep_huge", [False, True])
def test_huge_page_outputs_go_back_to_the_system_unless_kept(keep_huge: bool) -> None:
    """With huge pages, an output above glibc's largest mmap threshold is fresh, 2 MiB-aligned memory that is
    unmapped when its tensor dies (a kept one would add to the peak while it waited); with ``keep_huge`` the
    next request of its size reuses it. Smaller outputs are recycled either way."""
    pool = BufferPool(max_free_bytes=256 * MIB, min_bytes=MIB, huge_pages=True, keep_huge=keep_huge)
    large = (buffers.MMAP_THRESHOLD_MAX // 4 // 1000 + 1, 1000)
    small = (2 * MIB // 4 // 1000, 1000)
    for shape, recycled in ((large, keep_huge), (small, True)):
        t = pool.empty(shape, torch.float32).fill_(5.0)
        address = t.data_ptr()
        assert bool((t == 5.0).all())
        if shape is large:
            assert address % buffers.HUGE_PAGE < buffers.ALIGNMENT
        del t
        gc.collect()
        assert (pool.free_bytes > 0) == recycled
        if shape is large:
            assert _mapped(address) == keep_huge
        again = pool.empty(shape, torch.float32)
        if recycled:  # (a fresh mapping may land where the unmapped one was)
            assert again.data_ptr() == address
        del again


def test_huge_pages_are_read_from_the_system_setting(tmp_path) -> None:
    setting = tmp_path / "enabled"
    for mode, available in (("always [madvise] never", True), ("[always] madvise never", True),
                            ("always madvise [never]", False)):  # fmt: skip
        setting.write_text(mode + "\n")
        assert buffers.huge_pages_available(setting) == (available and hasattr(mmap, "MADV_HUGEPAGE"))
    assert not buffers.huge_pages_available(tmp_path / "missing")


def test_the_bound_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEATGRAPH_POOL_MB", "3")
    assert buffers._pool_bytes_from_env(128) == 3 * MIB
    monkeypatch.setenv("FEATGRAPH_POOL_MB", "")
    assert buffers._pool_bytes_from_env(buffers.DEFAULT_POOL_MB) == buffers.DEFAULT_POOL_MB * MIB
    assert buffers._pool_bytes_from_env(0) == 0
    for value in ("lots", "-1", "inf", "nan"):  # int(inf) and int(nan) would fail without naming the setting
        monkeypatch.setenv("FEATGRAPH_POOL_MB", value)
        with pytest.raises(ValueError, match=f"FEATGRAPH_POOL_MB must be a .*number of MiB.*, got '{value}'"):
            buffers._pool_bytes_from_env(128)


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


@pytest.mark.parametrize("passed_over", [0, 1, 2, 3, 5])
def test_a_free_buffer_goes_back_once_more_than_max_idle_requests_passed_it_over(passed_over: int) -> None:
    """A free buffer serves a request of its size while at most ``max_idle_requests`` others have passed it
    over; after more it has gone back to the system (a buffer waiting long for its next request only adds to
    the peak)."""
    pool = BufferPool(max_free_bytes=64 * MIB, min_bytes=MIB, max_idle_requests=2)
    waiting = pool.empty((2 * 256, 1024), torch.float32)  # 2 MiB
    (buffer,) = pool._buffers
    del waiting
    others = [pool.empty((5 * 256 + n, 1024), torch.float32) for n in range(passed_over)]  # 5 MiB: no fit
    again = pool.empty((2 * 256, 1024), torch.float32)
    kept = any(b is buffer for b in pool._buffers)
    assert kept == (passed_over <= 2) and len(pool._buffers) == len(others) + 1
    assert not buffer.free if kept else again.numel() == 2 * 256 * 1024  # taken again, or a new one serves
    unbounded = BufferPool(max_free_bytes=64 * MIB, min_bytes=MIB, max_idle_requests=None)
    waiting = unbounded.empty((2 * 256, 1024), torch.float32)
    (buffer,) = unbounded._buffers
    del waiting
    others += [unbounded.empty((5 * 256 + n, 1024), torch.float32) for n in range(passed_over)]
    again = unbounded.empty((2 * 256, 1024), torch.float32)
    assert any(b is buffer for b in unbounded._buffers) and not buffer.free


@settings(max_examples=40, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from([1, 100, 300, 700, 1500, 9000]),  # rows of 1,000: 4 KB to past glibc's mmap threshold
            st.sampled_from([torch.float32, torch.bfloat16, torch.int64, torch.bool]),
        ),
        min_size=1,
        max_size=12,
    ),
    huge_pages=st.booleans(),
    keep_huge=st.booleans(),
    max_idle=st.one_of(st.none(), st.integers(0, 3)),
    bound_mib=st.sampled_from([0, 3, 64]),
)
def test_property_live_tensors_keep_their_contents_whatever_the_pools_settings(
    steps, huge_pages, keep_huge, max_idle, bound_mib
):
    """A random run of requests (sizes from far below the pool's floor to past glibc's mmap threshold, where
    huge pages back them, several dtypes)
    with tensors dying at random: every live tensor keeps exactly what was written to it (so no two share
    memory), has the shape and dtype asked for, and the free memory kept stays within the bound."""
    pool = BufferPool(
        max_free_bytes=bound_mib * MIB,
        min_bytes=MIB,
        huge_pages=huge_pages,
        max_idle_requests=max_idle,
        keep_huge=keep_huge,
    )
    live: list[tuple[torch.Tensor, int]] = []
    for n, (rows, dtype) in enumerate(steps):
        t = pool.empty((rows, 1000), dtype)
        assert t.shape == (rows, 1000) and t.dtype == dtype and t.is_contiguous()
        t.fill_(n % 2 if dtype == torch.bool else n)
        live.append((t, n))
        if n % 3 == 2:
            del live[n % len(live)]  # a tensor dies: its buffer is free
            t = None
        for tensor, value in live:
            expected = value % 2 if tensor.dtype == torch.bool else value
            assert bool((tensor == expected).all())
        assert pool.free_bytes <= pool.max_free_bytes + 9000 * 1000 * 8 + MIB


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: BufferPool(max_free_bytes=-1), "max_free_bytes must be a whole number of bytes >= 0, got -1"),
        (lambda: BufferPool(max_free_bytes=1.5), "max_free_bytes must be a whole number of bytes >= 0, got 1.5"),
        (lambda: BufferPool(0, min_bytes=-2), "min_bytes must be a whole number of bytes >= 0, got -2"),
        (lambda: BufferPool(0, max_idle_requests=-1), "max_idle_requests must be None or a whole number >= 0"),
        (lambda: BufferPool(0, max_idle_requests=True), "max_idle_requests must be None or a whole number >= 0"),
        (lambda: BufferPool(0, huge_pages=1), "huge_pages must be True or False, got 1"),
        (lambda: BufferPool(0, keep_huge="yes"), "keep_huge must be True or False, got 'yes'"),
        (lambda: buffers.huge_page_memory(-5), "nbytes must be a whole number of bytes >= 0, got -5"),
        (lambda: buffers.huge_page_memory(2.0), "nbytes must be a whole number of bytes >= 0, got 2.0"),
    ],
)
def test_bad_pool_settings_are_named(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_huge_page_memory_of_no_bytes_is_empty():
    assert buffers.huge_page_memory(0).nbytes == 0
