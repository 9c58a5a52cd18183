"""A fork's whole engine imported, and built for one workload, on a CPU (docs/engines.md,
"nano-vllm's own step").

Imported once per process (`load_package`): every module its `engine/llm_engine.py` pulls
in, from the sources read before the box (loader.SourceFinder), with placeholders for the
GPU stack (standins.py) and torch's CUDA host calls made CPU no-ops. Then, by name, in the
fork's own modules, what needs a GPU, weights or other processes is replaced, once:

- `torch.distributed`, `multiprocessing` (spawn), `SharedMemory`, `atexit`: ranks.py's
  stand-ins, which play worker ranks in this process through the fork's own pickling,
  shared memory protocol and loop;
- `AutoConfig`, `AutoTokenizer`: a model config of one tiny layer, a tokenizer with eos 0
  (prompts are given as token ids);
- each `*ForCausalLM` class the fork defines (its `__new__`, however the fork reaches the
  class), its `Sampler`, its `load_model`: the simulated model (model.py), an argmax,
  nothing;
- `ModelRunner`: a subclass whose GPU-only set-up methods (NOT_RUN: the warm-up forward,
  sizing and allocating the KV cache, CUDA graphs) do nothing; the pool's size is the
  workload's, given as `num_kvcache_blocks`;
- `Config.__post_init__` runs the fork's own, with the block size its asserts accept
  (256) shown to it for the call: the workloads' small blocks are a search's choice.

Each workload then builds the fork's own `LLMEngine(folder, **config)` afresh, in the
process state a new interpreter would have (ranks.ProcessState), with its forwards recorded
(model.Forwards) and its sequences named as the scheduler receives them.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import importlib
import os
import sys
import traceback
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from schedcheck.engine.nanovllm.config import NOT_RUN, WORLD
from schedcheck.engine.nanovllm.loader import Engine, SourceFinder
from schedcheck.engine.nanovllm.model import Argmax, Forwards, SimModel
from schedcheck.engine.nanovllm.ranks import Distributed, Park, ProcessState, Ranks
from schedcheck.engine.nanovllm.standins import Placeholder, placeholders, stood_in, torch_on_cpu
from schedcheck.engine.workload import EOS, EngineWorkload

__all__ = ["WORLD", "Built", "Package", "assigned", "build", "load_package", "unset_by_us"]

ACCEPTED_BLOCK_SIZE = 256  # what nano-vllm's Config asserts (a multiple of 256)


class Built:
    """One workload's engine: the fork's LLMEngine, its forwards, its ranks."""

    def __init__(self, package: Package, workload: EngineWorkload) -> None:
        self.package, self.workload = package, workload
        self.names: dict[int, str] = {}  # id(Sequence) -> the request's name
        self.seqs: dict[str, Any] = {}
        self.naming = ""  # the request add_request() is adding now
        self.forwards = Forwards(workload, self.names)
        self.forwards.known = lambda: list(self.seqs.values())
        self.ranks: Ranks = Ranks(package.state, str(package.root))
        self.engine: Any = None

    def hf_config(self) -> Any:
        import torch

        return HfConfig(
            dtype=torch.float32,
            torch_dtype=torch.float32,
            max_position_embeddings=1 << 20,
            vocab_size=self.workload.vocab + 1,
            eos_token_id=EOS,
            bos_token_id=EOS,
            num_hidden_layers=1,
            num_attention_heads=1,
            num_key_value_heads=1,
            hidden_size=8,
            head_dim=8,
            intermediate_size=8,
            model_type="qwen3",
            architectures=["Qwen3ForCausalLM"],
            tie_word_embeddings=False,
            rms_norm_eps=1e-6,
            rope_theta=10000.0,
            rope_scaling=None,
            hidden_act="silu",
            attention_bias=False,
        )

    def model(self, *args: object, **kwargs: object) -> SimModel:
        return SimModel(self.forwards, self.ranks.current, self.package.context)

    def added(self, seq: Any) -> None:
        self.names[id(seq)] = self.naming
        self.seqs[self.naming] = seq


class HfConfig(types.SimpleNamespace):
    """The model's config (`AutoConfig.from_pretrained`): one tiny layer; what a fork's Config
    does with it besides reading it (save it beside the model) does nothing."""

    def save_pretrained(self, *args: object, **kwargs: object) -> None:
        return None

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


_current: Built | None = None  # the engine built or run in this process now


def current() -> Built:
    if _current is None:
        raise RuntimeError("schedcheck: no engine is being run")
    return _current


class Package:
    """A fork's whole engine, imported once in this process, its GPU parts replaced."""

    def __init__(self, root: Path, name: str, sources: dict[str, str]) -> None:
        self.root, self.name = root, name
        torch_on_cpu()
        for old in [n for n in sys.modules if n == name or n.startswith(name + ".")]:
            del sys.modules[old]
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, SourceFinder)]
        self.finder = SourceFinder(root, name, sources, inits=True)
        sys.meta_path.insert(0, self.finder)
        with placeholders(stood_in()):
            engine = importlib.import_module(f"{name}.engine.llm_engine")
            runner = importlib.import_module(f"{name}.engine.model_runner")
            sequence = importlib.import_module(f"{name}.engine.sequence")
            scheduler = importlib.import_module(f"{name}.engine.scheduler")
            params = (
                importlib.import_module(f"{name}.sampling_params")
                if f"{name}/sampling_params.py" in sources
                else None
            )
            _import_the_rest(name, sources)
        self.modules = {
            n: m for n, m in sys.modules.items() if n == name or n.startswith(name + ".")
        }
        self.LLMEngine = engine.LLMEngine
        self.Sequence = sequence.Sequence
        self.Scheduler = scheduler.Scheduler
        self.SamplingParams = getattr(params, "SamplingParams", None)
        config = self.modules.get(f"{name}.config")
        self.Config = getattr(config, "Config", None) or getattr(engine, "Config", None)
        context = self.modules.get(f"{name}.utils.context", runner)
        self.context: Callable[[], Any] = getattr(context, "get_context", lambda: None)
        base = getattr(engine, "ModelRunner", None) or vars(runner)["ModelRunner"]
        self.not_run = tuple(m for m in NOT_RUN if hasattr(base, m))
        self.Runner = _runner(base, self.not_run)
        for module in self.modules.values():
            _replace(module)
        for module in self.modules.values():  # what its LLMEngine builds, wherever named
            for key, value in list(vars(module).items()):
                if value is base:
                    vars(module)[key] = self.Runner
        if self.Config is not None and "__post_init__" in vars(self.Config):
            self.Config.__post_init__ = _post_init(self.Config.__post_init__)
        self.fields = (
            {f.name for f in dataclasses.fields(self.Config)}
            if self.Config is not None and dataclasses.is_dataclass(self.Config)
            else None
        )
        self.set_by = assigned(sources)
        # what its generate() sets on its engine (its step may read it: jqzhang03's)
        self.generate_sets = sorted(a for a, fns in self.set_by.items() if "generate" in fns)
        self.state = ProcessState(list(self.modules.values()))
        self.block_size = _default(self.Config, "kvcache_block_size", ACCEPTED_BLOCK_SIZE)
        self.scaled = self.state.sized(self.block_size)

    def install(self) -> None:
        """Its modules the ones `sys.modules` names (pickle finds classes by module name)."""
        sys.modules.update(self.modules)
        if self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)
        sys.meta_path.insert(0, self.finder)

    def engine(self) -> Engine:
        """The same modules as schedcheck's own loop drives them (--loop scheduler)."""
        return Engine(
            self.root,
            self.name,
            self.Scheduler,
            self.Sequence,
            self.SamplingParams,
            self.modules,
            self.finder,
        )


def assigned(sources: dict[str, str]) -> dict[str, set[str]]:
    """Each `self.NAME = ...` attribute in the sources' classes, and the methods that set it
    (read off the text: which attributes only a GPU set-up method gives a runner)."""
    found: dict[str, set[str]] = {}
    for text in sources.values():
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for fn in cls.body:
                if not isinstance(fn, ast.FunctionDef):
                    continue
                for node in ast.walk(fn):
                    targets = node.targets if isinstance(node, ast.Assign) else []
                    if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                        targets = [node.target]
                    for t in targets:
                        if (
                            isinstance(t, ast.Attribute)
                            and isinstance(t.value, ast.Name)
                            and t.value.id == "self"
                        ):
                            found.setdefault(t.attr, set()).add(fn.name)
    return found


def unset_by_us(
    package: Package, error: BaseException, not_run: tuple[str, ...] = NOT_RUN
) -> str | None:
    """Why an exception the engine raised is schedcheck's doing, not the engine's (None:
    it is the engine's): a placeholder called, or an attribute only methods schedcheck
    does not run would have set (`not_run`: the GPU set-up; generate() too where its
    loop is not the one driven)."""
    if isinstance(error, Placeholder):
        return str(error)
    last = traceback.extract_tb(error.__traceback__)[-1:] if error.__traceback__ else []
    if last and f"{os.sep}torch{os.sep}cuda{os.sep}" in last[0].filename:
        # a CUDA call on this CPU build of torch (torch.cuda.current_stream, nvtx, ...)
        return f"it calls CUDA through torch.cuda ({last[0].name}): {error}"
    if isinstance(error, AttributeError) and error.name:
        setters = package.set_by.get(error.name, set())
        if setters and setters <= set(not_run):
            why = (
                "a GPU set-up schedcheck does not run"
                if setters <= set(NOT_RUN)
                else "its generate() did not reach its loop here, so only its step() is driven"
            )
            return (
                f"it reads {type(error.obj).__name__}.{error.name}, which only "
                f"{', '.join(sorted(setters))} sets: {why}"
            )
    return None


def _default(config: Any, name: str, otherwise: int) -> int:
    """A Config field's default (nano-vllm's dataclass), or `otherwise`."""
    if config is not None and dataclasses.is_dataclass(config):
        for f in dataclasses.fields(config):
            if f.name == name and isinstance(f.default, int):
                return f.default
    return otherwise


def _import_the_rest(name: str, sources: dict[str, str]) -> None:
    """Every other module of the package, where it imports: a module the fork imports
    later (its model file, inside ModelRunner.__init__) gets the placeholders its import
    needs and is replaced like the rest. One that does not import is left out, its import
    to fail later as it would have."""
    for path in sorted(sources):
        if not path.endswith(".py"):
            continue
        module = path[: -len(".py")].replace("/", ".").removesuffix(".__init__")
        if module in sys.modules or not module.startswith(name + ".") or _script(module):
            continue
        try:
            importlib.import_module(module)
        except (Exception, SystemExit):
            for n in [n for n in sys.modules if n == module or n.startswith(module + ".")]:
                del sys.modules[n]


def _script(module: str) -> bool:
    """A module no engine imports: a test, a benchmark, an example, a `__main__` (its import
    may patch the engine, or run it)."""
    parts = module.split(".")
    return any(
        p in ("tests", "test", "conftest", "__main__", "setup")
        or p.startswith(("test_", "bench", "example"))
        or p.endswith("_test")
        for p in parts[1:]
    )


def load_package(root: str | Path, sources: dict[str, str], package: str) -> Package:
    return Package(Path(root).resolve(), package, sources)


def build(package: Package, workload: EngineWorkload, config: dict[str, Any]) -> Built:
    """The fork's own LLMEngine for `workload`, fresh: `config` (--config) under the values
    the workload draws; tensor parallel of WORLD ranks unless `config` says otherwise."""
    global _current
    built = Built(package, workload)
    _current = built
    c = workload.config
    fresh = package.state.scaled(package.block_size, c.block_size)
    built.ranks.fresh = fresh
    package.state.apply(fresh)  # a new interpreter's state
    given = {
        "tensor_parallel_size": WORLD,
        **config,
        "max_num_seqs": c.max_num_seqs,
        "max_num_batched_tokens": c.max_num_batched_tokens,
        "max_model_len": workload.longest(),
        "kvcache_block_size": c.block_size,
        "num_kvcache_blocks": c.num_blocks,
        "enforce_eager": True,
    }
    if package.fields is not None:
        given = {k: v for k, v in given.items() if k in package.fields}
    built.ranks.world = int(given.get("tensor_parallel_size", 1))
    # its model folder: asserted to exist, never read (AutoConfig and AutoTokenizer replaced);
    # inside the box the checkout's copy is out of view
    model = str(package.root) if package.root.is_dir() else os.sep
    engine = package.LLMEngine(model, **given)
    built.ranks.start_pending()  # a fork whose rank 0 reached no collective while built
    scheduler = engine.scheduler
    add = scheduler.add

    def added(seq: Any, *args: Any, **kwargs: Any) -> Any:
        built.added(seq)
        return add(seq, *args, **kwargs)

    scheduler.add = added
    built.engine = engine
    built.forwards.checking = True
    return built


def _runner(base: type, not_run: tuple[str, ...]) -> type:
    """The fork's ModelRunner with its GPU-only set-up not run; a worker's __init__, which
    ends in its loop, comes back parked."""
    init = cast(Any, base).__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        rank = next((a for a in args if isinstance(a, int) and not isinstance(a, bool)), 0)
        built = current()
        built.ranks.built(self, rank)
        try:
            with contextlib.suppress(Park):  # a worker's __init__ ends in its loop, parked
                init(self, *args, **kwargs)
        finally:
            _pool_kept(self, args, built.workload.config.num_blocks)

    def nothing(self: Any, *args: Any, **kwargs: Any) -> None:
        return None

    attributes: dict[str, Any] = {"__init__": __init__, "__module__": base.__module__}
    attributes.update({name: nothing for name in not_run})
    return type(base.__name__, (base,), attributes)


def _pool_kept(runner: Any, args: tuple[Any, ...], blocks: int) -> None:
    """The pool stays the workload's: a runner that sizes its KV cache in __init__ (from
    torch.cuda's memory, answered by the stand-ins, or a figure of its own: pradsgit's
    `_init_kv_cache` sets 500) wrote its count into the Config its Scheduler reads next."""
    config = getattr(runner, "config", None)
    if config is None:
        config = next((a for a in args if hasattr(a, "num_kvcache_blocks")), None)
    if config is not None and getattr(config, "num_kvcache_blocks", blocks) != blocks:
        config.num_kvcache_blocks = blocks


def _post_init(original: Callable[[Any], None]) -> Callable[[Any], None]:
    @functools.wraps(original)
    def post_init(self: Any) -> None:
        size = getattr(self, "kvcache_block_size", None)
        if size is None:
            original(self)
            return
        self.kvcache_block_size = ACCEPTED_BLOCK_SIZE
        try:
            original(self)
        finally:
            self.kvcache_block_size = size

    return post_init


class _Tokenizers:
    """`AutoTokenizer`: prompts are token ids; eos is the workloads' EOS."""

    @staticmethod
    def from_pretrained(*args: object, **kwargs: object) -> Any:
        return types.SimpleNamespace(
            eos_token_id=EOS,
            encode=_no_text,
            decode=lambda *a, **k: "",
        )


def _no_text(*args: object, **kwargs: object) -> Any:
    raise TypeError("schedcheck gives prompts as token ids: nothing is tokenized")


class _Configs:
    @staticmethod
    def from_pretrained(*args: object, **kwargs: object) -> Any:
        return current().hf_config()


class _Multiprocessing:
    def get_context(self, method: str | None = None) -> Any:
        return current().ranks.context()


class _Atexit:
    @staticmethod
    def register(*args: object, **kwargs: object) -> None:
        return None  # the worker ends with os._exit: nothing of the engine's runs at exit


def _shared_memory(name: str | None = None, create: bool = False, size: int = 0) -> Any:
    return current().ranks.shared_memory(name, create, size)


def _simulated(cls: type, *args: object, **kwargs: object) -> SimModel:
    """A model class's __new__: the simulated model (not an instance of the class, so its
    __init__ is not run)."""
    return current().model()


DISTRIBUTED = Distributed(lambda: current().ranks)


def _replace(module: types.ModuleType) -> None:
    """In one of the fork's modules, what needs a GPU or other processes, by what it is."""
    import atexit
    import multiprocessing
    import multiprocessing.shared_memory

    import torch.distributed
    import torch.multiprocessing

    for name, value in list(vars(module).items()):
        if value is torch.distributed:
            setattr(module, name, DISTRIBUTED)
        elif value is torch.multiprocessing or value is multiprocessing:
            setattr(module, name, _Multiprocessing())
        elif value is multiprocessing.shared_memory.SharedMemory:
            setattr(module, name, _shared_memory)
        elif value is atexit:
            setattr(module, name, _Atexit())
        elif name == "AutoTokenizer":
            setattr(module, name, _Tokenizers)
        elif name == "AutoConfig":
            setattr(module, name, _Configs)
        elif (
            isinstance(value, type)
            and name.endswith("ForCausalLM")
            and value.__module__ == module.__name__
        ):
            # the class itself: however the fork reaches it (a registry built at import,
            # a dict, its name), building it builds the simulated model
            value.__new__ = _simulated  # type: ignore[assignment]
        elif name == "Sampler" and isinstance(value, type):
            setattr(module, name, Argmax)
        elif name == "load_model" and callable(value):
            setattr(module, name, lambda *a, **k: None)
