"""What lets a nano-vllm fork's whole engine import and its model runner prepare its inputs
on a CPU (docs/engines.md, "nano-vllm's own step"; the spike that found each need:
docs/notes/nanovllm-own-step-spike.md).

1. Placeholder modules for the GPU stack and the model hub, visible only while the fork's
   modules import: its attention and kernels import triton and flash_attn, its engine
   transformers (AutoConfig, AutoTokenizer: the build replaces the names it uses). A
   placeholder lets its attribute be read and used as a decorator (`@triton.jit` runs at
   import); while the fork imports, any call gives another placeholder (a kernel's
   `@triton.autotune(configs=[triton.Config(...)])`); after, a call raises Placeholder:
   a kernel the simulated model should have replaced fails loudly, never silently
   skipped. torch itself probes `import triton` lazily later, so the placeholders leave
   `sys.modules` after the import. The progress bar (tqdm, stood in only where not
   installed) is a silent bar instead: it wraps what it is given and its methods do
   nothing, since a bar changes nothing an engine schedules, and a generate() that makes
   one before its loop must reach the loop (jqzhang03/nano-vllm's does, whatever
   `use_tqdm` says).
2. torch made to run a CUDA program's host side on the CPU, once per process: `.cuda()` and
   `pin_memory` are no-ops, a device named "cuda" is the CPU (a default device, a tensor
   factory's `device=`, `Tensor.to`), `torch.compile` is the identity (a sampler decorated
   with it is replaced anyway), torch.cuda's calls that only synchronise or free are
   no-ops, and its memory queries answer for a device of DEVICE_MEMORY bytes, all free
   (a runner that sizes its KV cache from them in `__init__` is built; the pool is the
   workload's whatever it computes: build.py).
"""

from __future__ import annotations

import collections
import functools
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["ALWAYS", "DEVICE_MEMORY", "Placeholder", "placeholders", "torch_on_cpu"]

# The device memory torch.cuda's queries report, all of it free: small, so that a cache a
# runner sizes from it (and allocates, before the build sets the pool to the workload's)
# costs little on the CPU.
DEVICE_MEMORY = 64 << 20

# GPU-only (and NPU-only) packages and the model hub: stood in for even where installed
# (a fork's engine must not load a model, and triton's real import needs a GPU driver).
ALWAYS = (
    "triton",
    "torch_npu",
    "flash_attn",
    "flashinfer",
    "sgl_kernel",
    "vllm_flash_attn",
    "liger_kernel",
    "transformers",
    "safetensors",
    "huggingface_hub",
    "pynvml",
)
# Stood in for only where not installed: the engine's progress bar (generate() only).
IF_MISSING = ("tqdm",)


class Placeholder(RuntimeError):
    """A placeholder was called: the fork ran a path that needs the real package."""


class _Stand:
    """An attribute of a placeholder module: readable all the way down, a decorator."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return _Stand(f"{self._name}.{attr}")

    def __getitem__(self, item: object) -> Any:
        return _Stand(f"{self._name}[]")

    def __call__(self, *args: object, **kwargs: object) -> Any:
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]  # a decorator: the function is kept, and never run on a CPU
        if _importing:  # `@triton.autotune(configs=[triton.Config(...)])` at import
            return _Stand(f"{self._name}()")
        raise Placeholder(
            f"{self._name} was called: schedcheck stands it in (a GPU-only or model-hub "
            "package), and the engine ran a path that needs it"
        )

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        return (object,)  # `class X(transformers.PretrainedConfig)`: defined, never used

    def __repr__(self) -> str:
        return f"<schedcheck stand-in {self._name}>"


_importing = False  # while the fork's modules import: a placeholder's call gives another


class _ProgressBar:
    """tqdm's bar, silent: iterates what it wraps; every method it is asked for does
    nothing; `n` counts nothing."""

    n = 0

    def __init__(self, iterable: Any = None, *args: object, **kwargs: object) -> None:
        self._iterable = () if iterable is None else iterable
        self.total = kwargs.get("total")

    def __iter__(self) -> Iterator[Any]:
        return iter(self._iterable)

    def __len__(self) -> int:
        return len(self._iterable)

    def __enter__(self) -> _ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return lambda *args, **kwargs: None


def _trange(*args: int, **kwargs: object) -> _ProgressBar:
    return _ProgressBar(range(*args), **kwargs)


# What a stood-in progress bar module gives (tqdm, tqdm.auto, tqdm.std, ...).
_SILENT = {"tqdm": _ProgressBar, "trange": _trange}


class _Module(types.ModuleType):
    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        if self.__name__.split(".")[0] == "tqdm" and attr in _SILENT:
            return _SILENT[attr]
        return _Stand(f"{self.__name__}.{attr}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, roots: frozenset[str]) -> None:
        self.roots = roots

    def find_spec(
        self, name: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name.split(".")[0] not in self.roots:
            return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _Module(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def stood_in() -> frozenset[str]:
    """The packages a fork's import gets placeholders for, here."""
    missing = (m for m in IF_MISSING if importlib.util.find_spec(m) is None)
    return frozenset((*ALWAYS, *missing))


@contextmanager
def placeholders(roots: frozenset[str]) -> Iterator[None]:
    """Placeholders for `roots` while the block runs; gone (and any real module of those
    names put back) after it."""
    kept = {n: m for n, m in sys.modules.items() if n.split(".")[0] in roots}
    for name in kept:
        del sys.modules[name]
    global _importing
    finder = _Finder(roots)
    sys.meta_path.insert(0, finder)
    _importing = True
    try:
        yield
    finally:
        _importing = False
        sys.meta_path.remove(finder)
        for name in [n for n, m in sys.modules.items() if isinstance(m, _Module)]:
            del sys.modules[name]
        sys.modules.update(kept)


_ON_CPU = False


def torch_on_cpu() -> None:
    """torch's CUDA host calls as CPU no-ops, for this process (idempotent)."""
    global _ON_CPU
    if _ON_CPU:
        return
    import torch

    _ON_CPU = True

    def compile(model: Any = None, *args: object, **kwargs: object) -> Any:
        return model if model is not None else (lambda fn: fn)

    tensor = torch.tensor
    set_default_device = torch.set_default_device

    def tensor_on_cpu(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("pin_memory", None)
        if str(kwargs.get("device", "cpu")).startswith("cuda"):
            kwargs["device"] = "cpu"
        return tensor(*args, **kwargs)

    def default_device(device: Any) -> None:
        # the CPU is torch's default: naming it would install a device mode, which every
        # torch call then goes through
        on_cpu = device is None or str(device).startswith(("cuda", "cpu"))
        set_default_device(None if on_cpu else device)

    torch.compile = compile
    torch.tensor = tensor_on_cpu
    torch.set_default_device = default_device
    torch.Tensor.cuda = lambda self, *a, **k: self
    torch.Tensor.pin_memory = lambda self, *a, **k: self
    for name in ("set_device", "synchronize", "empty_cache", "reset_peak_memory_stats"):
        setattr(torch.cuda, name, lambda *a, **k: None)
    # what a runner reads to size its KV cache (nano-vllm's allocate_kv_cache, which forks
    # call from __init__ or under other names): a device of DEVICE_MEMORY bytes, all free
    torch.cuda.mem_get_info = lambda *a, **k: (DEVICE_MEMORY, DEVICE_MEMORY)
    torch.cuda.memory_stats = lambda *a, **k: collections.defaultdict(int)
    for name in ("memory_allocated", "max_memory_allocated", "memory_reserved"):
        setattr(torch.cuda, name, lambda *a, **k: 0)
    torch.cuda.max_memory_reserved = lambda *a, **k: 0
    torch.cuda.get_device_properties = lambda *a, **k: types.SimpleNamespace(
        name="schedcheck's stand-in device", total_memory=DEVICE_MEMORY
    )
    for name in FACTORIES:
        setattr(torch, name, _on_cpu(getattr(torch, name)))
    torch.Tensor.to = _on_cpu(torch.Tensor.to)


# torch's functions that make a tensor on a device a call names (`torch.arange(n,
# device="cuda")`), and Tensor.to (`x.to("cuda")`): the device becomes the CPU, and a
# `pin_memory=True` is dropped.
FACTORIES = (
    "as_tensor",
    "arange",
    "zeros",
    "ones",
    "empty",
    "full",
    "rand",
    "randn",
    "randint",
    "zeros_like",
    "ones_like",
    "empty_like",
    "full_like",
    "linspace",
    "eye",
)


def _on_cpu(function: Any) -> Any:
    def cpu(value: Any) -> Any:
        return "cpu" if str(value).startswith("cuda") else value

    @functools.wraps(function)
    def on_cpu(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("pin_memory", None)  # page-locked host memory needs a CUDA build
        if "device" in kwargs:
            kwargs["device"] = cpu(kwargs["device"])
        if function.__name__ == "to":
            args = tuple(
                cpu(a) if isinstance(a, str) or type(a).__name__ == "device" else a for a in args
            )
        return function(*args, **kwargs)

    return on_cpu
