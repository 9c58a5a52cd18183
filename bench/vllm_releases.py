"""A verdict on every vLLM release from 0.11: each minor release's first and last patch,
installed the lean way in a venv of its own (.ci/install-vllm RELEASE), checked by
`schedcheck engine --engine vllm` with a bounded search: in its default features and modes,
or in those --features and --modes name (passed through: e.g. `--features spec --modes all`,
speculative decoding in every mode the release has). Minutes per release; not part of CI
(which checks the pinned release). docs/engines.md keeps the table.

Run: python -m bench.vllm_releases [--examples N] [--features F] [--modes M]
     [--out FILE.jsonl] [RELEASE ...]

Each release's row goes to FILE.jsonl as it is done (release, the options passed, the
report's mode lines, its drafter lines (the `features:` line and the `trial runs:` lines:
which drafters the release runs in which mode), exit status, verdict, the first failure's
lines, the saved workload), so a run stopped half way keeps what it did; a release whose
row is there already is skipped. The saved counterexamples, and each failing run's whole
report (runN-CHECK.txt), stay in the folder beside FILE, to be read in vLLM's code before
a failure is believed.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OLDEST = (0, 11)
MISSING = re.compile(r"No module named '([\w.]+)'")


def registry_releases() -> list[str]:
    """Every release the registry lists, from 0.11 on: the first and the last patch of
    each minor, oldest first."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "vllm"],
        capture_output=True,
        text=True,
        check=True,
    )
    line = next(x for x in done.stdout.splitlines() if x.startswith("Available versions:"))
    versions = [v.strip() for v in line.split(":", 1)[1].split(",")]
    by_minor: dict[tuple[int, int], list[str]] = {}
    for v in versions:
        parts = v.split(".")
        if len(parts) == 3 and all(p.isdigit() for p in parts):
            minor = (int(parts[0]), int(parts[1]))
            if minor >= OLDEST:
                by_minor.setdefault(minor, []).append(v)
    chosen: list[str] = []
    for minor in sorted(by_minor):
        patches = sorted(by_minor[minor], key=lambda v: int(v.split(".")[2]))
        chosen.extend(dict.fromkeys([patches[0], patches[-1]]))
    return chosen


def sh(venv: Path, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(Path.home())}
    return subprocess.run(
        list(args), cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


# a failure of one is rerun with it off, to go on (E17: VLLM-10, with drafts, 0.11 to 0.2x)
POLICIES = ("E4", "E9", "E10", "E13", "E17")
TIMEOUT = 1800  # seconds for one `schedcheck engine` run; past it the run counts as timed out


def check_release(
    release: str, examples: int, saved: Path, searches: list[list[str]]
) -> list[dict[str, object]]:
    """One row per search (its options: --features, --modes) of `release`, installed once."""
    folder = Path(tempfile.mkdtemp(prefix=f"schedcheck-vllm-{release}-"))
    venv = folder / "venv"
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        python = str(venv / "bin" / "python")
        start = time.monotonic()
        for step in (
            [python, "-m", "pip", "install", "-q", "-e", str(ROOT)],
            ["bash", ".ci/install-vllm", release],
        ):
            done = sh(venv, *step)
            if done.returncode:
                said = done.stderr.strip().splitlines()[-5:]
                return [
                    {"release": release, "options": o, "verdict": "not installed", "lines": said}
                    for o in searches
                ]
        installed = round(time.monotonic() - start)
        rows = []
        for options in searches:
            row = search(release, examples, saved / key(options), venv, python, options)
            rows.append({"install_s": installed, **row})
        return rows
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def key(options: list[str]) -> str:
    """A folder name for a search's options: `features=connector,modes=all`; `default`."""
    return ",".join(o.removeprefix("--") for o in options) or "default"


def search(
    release: str, examples: int, saved: Path, venv: Path, python: str, options: list[str]
) -> dict[str, object]:
    """`schedcheck engine` on the installed release; a policy's failure is rerun with that
    check off (twice at most), to see what is behind it."""
    row: dict[str, object] = {"release": release, "options": options}
    added: list[str] = []
    off: list[str] = []
    runs: list[dict[str, object]] = []
    while True:
        done = engine(venv, python, examples, saved / release, off, added, options)
        lines = done.stdout.strip().splitlines()
        failure = [x for x in lines if x.startswith(("FAIL", "E"))][:2]
        runs.append(
            {
                "off": list(off),
                "exit": done.returncode,
                "verdict": VERDICTS.get(done.returncode, f"exit {done.returncode}"),
                "reached": next((x for x in lines if " workloads in " in x), ""),
                "failure": failure or done.stderr.strip().splitlines()[-3:],
            }
        )
        row.setdefault("modes", [x for x in lines if x.startswith(("async:", "runner:", "modes:"))])
        row.setdefault("drafters", [x for x in lines if x.startswith(("features:", "trial runs:"))])
        check = failure[0].rsplit(": ", 1)[-1] if failure else ""
        if done.returncode:  # the whole report, beside the saved workload, to read
            report = saved / release / f"run{len(runs)}-{check or done.returncode}.txt"
            report.parent.mkdir(parents=True, exist_ok=True)
            report.write_text(done.stdout + done.stderr)
        if done.returncode != 1 or check not in POLICIES or len(off) == 2:
            break
        off.append(check)  # a policy failed: what else is there with it off
    row.update(
        runs=runs,
        added=added,
        verdict=runs[0]["verdict"],
        saved=sorted(str(p) for p in (saved / release).glob("*.json")),
    )
    return row


VERDICTS = {
    0: "PASS",
    1: "FAIL",
    2: "exit 2: cannot be driven, or an option refused (its lines say which)",
    3: "schedcheck's fault",
    124: "timed out",
}


def engine(
    venv: Path,
    python: str,
    examples: int,
    saved: Path,
    off: list[str],
    added: list[str],
    options: list[str],
) -> subprocess.CompletedProcess[str]:
    """`schedcheck engine --engine vllm` in the release's venv, with `options` (--features,
    --modes); a package its lean install left out that it imports after all
    (ModuleNotFoundError) is added, and the run again. A run past TIMEOUT: exit 124."""
    for _ in range(4):
        command = [
            python,
            "-m",
            "schedcheck",
            "engine",
            "--engine",
            "vllm",
            *options,
            "--examples",
            str(examples),
            "--save-failures",
            str(saved),
            *(f"--off={c}" for c in off),
        ]
        try:
            done = sh(venv, *command, timeout=TIMEOUT)
        except subprocess.TimeoutExpired as e:
            said = [b.decode() if isinstance(b, bytes) else (b or "") for b in (e.stdout, e.stderr)]
            return subprocess.CompletedProcess(
                command, 124, said[0], said[1] + f"\ntimed out after {TIMEOUT} s"
            )
        missing = MISSING.search(done.stderr + done.stdout)
        if done.returncode != 2 or missing is None:
            break
        package = missing.group(1).split(".")[0].replace("_", "-")
        added.append(package)
        sh(venv, python, "-m", "pip", "install", "-q", package)
    return done


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as docs/engines.md's table, less the column a person writes: the scenario
    read in vLLM's code and the upstream issue or fix that matches it."""
    searched = len({key(row.get("options", [])) for row in rows}) > 1
    lines = [
        "| release |" + (" search |" if searched else "") + " modes | verdict | first failure |"
        " then, with it off |",
        "|---|---|---|---|---|" + ("---|" if searched else ""),
    ]
    for row in rows:
        said_modes = [str(m).split(" (")[0] for m in row.get("modes", [])]
        drawn = [m for m in said_modes if m.startswith("modes:")]  # --modes all: each named
        modes = ", ".join(drawn or said_modes)
        for line in map(str, row.get("drafters", [])):  # which drafters ran, where not
            if "; drafters: " in line:
                modes += "; drafters: " + line.split("; drafters: ", 1)[1]
            else:  # a trial run's refusal, less its reason
                refused = line.removeprefix("trial runs: ").removeprefix("drafter ")
                modes += "; " + refused.split(": ", 1)[0]
        said = [
            "PASS" if run.get("verdict") == "PASS" else str((run.get("failure") or [""])[-1])[:140]
            for run in row.get("runs") or [row]
        ]
        search = f" {key(row.get('options', []))} |" if searched else ""
        lines.append(
            f"| {row['release']} |{search} {modes} | {row.get('verdict')} | {said[0]} | "
            f"{'; '.join(said[1:]) or '-'} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.vllm_releases")
    parser.add_argument("releases", nargs="*", help="default: every release from 0.11")
    parser.add_argument("--examples", type=int, default=1000)
    parser.add_argument(
        "--features",
        action="append",
        help="passed to `schedcheck engine` (e.g. spec; 'connector;connector=offloading' adds "
        "--connector=offloading); given twice, two searches of one install",
    )
    parser.add_argument("--modes", choices=("default", "all"), help="passed likewise")
    parser.add_argument("--out", default="vllm-releases.jsonl")
    parser.add_argument("--table", action="store_true", help="print FILE's rows as a table")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    if args.table:
        print(table([json.loads(x) for x in out.read_text().splitlines()]))
        return
    rows = [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []
    done = {(row["release"], key(row["options"])) for row in rows}
    modes = [f"--modes={args.modes}"] if args.modes else []
    # a --features value may carry options of its search after ';': "connector;connector=
    # offloading;load-failure=fail" searches vLLM's own connector alone under the fail policy
    searches = [
        [f"--features={f.split(';')[0]}", *(f"--{o}" for o in f.split(";")[1:] if o), *modes]
        for f in args.features or []
    ] or [modes]
    for release in args.releases or registry_releases():
        left = [o for o in searches if (release, key(o)) not in done]
        if not left:
            continue
        for row in check_release(release, args.examples, out.parent / "vllm-failures", left):
            with out.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
