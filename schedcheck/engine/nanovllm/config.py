"""What schedcheck reads of a nano-vllm checkout before any of its code runs: where its package is,
its `Config`'s fields and defaults, and which model runner its generation has.

All of it is read as text (Python's `ast`), in the checking process: the engine's code
cannot steer it, and nothing here needs torch or transformers. What is read is printed on
the report's first lines and each part can be set by the user (`--package`, `--config`,
`--runner`), so a wrong guess is visible and fixable.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from schedcheck.engine.adapter import EngineSetup, SetupError
from schedcheck.engine.nanovllm.runners import RUNNERS

# The modules the driver imports from the package (and sampling_params.py where it is).
MODULES = ("engine/sequence.py", "engine/block_manager.py", "engine/scheduler.py")
# What its own step needs besides (build.py, step.py: --loop own).
OWN_STEP = ("engine/llm_engine.py", "engine/model_runner.py")
# A ModelRunner's set-up methods that need a GPU (nano-vllm's and its forks', read in their
# code): not run. Anything else its __init__ does runs.
NOT_RUN = (
    "warmup_model",
    "allocate_kv_cache",
    "capture_cudagraph",
    "capture_prefill_cudagraph",
    "_alloc_mid_buffer",
    "reserve_min_kv_cache",
    "init_weight_offload",
    "release_kv_cache_reserve",
)
# Tensor-parallel ranks a run plays (its own step's workers; schedcheck's loop checks the
# pickled copies they would receive: E8), unless --config tensor_parallel_size says
# otherwise: not the fork's own default, which is 1 in nearly every fork's config.py.
WORLD = 2
# The Config fields every workload sets itself (docs/engines.md): --config cannot.
DRAWN = (
    "max_num_seqs",
    "max_num_batched_tokens",
    "kvcache_block_size",
    "num_kvcache_blocks",
    "eos",
    "max_model_len",
)


def locate(path: str | None, package: str | None) -> tuple[Path, str]:
    """(the folder holding the package, the package's name) for PATH as the user gave it: a
    checkout, a site-packages folder, the package folder itself, or a wheel; or, with no
    PATH, the installed package `package` (found without importing it)."""
    if path is None:
        if package is None:
            raise SetupError(
                "give a PATH (a checkout, a wheel, a site-packages folder) or "
                "--package NAME of an installed engine"
            )
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise SetupError(f"no installed package named {package!r} (--package)")
        return Path(next(iter(spec.submodule_search_locations))).parent, package
    where = Path(path)
    if where.is_file() and where.suffix == ".whl":
        unpacked = Path(tempfile.mkdtemp(prefix="schedcheck-wheel-"))
        with zipfile.ZipFile(where) as wheel:
            wheel.extractall(unpacked)  # data only: nothing of it runs here
        where = unpacked
    if not where.is_dir():
        raise SetupError(f"{path} is neither a folder nor a wheel")
    if package is None and _is_package(where):
        return where.resolve().parent, where.resolve().name
    if package is not None:
        if not (where / package).is_dir():
            raise SetupError(f"{path} holds no folder {package!r} (--package)")
        return where.resolve(), package
    found = sorted(d.name for d in where.iterdir() if d.is_dir() and _is_package(d))
    if not found:
        deeper = _packages_below(where)
        hint = (
            f"; below it: {', '.join(deeper)} (give the folder holding one as PATH)"
            if deeper
            else ""
        )
        raise SetupError(
            f"{path} is not a nano-vllm checkout: no nanovllm/ (or other "
            f"package) holding engine/scheduler.py{hint}"
        )
    if len(found) > 1 and "nanovllm" not in found:
        raise SetupError(
            f"{path} holds several engines ({', '.join(found)}): name one with --package"
        )
    return where.resolve(), "nanovllm" if "nanovllm" in found else found[0]


def _is_package(folder: Path) -> bool:
    return (folder / "engine" / "scheduler.py").is_file()


def _packages_below(where: Path, depth: int = 4, most: int = 5) -> list[str]:
    """Engine packages a few folders down (a src/ layout, a repository of variants)."""
    found: list[str] = []
    level = [where]
    for _ in range(depth):
        level = [
            d
            for f in level
            for d in sorted(f.iterdir())
            if d.is_dir() and not d.name.startswith((".", "__"))
        ]
        found += [str(d.relative_to(where)) for d in level if _is_package(d)]
        if len(found) >= most:
            break
    return found[:most]


def missing_modules(root: Path, package: str) -> list[str]:
    return [f"{package}/{m}" for m in MODULES if not (root / package / m).is_file()]


def read_config(source: str | None) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The fields of `class Config` in config.py's text: those with a literal default, and
    those without one (no default, or one only running code would give)."""
    values, unset, _ = read_fields(source)
    return values, unset


def read_fields(source: str | None) -> tuple[dict[str, Any], tuple[str, ...], dict[str, str]]:
    """read_config's, and each annotated field's annotation as written (`bool`, `int`)."""
    values: dict[str, Any] = {}
    unset: list[str] = []
    annotations: dict[str, str] = {}
    if source is None:
        return values, (), annotations
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return values, (), annotations
    config = next(
        (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "Config"), None
    )
    if config is None:
        return values, (), annotations
    for node in config.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            name, default = node.target.id, node.value
            annotations[name] = ast.unparse(node.annotation)
        elif (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            name, default = node.targets[0].id, node.value
        else:
            continue
        ok, value = _literal(default)
        if ok:
            values[name] = value
        else:
            unset.append(name)
    return values, tuple(unset), annotations


def params_lack(source: str | None) -> tuple[str, ...]:
    """What of the workloads' request options (ignore_eos) `class SamplingParams` in
    sampling_params.py's text does not take: a field it does not declare, and its
    `__init__` (where it has one) does not name or take as `**kwargs`. Nothing where the
    class is not found: its own failure then names what is wrong."""
    try:
        tree = ast.parse(source) if source is not None else None
    except SyntaxError:
        tree = None
    found = (
        next(
            (
                n
                for n in ast.walk(tree)
                if isinstance(n, ast.ClassDef) and n.name == "SamplingParams"
            ),
            None,
        )
        if tree is not None
        else None
    )
    if found is None:
        return ()
    names = {
        n.target.id
        for n in found.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    }
    for fn in found.body:
        if isinstance(fn, ast.FunctionDef) and fn.name == "__init__":
            if fn.args.kwarg is not None:
                return ()
            names = {a.arg for a in (*fn.args.args, *fn.args.kwonlyargs)}
    return tuple(option for option in ("ignore_eos",) if option not in names)


def _literal(node: ast.expr | None) -> tuple[bool, Any]:
    """A default as plain JSON data, if it is one: a literal, `field(default=...)` or
    `field(default_factory=list/dict)`."""
    if node is None:
        return False, None
    if (
        isinstance(node, ast.Call)
        and getattr(node.func, "id", getattr(node.func, "attr", "")) == "field"
    ):
        for kw in node.keywords:
            if kw.arg == "default":
                return _literal(kw.value)
            factory = kw.value.id if isinstance(kw.value, ast.Name) else ""
            if kw.arg == "default_factory" and factory in ("list", "dict"):
                return True, [] if factory == "list" else {}
        return False, None
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None
    try:
        return True, json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return False, None


def parse_option(
    text: str, defaults: dict[str, Any] | None = None, annotations: dict[str, str] | None = None
) -> tuple[str, Any]:
    """`--config KEY=VALUE`, VALUE converted to the field's type: the type of its default in
    the engine's Config, or where it has none the type its annotation names (bool: true,
    false, 1 or 0 in any case; int; float; str). A value that does not convert is a usage
    error naming the field, its type and the value. A field of no known type takes a
    Python literal (2, [1], None), else the text as a string."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key.isidentifier():
        raise SetupError(f"--config {text!r}: expected KEY=VALUE, e.g. enable_chunked_prefill=True")
    if key in DRAWN:
        raise SetupError(
            f"--config {key}: schedcheck draws {key} for every workload itself "
            f"(the fields it sets: {', '.join(DRAWN)})"
        )
    kind = field_type((defaults or {}).get(key), (annotations or {}).get(key, ""))
    if kind is not None:
        return key, convert(key, kind, raw.strip())
    ok, value = _literal(_expression(raw))
    return key, value if ok else raw


# bool first: a bool is an int too
TYPES: tuple[type, ...] = (bool, int, float, str)


def field_type(default: Any, annotation: str) -> type | None:
    for kind in TYPES:
        if isinstance(default, kind):
            return kind
    if default is None:  # `x: int | None = None`, `x: bool`: the annotation's type
        named = re.findall(r"[A-Za-z_]\w*", annotation)
        return next((k for k in TYPES if k.__name__ in named), None)
    return None


def convert(key: str, kind: type, raw: str) -> Any:
    """`raw` as a `kind`; SetupError naming the field, its type and the value."""
    if kind is bool and raw.lower() in ("true", "1", "false", "0"):
        return raw.lower() in ("true", "1")
    if kind is str:
        ok, value = _literal(_expression(raw))
        return value if ok and isinstance(value, str) else raw
    if kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    named = {bool: "a bool", int: "an int", float: "a float"}.get(kind, f"a {kind.__name__}")
    said = "true, false, 1 or 0" if kind is bool else named
    raise SetupError(f"--config {key}={raw}: {key} is {named} field: expected {said}")


def _expression(raw: str) -> ast.expr | None:
    try:
        return ast.parse(raw.strip(), mode="eval").body
    except SyntaxError:
        return None


def detect_runner(root: Path, package: str) -> tuple[str, str]:
    """The runner of the engine's generation, read off its model_runner.py's
    `prepare_prefill` (what nano-vllm's own runner does): (name, how it was decided)."""
    runner = root / package / "engine" / "model_runner.py"
    where = f"{package}/engine/model_runner.py"
    if runner.is_file():
        text = runner.read_text(errors="replace")
        try:
            tree = ast.parse(text)
        except SyntaxError:
            tree = None
        functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)] if tree else []
        prefill = next((f for f in functions if f.name.startswith("prepare_prefill")), None)
        unified = next((f for f in functions if f.name == "prepare_model_input"), None)
        if (
            prefill is None
            and unified is not None
            and "num_new_tokens" in (ast.get_source_segment(text, unified) or "")
        ):
            return "mixed", (
                f"{where}: one prepare_model_input computes num_new_tokens from "
                "num_cached_tokens for every sequence"
            )
        if prefill is not None:
            body = ast.get_source_segment(text, prefill) or ""
            if "scheduled_prefill_start" in body:
                return "window", (
                    f"{where}: prepare_prefill computes from "
                    "scheduled_prefill_start to scheduled_prefill_end"
                )
            if "num_scheduled_tokens" not in body:
                return "whole", f"{where}: prepare_prefill computes every token to the end"
            if "min(seq.num_cached_tokens" in body.replace(" ", ""):
                return "chunked-clamped", (
                    f"{where}: prepare_prefill starts at min(num_cached_tokens, len(seq)-1)"
                )
            return "chunked", f"{where}: prepare_prefill computes num_scheduled_tokens"
    sequence = root / package / "engine" / "sequence.py"
    if sequence.is_file() and "num_scheduled_tokens" in sequence.read_text(errors="replace"):
        return (
            "chunked",
            f"guessed: no prepare_prefill in {where}; Sequence has num_scheduled_tokens",
        )
    return "whole", f"guessed: no prepare_prefill in {where}; Sequence has no num_scheduled_tokens"


def runner_writes(root: Path, package: str) -> list[str]:
    """The Sequence fields the engine's model runner writes while it runs a step (in `run`
    and the `prepare_*` functions; warmup is outside a step): state a simulated runner
    cannot know to change, so such an engine cannot be driven (e.g. a runner that advances
    `num_computed_tokens` itself)."""
    source = root / package / "engine" / "model_runner.py"
    try:
        tree = ast.parse(source.read_text(errors="replace")) if source.is_file() else None
    except SyntaxError:
        return []
    written: list[str] = []
    for fn in ast.walk(tree) if tree else ():
        if not isinstance(fn, ast.FunctionDef) or not (
            fn.name == "run" or fn.name.startswith("prepare_")
        ):
            continue
        for node in ast.walk(fn):
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AugAssign)
                else []
            )
            for t in targets:
                if (
                    isinstance(t, ast.Attribute)
                    and isinstance(t.value, ast.Name)
                    and (t.value.id == "seq" and f"{t.attr} in {fn.name}()" not in written)
                ):
                    written.append(f"{t.attr} in {fn.name}()")
    return written


LOOPS = ("own", "scheduler")
"""How a workload steps the engine: through its own LLMEngine.step() and model runner
(build.py, step.py), or schedcheck's loop over its Scheduler (drive.py)."""


TORCH = (
    "torch is not installed here (its model runner imports it; a CPU build serves: "
    "python -m pip install torch --index-url https://download.pytorch.org/whl/cpu)"
)


def own_step_needs_torch() -> bool:
    return importlib.util.find_spec("torch") is None


def own_step(root: Path, package: str) -> str | None:
    """Why the checkout's own step cannot be driven here (None: it can)."""
    lacking = [f"{package}/{m}" for m in OWN_STEP if not (root / package / m).is_file()]
    if lacking:
        return f"it has no {' or '.join(lacking)}"
    if own_step_needs_torch():
        return TORCH
    return None


def choose_loops(root: Path, package: str, asked: str | None, every: bool) -> tuple[str, ...]:
    """The loops a run draws from, the first the default: its own step where it can be
    driven here, else schedcheck's."""
    if asked is not None and asked not in LOOPS:
        raise SetupError(f"--loop {asked}: nano-vllm's loops are {', '.join(LOOPS)}")
    why = own_step(root, package)
    if why is not None and (asked == "own" or every):
        raise SetupError(f"--loop own: {root / package}'s own step cannot be driven: {why}")
    first = asked or ("own" if why is None else "scheduler")
    return (first, *(loop for loop in LOOPS if loop != first and every))


def not_run(root: Path, package: str) -> list[str]:
    """The GPU-only set-up methods (NOT_RUN) the checkout's ModelRunner defines, read off its
    text (a subclass's inherited ones are left out too, by the build, where they are)."""
    source = root / package / "engine" / "model_runner.py"
    try:
        tree = ast.parse(source.read_text(errors="replace")) if source.is_file() else None
    except SyntaxError:
        return []
    defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)} if tree else set()
    return [m for m in NOT_RUN if m in defined]


def loops_line(setup: EngineSetup) -> str:
    """The report's line on the loops a run draws from, and why not its own step."""
    said = {
        "own": "own (its LLMEngine.step() and ModelRunner; the model and sampler simulated)",
        "scheduler": "scheduler (schedcheck's loop over its Scheduler, a model runner of "
        "its generation simulated)",
    }
    line = f"loop: {', '.join(said.get(loop, loop) for loop in setup.modes)}"
    why = own_step(Path(setup.root), setup.package)
    if "own" not in setup.modes and why is not None:
        line += f"; not its own step: {why}"
    return "; ".join((line, *setup.settled))


def read_setup(
    path: str | None,
    package: str | None = None,
    config: list[str] | None = None,
    runner: str | None = None,
    loop: str | None = None,
    modes: str | None = None,
) -> EngineSetup:
    """The engine at PATH as the command line gives it; SetupError for a usage error."""
    root, name = locate(path, package)
    missing = missing_modules(root, name)
    if missing:
        raise SetupError(f"{root} is not a nano-vllm checkout: no {', '.join(missing)}")
    loops = choose_loops(root, name, loop, modes == "all")
    written = runner_writes(root, name) if "scheduler" in loops else []
    if written:
        raise SetupError(
            f"{root / name} cannot be driven: its model runner changes the sequences it runs "
            f"({', '.join(written)}, in {name}/engine/model_runner.py), which schedcheck's "
            'simulated runner does not know to do (docs/engines.md, "Checking a fork")'
        )
    source = root / name / "config.py"
    values, unset, annotations = read_fields(
        source.read_text(errors="replace") if source.is_file() else None
    )
    defaults = dict(values)
    config_from = (
        f"{name}/config.py: {len(values) + len(unset)} fields read"
        if source.is_file()
        else f"no {name}/config.py"
    )
    options: list[str] = []
    if package is not None:
        options += ["--package", package]
    given: list[str] = []
    for text in config or []:
        key, value = parse_option(text, defaults, annotations)
        values[key] = value
        unset = tuple(u for u in unset if u != key)
        options += ["--config", text]
        given.append(f"{key}={value!r}")
    if given:
        config_from += f"; set by --config: {', '.join(given)}"
    params = root / name / "sampling_params.py"
    lacks = params_lack(params.read_text(errors="replace") if params.is_file() else None)
    if runner is None:
        runner, runner_from = detect_runner(root, name)
    elif runner not in RUNNERS:
        raise SetupError(f"--runner {runner}: not one of {', '.join(RUNNERS)}")
    else:
        runner_from = "set with --runner"
        options += ["--runner", runner]
    options += [
        *(["--loop", loop] if loop else []),
        *(["--modes", "all"] if modes == "all" else []),
    ]
    return EngineSetup(
        str(root),
        name,
        runner,
        runner_from,
        values,
        unset,
        config_from,
        tuple(options),
        modes=loops,
        lacks=lacks,
    )


def given_config(setup: EngineSetup) -> dict[str, Any]:
    """The Config fields --config set (the rest are the fork's own defaults, which its own
    Config gives itself)."""
    options = setup.options
    keys = [
        options[i + 1].partition("=")[0].strip() for i, o in enumerate(options) if o == "--config"
    ]
    return {k: setup.config[k] for k in keys if k in setup.config}


def ranks(setup: EngineSetup) -> int:
    """The tensor-parallel ranks a run plays: WORLD unless --config tensor_parallel_size set
    it (the fork's own default, 1 in most config.py files, would leave E8 unchecked)."""
    return int(given_config(setup).get("tensor_parallel_size", WORLD))
