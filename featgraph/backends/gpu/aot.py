"""Compile GPU kernels ahead of time for an NVIDIA architecture, on a machine without a GPU.

Triton's interpreter (how CI runs the GPU kernels) does not check what the compiler checks: globals that
are not constexpr, layouts, shared memory, register pressure. Inside ``with compiling():`` featgraph's
host code runs on CPU tensors and, wherever it would launch a Triton kernel, records the launch; then a fresh
Python process compiles each recorded kernel through Triton's NVIDIA backend down to a cubin (with the
``ptxas`` that Triton bundles) for that launch's argument types and constants. Nothing runs on a device,
so outputs are left unwritten.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

import torch

from .. import gpu as backend

POINTER_TYPES = {
    torch.float32: "fp32",
    torch.float64: "fp64",
    torch.float16: "fp16",
    torch.bfloat16: "bf16",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.int8: "i8",
    torch.uint8: "u8",
    torch.bool: "i1",
}


@dataclass(frozen=True)
class CompiledLaunch:
    """One kernel launch compiled for ``arch``: its registers per thread, spilled bytes, shared memory."""

    kernel: str
    arch: int
    registers: int
    spills: int
    shared_bytes: int


def _scalar_type(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return "*" + POINTER_TYPES[value.dtype]
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return "i32" if -(2**31) <= value < 2**31 else "i64"
    if isinstance(value, float):
        return "fp32"
    raise TypeError(f"cannot type a kernel argument of {type(value).__name__}")


@dataclass(frozen=True)
class _Request:
    """One launch to compile: where its kernel is defined, its argument types and constants."""

    module: str  # importable module name, or a file path for generated modules
    function: str
    signature: dict[str, str]
    constants: dict[str, Any]


class _Recorder:
    """Stands in for a ``@triton.jit`` kernel: ``kernel[grid](*args, **constants)`` records the launch."""

    def __init__(self, fn: Callable, requests: list[_Request]) -> None:
        import inspect

        self.fn, self.requests = fn, requests
        self.params = inspect.signature(fn).parameters
        namespace, name = fn.__globals__, fn.__globals__["__name__"]
        importable = name in sys.modules and vars(sys.modules[name]) is namespace  # generated ones are not
        self.module = name if importable else namespace["__file__"]

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        return self.record

    def record(self, *args: Any, **kwargs: Any) -> None:
        values = dict(zip(self.params, args, strict=False)) | kwargs
        signature, constants = {}, {}
        for name, param in self.params.items():
            if "constexpr" in str(param.annotation):
                signature[name], constants[name] = "constexpr", _encode(values[name])
            else:
                signature[name] = _scalar_type(values[name])
        self.requests.append(_Request(self.module, self.fn.__name__, signature, constants))


def _encode(value: Any) -> Any:
    """A constant as JSON: Triton dtypes by name."""
    import triton.language as tl

    return {"tl.dtype": value.name} if isinstance(value, tl.dtype) else value


def _decode(value: Any) -> Any:
    import triton.language as tl

    return tl.dtype(value["tl.dtype"]) if isinstance(value, dict) else value


def _compile(requests: list[_Request], arch: int) -> list[CompiledLaunch]:
    """Compile in a fresh interpreter: Triton's own helpers (``tl.cumsum``'s combine function, say) are
    interpreted objects in a process that imported Triton with ``TRITON_INTERPRET=1``."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    keys = [json.dumps(asdict(r), sort_keys=True) for r in requests]
    distinct = list(dict.fromkeys(keys))  # a kernel launched twice alike is compiled once
    payload = json.dumps({"arch": arch, "requests": [json.loads(key) for key in distinct]})
    done = subprocess.run(
        [sys.executable, "-m", __name__], input=payload, capture_output=True, text=True, env=env, check=False
    )
    if done.returncode != 0:
        raise CompileError(f"Triton could not compile a kernel for sm_{arch}:\n{done.stderr[-4000:]}")
    compiled = dict(zip(distinct, json.loads(done.stdout.strip().splitlines()[-1]), strict=True))
    return [CompiledLaunch(**compiled[key]) for key in keys]


class CompileError(RuntimeError):
    pass


def _compile_here(request: _Request, arch: int) -> CompiledLaunch:
    import triton
    from triton.backends.compiler import GPUTarget

    fn = getattr(_module(request.module), request.function)
    constants = {name: _decode(value) for name, value in request.constants.items()}
    source = triton.compiler.ASTSource(fn=fn, signature=request.signature, constexprs=constants)
    compiled = triton.compile(source, target=GPUTarget("cuda", arch, 32))
    registers, spills = _resource_usage(compiled.asm["cubin"])
    return CompiledLaunch(request.function, arch, registers, spills, compiled.metadata.shared)


@cache
def _module(where: str) -> Any:
    """A module by importable name, or a generated one by its file (loaded once per compiling process)."""
    if not where.endswith(".py"):
        return importlib.import_module(where)
    spec = importlib.util.spec_from_file_location(Path(where).stem, where)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _resource_usage(cubin: bytes) -> tuple[int, int]:
    """Registers per thread and local (spill) bytes, read by the ``cuobjdump`` that Triton bundles."""
    import triton

    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as file:
        file.write(cubin)
        file.flush()
        report = subprocess.run([str(tool), "-res-usage", file.name], capture_output=True, text=True, check=True)
    registers = re.search(r"REG:(\d+)", report.stdout)
    local = re.search(r"LOCAL:(\d+)", report.stdout)
    return int(registers.group(1)) if registers else -1, int(local.group(1)) if local else -1


@contextmanager
def _recording(namespace: dict[str, Any], requests: list[_Request]) -> Iterator[None]:
    """Within the block, the Triton kernels defined in ``namespace`` (module globals) record launches."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    saved = {name: value for name, value in namespace.items() if isinstance(value, JITFunction | InterpretedFunction)}
    namespace.update({name: _Recorder(value.fn, requests) for name, value in saved.items()})
    try:
        yield
    finally:
        namespace.update(saved)


@contextmanager
def compiling(arch: int = 90) -> Iterator[list[CompiledLaunch]]:
    """Within the block, every launch of a featgraph GPU kernel (generated templates, tensor cores, grouped
    products) is recorded instead of run; on leaving, the recorded kernels are compiled for ``arch`` (90:
    Hopper) and the list the block got fills with the results."""
    from . import grouped_mm, tensor_core  # import triton, which only compiling needs

    launches: list[CompiledLaunch] = []
    requests: list[_Request] = []
    launch = backend.launch

    def record(run: Callable, tensors: Any, scalars: Any) -> None:
        with _recording(run.__globals__, requests):
            launch(run, tensors, scalars)

    backend.launch = record
    try:
        with _recording(vars(tensor_core), requests), _recording(vars(grouped_mm), requests):
            yield launches
    finally:
        backend.launch = launch
    launches += _compile(requests, arch) if requests else []


if __name__ == "__main__":
    job = json.loads(sys.stdin.read())
    results = [asdict(_compile_here(_Request(**r), job["arch"])) for r in job["requests"]]
    print(json.dumps(results))
