import pytest

from featgraph.templates import params
from featgraph.templates.params import SDDMMParams, SpMMParams, default_num_partitions


def test_l3_override_and_cap(monkeypatch):
    params.l3_cache_bytes.cache_clear()
    monkeypatch.setenv("FEATGRAPH_L3_BYTES", "1048576")
    assert params.l3_cache_bytes() == 1048576
    params.l3_cache_bytes.cache_clear()
    monkeypatch.delenv("FEATGRAPH_L3_BYTES")
    assert 0 < params.l3_cache_bytes() <= params.CACHE_SLICE_CAP
    params.l3_cache_bytes.cache_clear()


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


def test_partitions_only_for_features_beyond_the_cache_and_long_rows(monkeypatch):
    monkeypatch.setattr(params, "l3_cache_bytes", lambda: 32 * 2**20)
    assert default_num_partitions(10 * 2**20, avg_degree=30) == 1
    assert default_num_partitions(100 * 2**20, avg_degree=30) == 2
    assert default_num_partitions(100 * 2**20, avg_degree=4) == 1
    assert default_num_partitions(10 * 2**30, avg_degree=30) == 16


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: SpMMParams(num_partitions=0), "num_partitions"),
        (lambda: SpMMParams(num_feature_tiles=0), "num_feature_tiles"),
        (lambda: SpMMParams(row_order="random"), "row_order"),
        (lambda: SDDMMParams(edge_order="random"), "edge_order"),
        (lambda: SDDMMParams(num_feature_tiles=0), "num_feature_tiles"),
    ],
)
def test_bad_parameters(make, message):
    with pytest.raises(ValueError, match=message):
        make()
