import pytest

from featgraph.templates import params
from featgraph.templates.params import SDDMMParams, SpMMParams, default_num_partitions, default_write_buckets


def test_l2_override_and_default(monkeypatch):
    params.l2_cache_bytes.cache_clear()
    monkeypatch.setenv("FEATGRAPH_L2_BYTES", "1048576")
    assert params.l2_cache_bytes() == 1048576
    params.l2_cache_bytes.cache_clear()
    monkeypatch.delenv("FEATGRAPH_L2_BYTES")
    assert params.l2_cache_bytes() == params.cache_sizes().get(2, params.DEFAULT_L2_BYTES)
    params.l2_cache_bytes.cache_clear()


def test_cache_sizes_read_each_data_level_and_skip_instruction_caches(tmp_path):
    for name, level, kind, size in [
        ("index0", 1, "Data", "48K"), ("index1", 1, "Instruction", "32K"),
        ("index2", 2, "Unified", "2048K"), ("index3", 3, "Unified", "266240K"), ("index4", 4, "Unified", ""),
    ]:  # fmt: skip
        folder = tmp_path / name
        folder.mkdir()
        for field, value in (("level", level), ("type", kind), ("size", size)):
            (folder / field).write_text(f"{value}\n")
    assert params.cache_sizes(tmp_path) == {1: 48 * 1024, 2: 2048 * 1024, 3: 266240 * 1024}
    assert params.cache_sizes(tmp_path / "missing") == {}


def test_partitions_of_two_l2s_one_per_twelve_edges_of_a_row(monkeypatch):
    monkeypatch.setattr(params, "l2_cache_bytes", lambda: 2 * 2**20)
    assert default_num_partitions(4 * 2**20, avg_degree=48) == 1  # fits two L2s
    assert default_num_partitions(6 * 2**20, avg_degree=48) == 2  # two slices of two L2s
    assert default_num_partitions(100 * 2**20, avg_degree=30) == 2  # rows of 30: two visits at most
    assert default_num_partitions(100 * 2**20, avg_degree=48) == 4
    assert default_num_partitions(100 * 2**20, avg_degree=4) == 1  # short rows: one visit
    assert default_num_partitions(10 * 2**30, avg_degree=1000) == 16


def test_write_buckets_of_an_l1_window_for_scattered_outputs_beyond_the_l2(monkeypatch):
    monkeypatch.setattr(params, "l2_cache_bytes", lambda: 2 * 2**20)
    far = 2**20
    assert default_write_buckets(2 * 2**20, far) == 0  # fits the L2
    assert default_write_buckets(6 * 2**20, far) == 6 * 2**20 // params.WRITE_WINDOW_BYTES
    assert default_write_buckets(6 * 2**20, params.WRITE_WINDOW_BYTES) == 0  # writes already near each other
    assert default_write_buckets(10 * 2**30, far) == params.MAX_WRITE_BUCKETS


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: SpMMParams(num_partitions=0), "num_partitions"),
        (lambda: SpMMParams(num_feature_tiles=0), "num_feature_tiles"),
        (lambda: SpMMParams(row_order="random"), "row_order"),
        (lambda: SDDMMParams(edge_order="random"), "edge_order"),
        (lambda: SDDMMParams(num_feature_tiles=0), "num_feature_tiles"),
        (lambda: SDDMMParams(write_buckets=-1), "write_buckets"),
    ],
)
def test_bad_parameters(make, message):
    with pytest.raises(ValueError, match=message):
        make()
