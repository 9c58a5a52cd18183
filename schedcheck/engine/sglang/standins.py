"""Stand-ins that let SGLang's scheduling modules import on a CPU with no GPU stack
(docs/engines.md, "SGLang"; the reasons, each shown by leaving it out, in
docs/notes/sglang-lean-install.md).

SGLang's modules import triton unconditionally, and a few import torchvision, IPython and
(on a CPU engine) sgl_kernel at the top; none of them runs on the scheduling path. So:

1. transformers is imported first, while those packages are truly absent: its cached
   availability checks then say "not installed" and keep saying it (seen by transformers,
   a torchvision stand-in breaks its AutoProcessor import).
2. torchvision, IPython and sgl_kernel become strict placeholders: any attribute may be read
   (another placeholder), any call or subclassing raises Placeholder, naming it: a kernel
   that would silently be skipped fails loudly instead.
3. triton is SGLang's own stand-in (`sglang/_platform_stubs.py`, written for macOS), loaded
   from its file with its platform check satisfied for the call only; its side effects on
   torch (MPS attributes, Tensor.to and Tensor.copy_ wrappers) are undone.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import platform
import sys
import types
from collections.abc import Sequence
from typing import Any

__all__ = ["Placeholder", "install"]

PLACEHOLDERS = ("torchvision", "IPython", "sgl_kernel")


class Placeholder(RuntimeError):
    """A placeholder module was called: a code path that needs the real package ran."""


class _Strict(types.ModuleType):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__path__: list[str] = []  # a package: `import root.sub` goes through the finder
        self.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        child = sys.modules.get(f"{self.__name__}.{attr}") or _Strict(f"{self.__name__}.{attr}")
        object.__setattr__(self, attr, child)
        return child

    def __call__(self, *args: object, **kwargs: object) -> Any:
        raise Placeholder(
            f"{self.__name__} was called: schedcheck stands it in for a package this CPU "
            "install lacks, and SGLang ran a path that needs it"
        )

    def __mro_entries__(self, bases: tuple[type, ...]) -> tuple[type, ...]:
        raise Placeholder(f"{self.__name__} is a stand-in: it cannot be subclassed")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves `import torchvision.x.y` and the like with placeholders."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if isinstance(sys.modules.get(fullname.split(".")[0]), _Strict):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _Strict(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def _settle_transformers() -> None:
    import transformers  # noqa: F401
    from transformers.utils import import_utils

    for check in ("is_torchvision_available", "is_ipython_available", "is_triton_available"):
        said = getattr(import_utils, check, None)
        if said is not None and said():
            raise RuntimeError(f"transformers' {check}() is true before any stand-in")
    # transformers 5.12 to 5.17 (SGLang 0.5.19's pin) make AutoImageProcessor a dummy that
    # asks for torchvision (its file names TorchvisionBackend), and SGLang registers its
    # processors on it at import: the real class is importable, and put back
    auto = importlib.import_module("transformers.models.auto.image_processing_auto")
    top: Any = sys.modules["transformers"]  # its lazy module, replaced while it imports
    if getattr(top, "AutoImageProcessor", None) is not auto.AutoImageProcessor:
        top.AutoImageProcessor = auto.AutoImageProcessor


def _install_triton() -> None:
    import torch

    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("No module named 'sglang'")
    folder = next(iter(spec.submodule_search_locations))
    # by its file: importing it as sglang._platform_stubs runs sglang/__init__, which
    # imports triton before the stand-in exists
    name = "_sglang_platform_stubs"
    found = importlib.util.spec_from_file_location(name, os.path.join(folder, "_platform_stubs.py"))
    if found is None or found.loader is None:
        raise RuntimeError(f"SGLang at {folder} has no _platform_stubs.py (its triton stand-in)")
    stubs = importlib.util.module_from_spec(found)
    sys.modules[name] = stubs  # its dataclasses look their module up there
    found.loader.exec_module(stubs)
    saved = (sys.platform, platform.machine, torch.backends.mps.is_available)
    mps = set(vars(torch.mps))
    to, copy = torch.Tensor.to, torch.Tensor.copy_
    try:
        sys.platform = "darwin"
        platform.machine = lambda: "arm64"
        torch.backends.mps.is_available = lambda: True
        stubs.install_platform_stubs()
    finally:
        sys.platform, platform.machine, torch.backends.mps.is_available = saved
        for attr in set(vars(torch.mps)) - mps:
            delattr(torch.mps, attr)
        torch.Tensor.to, torch.Tensor.copy_ = to, copy
    if not isinstance(sys.modules.get("triton"), stubs._MockModule):
        raise RuntimeError("SGLang's triton stand-in did not install")


def install() -> None:
    """Before the first `import sglang`; once per process (later calls do nothing)."""
    if isinstance(sys.modules.get("sgl_kernel"), _Strict):
        return
    os.environ["SGLANG_USE_CPU_ENGINE"] = "1"  # its is_cpu(): the CPU paths of its pools
    for root in (*PLACEHOLDERS, "triton"):
        if root in sys.modules:
            raise RuntimeError(f"{root} is imported already: the stand-ins come first")
    _settle_transformers()
    for root in PLACEHOLDERS:
        sys.modules[root] = _Strict(root)
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
    _install_triton()
    from transformers.utils import import_utils

    if import_utils.is_torchvision_available():
        raise RuntimeError("transformers sees the torchvision stand-in")
