"""The three files `schedcheck grade` writes: report.json, junit.xml, summary.md.

The schema is documented in docs/grading.md. Everything written is sorted by path and free
of timing, so grading the same files twice writes the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from schedcheck.grading.grade import GROUPS

Report = dict[str, Any]


def page_name(path: str) -> str:
    """A file name for a submission's page: readable, unique, the same on every shard."""
    digest = hashlib.sha1(path.encode()).hexdigest()[:8]
    readable = re.sub(r"[^A-Za-z0-9]+", "_", "_".join(Path(path).parts[-2:])).strip("_")
    return f"pages/{readable}-{digest}.html"


def write(results: list[dict[str, Any]], out: Path) -> Report:
    """Write the three files, and a page per failing submission, into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    for entry in results:
        html = entry.pop("page_html", None)
        if html is not None:
            entry["page"] = page_name(entry["path"])
            (out / entry["page"]).parent.mkdir(exist_ok=True)
            (out / entry["page"]).write_text(html)
    report = {"submissions": sorted(results, key=lambda r: str(r["path"]))}
    (out / "report.json").write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    (out / "junit.xml").write_text(junit(report))
    (out / "summary.md").write_text(summary(report))
    return report


def merge(outs: list[Path], out: Path) -> Report:
    """One report from the reports of several shards (their submissions do not overlap)."""
    results: dict[str, dict[str, Any]] = {}
    for directory in outs:
        for entry in json.loads((directory / "report.json").read_text())["submissions"]:
            if entry["path"] in results:
                raise ValueError(f"{entry['path']} is graded in two of the reports")
            results[entry["path"]] = entry
            if "page" in entry:
                (out / "pages").mkdir(parents=True, exist_ok=True)
                shutil.copy(directory / entry["page"], out / entry["page"])
    return write(list(results.values()), out)


def junit(report: Report) -> str:
    """One testcase per submission x check group, for CI dashboards."""
    suites = ET.Element("testsuites", name="schedcheck grade")
    for entry in report["submissions"]:
        suite = ET.SubElement(suites, "testsuite", name=entry["path"])
        properties = ET.SubElement(suite, "properties")
        ET.SubElement(properties, "property", name="isolation", value=entry.get("isolation", ""))
        counts = {"tests": 0, "failures": 0, "skipped": 0, "errors": 0}
        for group in GROUPS:
            state = entry["checks"].get(group, "not run")
            case = ET.SubElement(suite, "testcase", classname=entry["path"], name=group)
            counts["tests"] += 1
            if state == "fail":
                counts["failures"] += 1
                first = next((f for f in entry["failures"] if _group(f) == group), None)
                message = first["message"] if first else "failed"
                ET.SubElement(case, "failure", message=message.splitlines()[0]).text = message
            elif state == "not run":
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message=f"not run: verdict {entry['verdict']}")
        if entry["verdict"] == "error":
            counts["errors"] += 1
            error = ET.SubElement(suite, "error", message="grading failed")
            error.text = "\n".join(f["message"] for f in entry["failures"])
        for key, value in counts.items():
            suite.set(key, str(value))
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def _group(failure: dict[str, Any]) -> str:
    check = failure.get("check", "")
    return next((g for g, checks in GROUPS.items() if check in checks), check)


def summary(report: Report) -> str:
    """The table a teacher reads."""
    lines = [
        "| submission | verdict | groups passed | first failing check | shrunk size | isolation |",
        "|---|---|---|---|---|---|",
    ]
    for entry in report["submissions"]:
        checks = entry["checks"]
        passed = sum(state == "pass" for state in checks.values())
        first = entry["failures"][0] if entry["failures"] else None
        what = size = "-"
        if first is not None:
            what = first["message"].splitlines()[0].replace("|", "\\|")[:120]
            if first.get("workload") is not None:
                size = f"{first['requests']} requests, {first['steps']} steps"
        lines.append(
            f"| {entry['path']} | {entry['verdict']} | {passed}/{len(GROUPS)} | {what} | {size} "
            f"| {entry.get('isolation') or '-'} |"
        )
    return "\n".join(lines) + "\n"
