import gzip

import numpy as np
import pytest

from featgraph.datasets.graph_tool_format import MAGIC, read_gt


def write_gt(path, adjacency: list[list[int]], directed: bool, big_endian: bool = False, comment: str = "") -> None:
    """Write a .gt file byte by byte from the format description (independent of the reader)."""
    order = ">" if big_endian else "<"
    n = len(adjacency)
    width = "u1" if n <= 256 else "u2"
    parts = [MAGIC, b"\x01", b"\x01" if big_endian else b"\x00"]
    parts += [np.array([len(comment)], order + "u8").tobytes(), comment.encode()]
    parts += [b"\x01" if directed else b"\x00", np.array([n], order + "u8").tobytes()]
    for nbrs in adjacency:
        parts += [np.array([len(nbrs)], order + "u8").tobytes(), np.array(nbrs, order + width).tobytes()]
    parts.append(b"\x00" * 16)  # property-map section, ignored by the reader
    path.write_bytes(gzip.compress(b"".join(parts)))


@pytest.mark.parametrize("big_endian", [False, True])
def test_reads_what_the_format_describes(tmp_path, big_endian):
    adjacency = [[1, 2], [], [0, 0, 3], []]
    path = tmp_path / "g.gt.gz"
    write_gt(path, adjacency, directed=True, big_endian=big_endian, comment="stats: 4 vertices, 5 edges")
    g = read_gt(path)
    assert g.num_nodes == 4 and g.directed
    assert list(zip(g.src.tolist(), g.dst.tolist(), strict=True)) == [(0, 1), (0, 2), (2, 0), (2, 0), (2, 3)]


def test_wide_ids_use_two_bytes(tmp_path):
    adjacency = [[299] if v == 0 else [] for v in range(300)]
    write_gt(tmp_path / "w.gt.gz", adjacency, directed=False)
    g = read_gt(tmp_path / "w.gt.gz")
    assert g.dst.tolist() == [299] and not g.directed


def test_rejects_bad_magic_and_wrong_counts(tmp_path):
    (tmp_path / "bad.gt").write_bytes(b"not a graph")
    with pytest.raises(ValueError, match="bad magic"):
        read_gt(tmp_path / "bad.gt")
    write_gt(tmp_path / "c.gt.gz", [[1], []], directed=True, comment="stats: 2 vertices, 7 edges")
    with pytest.raises(ValueError, match="header says"):
        read_gt(tmp_path / "c.gt.gz")
