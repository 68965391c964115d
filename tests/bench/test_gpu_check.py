import json
import sys

import pytest
import torch

from featgraph.bench import gpu_check
from featgraph.cli import main


def test_each_step_runs_the_suite_or_bench_it_names(tmp_path):
    check = gpu_check.Check(tmp_path, dry_run=False, budget=480)
    tests = gpu_check.step_command("tests", check)
    assert tests[1:3] == ["-m", "pytest"] and tests[tests.index("-m", 3) + 1] == "gpu" and tests[-1] == "tests"
    kernels = gpu_check.step_command("kernels", check)
    assert kernels[3:5] == ["bench", "gpu"] and "--scale" not in kernels  # the paper's sizes, every graph
    assert kernels[kernels.index("--dims") + 1 :][:5] == ["32", "64", "128", "256", "512"]
    train = gpu_check.step_command("train", check)
    assert train[train.index("--device") + 1] == "cuda" and "reddit-sized" in train[train.index("--graphs") + 1 :]
    assert "--compile" in gpu_check.step_command("compile", check)
    dry = gpu_check.Check(tmp_path, dry_run=True, budget=480)
    assert gpu_check.step_command("train", dry)[train.index("--device") + 1] == "cpu"
    assert "--scale" in gpu_check.step_command("layers", dry)
    profile = gpu_check.step_command("profile", check)
    assert profile[3:5] == ["bench", "profile"] and profile[profile.index("--device") + 1] == "cuda"
    assert "--scale" not in profile and "--scale" in gpu_check.step_command("profile", dry)
    with pytest.raises(ValueError, match="no step named 'bogus'"):
        gpu_check.step_command("bogus", check)


def test_a_step_past_its_limit_is_killed_with_its_children(tmp_path, monkeypatch):
    sleeper = [sys.executable, "-c", "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
               "'import time; time.sleep(60)']); print('started', flush=True); time.sleep(60)"]  # fmt: skip
    monkeypatch.setattr(gpu_check, "step_command", lambda name, check: sleeper)
    monkeypatch.setitem(gpu_check.CAPS, "smoke", 2)
    monkeypatch.setattr(gpu_check, "MIN_STEP_SECONDS", 1)
    result = gpu_check.run_step("smoke", gpu_check.Check(tmp_path, dry_run=True, budget=60))
    assert result.status == "timed out" and result.seconds < 30 and "started" in result.tail
    assert (tmp_path / "steps.log").read_text().startswith("\n===== smoke\n$ ")


def test_a_step_the_budget_cannot_hold_is_skipped(tmp_path):
    result = gpu_check.run_step("tests", gpu_check.Check(tmp_path, dry_run=True, budget=5))
    assert result.status == "skipped" and not (tmp_path / "steps.log").exists()


def test_dry_run_writes_facts_steps_and_tables(tmp_path, capsys):
    main(["bench", "gpu-check", "--dry-run", "--out", str(tmp_path), "--steps", "facts", "smoke"])
    report = json.loads((tmp_path / "check.json").read_text())
    assert report["facts"]["torch"] == torch.__version__ and report["facts"]["cxx"]
    [smoke] = report["steps"]
    assert smoke["name"] == "smoke" and smoke["status"] == "passed", smoke["tail"]
    assert "| smoke | passed |" in (tmp_path / "check.md").read_text()
    assert "smoke: passed" in capsys.readouterr().out


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU")
def test_without_a_gpu_only_the_dry_run_runs(tmp_path):
    with pytest.raises(SystemExit, match="no CUDA GPU"):
        main(["bench", "gpu-check", "--out", str(tmp_path)])
