import pytest


@pytest.fixture(autouse=True)
def tune_dir(tmp_path, monkeypatch):
    """Every tuning test gets an empty result store of its own."""
    monkeypatch.setenv("FEATGRAPH_TUNE_DIR", str(tmp_path / "tuning"))
    return tmp_path / "tuning"
