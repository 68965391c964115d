import pytest
import torch

import featgraph as fg
from featgraph import te
from featgraph.templates import edge_sum, params
from featgraph.templates.params import SDDMMParams, SpMMParams, default_num_partitions, default_write_buckets


def test_l2_override_and_default(monkeypatch):
    params.l2_cache_bytes.cache_clear()
    monkeypatch.setenv("FEATGRAPH_L2_BYTES", "1048576")
    assert params.l2_cache_bytes() == 1048576
    params.l2_cache_bytes.cache_clear()
    monkeypatch.delenv("FEATGRAPH_L2_BYTES")
    assert params.l2_cache_bytes() == params.cache_sizes().get(2, params.DEFAULT_L2_BYTES)
    params.l2_cache_bytes.cache_clear()


@pytest.mark.parametrize("value", ["0", "-4096", "1M", "lots"])
def test_an_l2_override_that_is_no_size_is_reported_and_ignored(monkeypatch, value):
    params.l2_cache_bytes.cache_clear()
    monkeypatch.setenv("FEATGRAPH_L2_BYTES", value)
    with pytest.warns(UserWarning, match=f"FEATGRAPH_L2_BYTES='{value}' is not a positive number of bytes"):
        assert params.l2_cache_bytes() == params.cache_sizes().get(2, params.DEFAULT_L2_BYTES)
    assert default_num_partitions(2**30, avg_degree=48) >= 1  # the heuristic divides by it
    params.l2_cache_bytes.cache_clear()


def test_cache_sizes_read_each_data_level_and_skip_instruction_caches(tmp_path):
    for name, level, kind, size in [
        ("index0", 1, "Data", "48K"), ("index1", 1, "Instruction", "32K"),
        ("index2", 2, "Unified", "2048K"), ("index3", 3, "Unified", "266240K"), ("index4", 4, "Unified", ""),
        ("index5", 5, "Unified", "lotsK"), ("index6", 6, "Unified", "0K"),
    ]:  # fmt: skip
        folder = tmp_path / name
        folder.mkdir()
        for field, value in (("level", level), ("type", kind), ("size", size)):
            (folder / field).write_text(f"{value}\n")
    assert params.cache_sizes(tmp_path) == {1: 48 * 1024, 2: 2048 * 1024, 3: 266240 * 1024}
    assert params.cache_sizes(tmp_path / "missing") == {}


@pytest.mark.parametrize(
    "caches",
    [{2: 2 * 2**20, 3: 266240 * 1024}, {2: 2**20, 3: 32 * 2**20}, {}],
    ids=["large-llc", "32MiB-llc", "unreported"],
)
def test_partitions_of_16mib_one_per_twelve_edges_of_a_row(monkeypatch, caches):
    monkeypatch.setattr(params, "cache_sizes", lambda: caches)
    assert default_num_partitions(16 * 2**20, avg_degree=48) == 1  # fits one segment
    assert default_num_partitions(24 * 2**20, avg_degree=48) == 2  # two segments
    assert default_num_partitions(49 * 2**20, avg_degree=48) == 4
    assert default_num_partitions(100 * 2**20, avg_degree=30) == 2  # rows of 30: two visits at most
    assert default_num_partitions(100 * 2**20, avg_degree=4) == 1  # short rows: one visit
    assert default_num_partitions(10 * 2**30, avg_degree=1000) == 16


def test_segments_are_half_a_small_last_level_cache(monkeypatch):
    monkeypatch.setattr(params, "cache_sizes", lambda: {1: 32 * 2**10, 2: 2**20, 3: 8 * 2**20})
    assert params.segment_bytes() == 4 * 2**20
    assert default_num_partitions(4 * 2**20, avg_degree=48) == 1
    assert default_num_partitions(12 * 2**20, avg_degree=48) == 3
    assert default_num_partitions(12 * 2**20, avg_degree=24) == 2  # an SpMM visits each row once per segment
    assert default_num_partitions(12 * 2**20) == 3  # an SDDMM's visit costs no accumulator round trip
    assert default_num_partitions(2**30) == 16


@pytest.mark.parametrize(("gathered", "streamed", "order"), [
    (32, 16, "user"), (8 * 64, 64, "user"), (8 * 64 + 1, 64, "csr"), (512, 4, "csr"), (0, 0, "user"),
    (511, 4, "user"), (8 * 12 + 1, 12, "user"),  # the gathered rows dominate, but are too short to pay
])  # fmt: skip
def test_cpu_edges_in_user_order_unless_long_gathered_rows_dominate_then_in_the_csr(gathered, streamed, order):
    assert params.cpu_edge_order(gathered, streamed) == order


def test_write_buckets_of_an_l1_window_for_scattered_outputs_beyond_the_l2(monkeypatch):
    monkeypatch.setattr(params, "l2_cache_bytes", lambda: 2 * 2**20)
    far = 2**20
    assert default_write_buckets(2 * 2**20, far, 4) == 0  # fits the L2
    assert default_write_buckets(6 * 2**20, far, 4) == 6 * 2**20 // params.WRITE_WINDOW_BYTES
    assert default_write_buckets(6 * 2**20, params.WRITE_WINDOW_BYTES, 4) == 0  # writes already near each other
    assert default_write_buckets(10 * 2**30, far, 8) == params.MAX_WRITE_BUCKETS
    assert default_write_buckets(10 * 2**30, far, 16) == 0  # four scores an edge: written directly


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: SpMMParams(num_partitions=0), "num_partitions"),
        (lambda: SpMMParams(num_feature_tiles=0), "num_feature_tiles"),
        (lambda: SpMMParams(row_order="random"), "row_order"),
        (lambda: SDDMMParams(edge_order="random"), "edge_order"),
        (lambda: SDDMMParams(num_feature_tiles=0), "num_feature_tiles"),
        (lambda: SDDMMParams(write_buckets=-1), "write_buckets"),
        (lambda: SpMMParams(num_threads=-1), "num_threads must be an integer from 1 to 4096, got -1"),
        (lambda: SpMMParams(num_threads=0), "num_threads .* got 0"),
        (lambda: SpMMParams(num_threads=2.5), "num_threads .* got 2.5"),
        (lambda: SDDMMParams(num_threads=-1), "num_threads .* got -1"),
        (lambda: SDDMMParams(num_threads=1 << 32), "num_threads .* got 4294967296"),
        (lambda: SDDMMParams(num_threads=True), "num_threads .* got True"),
    ],
)
def test_bad_parameters(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("template", [fg.spmm, fg.sddmm, edge_sum], ids=["spmm", "sddmm", "edge_sum"])
def test_kernels_refuse_a_thread_count_openmp_would_abort_on(template):
    """OpenMP aborts the whole process on a negative thread count (it allocates for 2^64 threads)."""
    g = fg.Graph(torch.tensor([0, 1]), torch.tensor([1, 2]), 3)
    XV = te.placeholder((3, 4), name="XV")

    def copy(src, dst, eid):
        return te.compute((4,), lambda i: XV[src, i])

    reducer = ("sum",) if template is fg.spmm else ()
    with pytest.raises(ValueError, match="num_threads must be an integer from 1"):
        template(g, copy, *reducer, num_threads=-1)
