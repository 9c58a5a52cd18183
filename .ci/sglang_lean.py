"""What .ci/install-sglang reads off an SGLang release (its wheel's METADATA) and asks of
its scheduler's import: `python .ci/sglang_lean.py requires WHEEL | pins RELEASE REQUIRES
LIST | missing REQUIRES` (the script's comments say why each)."""

import importlib
import importlib.util
import re
import sys
import zipfile
from pathlib import Path


def name(requirement):
    return re.split(r"[<>=!~;\[ (]", requirement, maxsplit=1)[0].strip().lower().replace("_", "-")


def requires(wheel):  # the Requires-Dist of the release's wheel, no extras, no markers
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        for line in z.read(meta).decode().splitlines():
            if line.startswith("Requires-Dist:") and "extra ==" not in line:
                print(line.split(":", 1)[1].split(";")[0].strip())


def pins(release, required, listed):  # the list, each package the release pins exactly at its pin
    own = {}
    for requirement in Path(required).read_text().split("\n"):
        found = re.fullmatch(r"([^\s\[<>=!~]+)(\[[^]]*\])?\s*==\s*([^\s,]+)", requirement)
        if found:
            own[name(found[1])] = found[3]
    for line in Path(listed).read_text().splitlines():
        requirement = line.split("#", 1)[0].strip()
        if requirement:
            package, version = requirement.split("==")
            if own.get(name(package), version) != version:
                requirement = f"{package}=={own[name(package)]}"
                print(f"{requirement}  (sglang {release}'s own pin)", file=sys.stderr)
            print(requirement)


def missing(required):  # the release's requirement for a module its scheduler lacks, if any
    path = "schedcheck/engine/sglang/standins.py"  # by its file: schedcheck need not be installed
    spec = importlib.util.spec_from_file_location("_standins", path)
    standins = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = standins
    spec.loader.exec_module(standins)
    standins.install()
    for module in ("sglang.srt.server_args", "sglang.srt.managers.scheduler"):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as e:
            root = (e.name or "").split(".")[0]
            if root == "sglang":
                raise
            wanted = {name(r): r for r in Path(required).read_text().split("\n") if r}
            if name(root) not in wanted:
                raise SystemExit(f"{module} imports {root}, which sglang does not require") from e
            print(wanted[name(root)])
            return


globals()[sys.argv[1]](*sys.argv[2:])
