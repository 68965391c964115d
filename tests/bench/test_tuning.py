import pytest

from featgraph.bench import tuning
from featgraph.datasets import uniform


@pytest.fixture(autouse=True)
def tune_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("FEATGRAPH_TUNE_DIR", str(tmp_path))


@pytest.mark.parametrize("op", tuning.OPS)
def test_a_row_times_default_and_tuned_in_the_same_run(op):
    g = uniform(300, 6, seed=2)
    row = tuning.measure_row(op, "uniform", g, 12, threads=1, repeat=1, budget_s=5)
    assert row.ratio == pytest.approx(row.default_ms / row.tuned_ms)
    assert row.candidates >= 1 and not row.from_cache
    again = tuning.measure_row(op, "uniform", g, 12, threads=1, repeat=1, budget_s=5)
    assert again.from_cache and again.config == row.config
    assert "| uniform | 12 |" in tuning.TABLE.rows([row])


def test_summary_names_the_worst_row():
    rows = [
        tuning.Row("gcn", "uniform", 32, 1.0, 1.0, 1.0, "defaults", 5, False),
        tuning.Row("mlp", "rand100k", 128, 2.0, 1.0, 2.0, "split=8", 5, False),
    ]
    assert "NOT met" in tuning.summary(rows) and "mlp rand100k d=128" in tuning.summary(rows)
    assert ": met" in tuning.summary(rows[:1])
