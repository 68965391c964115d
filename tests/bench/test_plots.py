import pytest

from featgraph.bench import plots

pytest.importorskip("matplotlib")


def test_heatmap_and_lines_write_png_files(tmp_path):
    heat = plots.heatmap([[1.0, 2.0], [3.0, 4.0]], [1, 2], [1, 4], tmp_path / "h.png", "t", "rows", "cols")
    line = plots.lines({"a": ([1, 2], [3.0, 4.0]), "bound: b": ([1, 2], [1.0, 1.0])}, tmp_path / "l.png", "t", "x", "y")
    bar = plots.bars({"g1": {"a": 2.0, "b": 0.5}, "g2": {"a": 3.0}}, tmp_path / "b.png", "t", "y")
    for path in (heat, line, bar):
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_without_matplotlib_nothing_is_drawn(tmp_path, monkeypatch):
    monkeypatch.setattr(plots, "available", lambda: False)
    assert plots.lines({"a": ([1], [1.0])}, tmp_path / "l.png", "t", "x", "y") is None
    assert not (tmp_path / "l.png").exists()
