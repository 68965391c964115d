import subprocess
import sys
from pathlib import Path

import featgraph
from featgraph.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_info_reports_versions_and_backends(capsys):
    main(["info"])
    out = capsys.readouterr().out
    assert f"featgraph {featgraph.__version__}" in out
    assert "torch" in out and "cpu" in out and "gpu" in out and "threads" in out


def test_datasets_listing(capsys):
    main(["datasets"])
    assert "cora" in capsys.readouterr().out


def test_python_dash_m_entry_point():
    out = subprocess.run([sys.executable, "-m", "featgraph", "info"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("featgraph ")


def test_readme_opens_with_the_two_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text().splitlines()
    commands = [line.strip() for line in readme if line.startswith("    ") or line.startswith("make ")]
    assert commands[:2] == ["make demo", "make test"]
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_bench_kernels_subcommand(tmp_path, capsys):
    out = tmp_path / "k.json"
    main(["bench", "kernels", "--scale", "0.002", "--dims", "4", "--ops", "gcn", "--repeat", "1", "--json", str(out)])
    assert "| gcn | uniform | 4 | featgraph |" in capsys.readouterr().out
    assert out.exists()
