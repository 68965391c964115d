import json
import os
import sys

import pytest
import torch

from featgraph.bench import gpu_check
from featgraph.cli import main


def test_each_step_runs_the_suite_or_bench_it_names(tmp_path):
    check = gpu_check.Check(tmp_path, dry_run=False, budget=480)
    [tests] = gpu_check.step_commands("tests", check)
    assert tests[1:3] == ["-m", "pytest"] and tests[tests.index("-m", 3) + 1] == "gpu" and tests[-1] == "tests"
    [kernels] = gpu_check.step_commands("kernels", check)
    assert kernels[3:5] == ["bench", "gpu"] and "--scale" not in kernels  # the paper's sizes, every graph
    assert kernels[kernels.index("--dims") + 1 :][:5] == ["32", "64", "128", "256", "512"]
    [train] = gpu_check.step_commands("train", check)
    assert train[train.index("--device") + 1] == "cuda" and "reddit-sized" in train[train.index("--graphs") + 1 :]
    assert "--compile" in gpu_check.step_commands("compile", check)[0]
    dry = gpu_check.Check(tmp_path, dry_run=True, budget=480)
    assert gpu_check.step_commands("train", dry)[0][train.index("--device") + 1] == "cpu"
    assert "--scale" in gpu_check.step_commands("layers", dry)[0]
    [profile] = gpu_check.step_commands("profile", check)
    assert profile[3:5] == ["bench", "profile"] and profile[profile.index("--device") + 1] == "cuda"
    assert "--scale" not in profile and "--scale" in gpu_check.step_commands("profile", dry)[0]
    with pytest.raises(ValueError, match="no step named 'bogus'"):
        gpu_check.step_commands("bogus", check)


def test_the_new_steps_train_on_the_device_with_every_core_sampling(tmp_path):
    check = gpu_check.Check(tmp_path, dry_run=False, budget=480)
    for name, bench in (("minibatch", "minibatch"), ("linkpred", "linkpred")):
        [command] = gpu_check.step_commands(name, check)
        assert command[3:5] == ["bench", bench] and command[command.index("--device") + 1] == "cuda"
        assert command[command.index("--threads") + 1] == str(os.cpu_count())
    grouped, rgcn, *layers = gpu_check.step_commands("hetero", check)
    assert grouped[4] == "grouped-mm" and grouped[grouped.index("--device") + 1] == "cuda"
    assert rgcn[4] == "rgcn-train" and rgcn[rgcn.index("--shapes") + 1] == "am" and "pyg" in rgcn
    assert [command[command.index("--layer") + 1] for command in layers] == ["rgat", "hgt", "heteroconv"]
    kernels, epochs = gpu_check.step_commands("bf16", check)
    assert kernels[kernels.index("--ops") + 1 :][:2] == ["gcn-bf16", "attention-bf16"]
    assert epochs[4] == "train" and "--bf16" in epochs
    every = [c for name in gpu_check.STEPS if name != "facts" for c in gpu_check.step_commands(name, check)]
    jsons = [c[c.index("--json") + 1] for c in every if "--json" in c]
    assert len(set(jsons)) == len(jsons)  # no command's rows overwrite another's


def test_the_planned_runs_cover_every_step_and_the_new_ones_fit_their_budget():
    assert set().union(*gpu_check.RUNS.values()) == set(gpu_check.STEPS)
    for name, steps in gpu_check.RUNS.items():
        assert steps[0] == "facts"
        if name != "third":  # the third reruns steps an H100 has measured; the budget decides how many
            held = sum(gpu_check.CAPS[step] for step in steps if step != "facts")
            assert held + gpu_check.FACTS_SECONDS <= 8 * 60  # each step gets its whole cap


def test_the_tensor_core_step_times_community_graphs_as_given_and_reordered(tmp_path):
    [command] = gpu_check.step_commands("tc", gpu_check.Check(tmp_path, dry_run=False, budget=480))
    assert command[command.index("--orders") + 1] == "community"
    assert command[command.index("--graphs") + 1 :][:2] == ["reddit-community", "products-like"]
    assert command[command.index("--dims") + 1 :][:2] == ["32", "64"]  # where TC-GNN claims its wins


def test_a_step_past_its_limit_is_killed_with_its_children(tmp_path, monkeypatch):
    sleeper = [sys.executable, "-c", "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
               "'import time; time.sleep(60)']); print('started', flush=True); time.sleep(60)"]  # fmt: skip
    monkeypatch.setattr(gpu_check, "step_commands", lambda name, check: [sleeper])
    monkeypatch.setitem(gpu_check.CAPS, "smoke", 2)
    monkeypatch.setattr(gpu_check, "MIN_STEP_SECONDS", 1)
    result = gpu_check.run_step("smoke", gpu_check.Check(tmp_path, dry_run=True, budget=60))
    assert result.status == "timed out" and result.seconds < 30 and "started" in result.tail
    assert (tmp_path / "steps.log").read_text().startswith("\n===== smoke\n$ ")


def test_a_failing_command_fails_its_step_and_the_next_still_runs(tmp_path, monkeypatch):
    def writes(part: str, code: int) -> list[str]:
        path = tmp_path / f"smoke-{part}.json"
        program = f"import json, sys; json.dump({{'rows': ['{part}']}}, open({str(path)!r}, 'w')); sys.exit({code})"
        return [sys.executable, "-c", program]

    monkeypatch.setattr(gpu_check, "step_commands", lambda name, check: [writes("a", 3), writes("b", 0)])
    result = gpu_check.run_step("smoke", gpu_check.Check(tmp_path, dry_run=True, budget=60))
    assert result.status == "failed" and result.returncode == 3
    assert result.data == {"a": {"rows": ["a"]}, "b": {"rows": ["b"]}}
    assert not list(tmp_path.glob("smoke-*.json"))  # their rows live on in check.json
    assert (tmp_path / "steps.log").read_text().count("\n$ ") == 2


def test_a_step_the_budget_cannot_hold_is_skipped(tmp_path):
    result = gpu_check.run_step("tests", gpu_check.Check(tmp_path, dry_run=True, budget=5))
    assert result.status == "skipped" and not (tmp_path / "steps.log").exists()


def test_dry_run_writes_facts_steps_and_tables(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(gpu_check.CAPS, "smoke", 300)  # the interpreter on a loaded CI machine, not a GPU
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
