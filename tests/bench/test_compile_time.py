import json

from featgraph.bench import compile_time
from featgraph.cli import main
from featgraph.native import compiler


def test_each_mode_builds_every_kernel_and_only_the_precompiled_one_includes_the_header(tmp_path, capsys, monkeypatch):
    commands = []
    run = compiler._run_compiler

    def recorded(arguments, cwd):
        if cwd.parent.name in ("cache0", "cache1"):  # the two modes' caches (the sources come from a third)
            commands.append(arguments)
        return run(arguments, cwd)

    monkeypatch.setattr(compiler, "_run_compiler", recorded)
    out = tmp_path / "compile.json"
    main(["bench", "compile", "--widths", "8", "--json", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert [r["mode"] for r in rows] == list(compile_time.MODES)
    assert all(r["kernels"] == len(compile_time.OPS) and r["median_ms"] > 0 for r in rows)
    assert rows[0]["ratio"] == 1.0 and rows[1]["ratio"] == rows[0]["median_ms"] / rows[1]["median_ms"]
    assert rows[0]["header_s"] is None and rows[1]["header_s"] > 0
    kernels = [c for c in commands if "kernel.cpp" in c]
    assert len(kernels) == 2 * len(compile_time.OPS)  # every kernel built afresh in each mode's own cache
    assert sum(c[0] == "-include" for c in kernels) == len(compile_time.OPS)
    assert [c[:2] for c in commands].count(["-x", "c++-header"]) == 1
    assert "| headers precompiled |" in capsys.readouterr().out
