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
from dataclasses import replace
from pathlib import Path

from schedcheck.grading.grade import GROUPS
from schedcheck.grading.report import Entry, Failure, GroupState, Report, Verdict
from schedcheck.strategies.coverage import LABELS


def page_name(path: str) -> str:
    """A file name for a submission's page: readable, unique, the same on every shard."""
    digest = hashlib.sha1(path.encode()).hexdigest()[:8]
    readable = re.sub(r"[^A-Za-z0-9]+", "_", "_".join(Path(path).parts[-2:])).strip("_")
    return f"pages/{readable}-{digest}.html"


def write(results: list[Entry], out: Path) -> Report:
    """Write the three files, and a page per failing submission, into `out`; the report
    returned names each page instead of holding its HTML."""
    out.mkdir(parents=True, exist_ok=True)
    written: list[Entry] = []
    for entry in results:
        if entry.page_html is not None:
            name = page_name(entry.path)
            (out / name).parent.mkdir(exist_ok=True)
            (out / name).write_text(entry.page_html)
            entry = replace(entry, page=name, page_html=None)
        written.append(entry)
    report = Report(tuple(sorted(written, key=lambda e: e.path)))
    text = json.dumps(report.to_dict(), indent=1, sort_keys=True)
    (out / "report.json").write_text(text + "\n")
    (out / "junit.xml").write_text(junit(report))
    (out / "summary.md").write_text(summary(report))
    return report


def merge(outs: list[Path], out: Path) -> Report:
    """One report from the reports of several shards (their submissions do not overlap)."""
    results: dict[str, Entry] = {}
    for directory in outs:
        shard = Report.from_dict(json.loads((directory / "report.json").read_text()))
        for entry in shard.submissions:
            if entry.path in results:
                raise ValueError(f"{entry.path} is graded in two of the reports")
            results[entry.path] = entry
            if entry.page is not None:
                (out / "pages").mkdir(parents=True, exist_ok=True)
                shutil.copy(directory / entry.page, out / entry.page)
    return write(list(results.values()), out)


def junit(report: Report) -> str:
    """One testcase per submission x check group, for CI dashboards."""
    suites = ET.Element("testsuites", name="schedcheck grade")
    for entry in report.submissions:
        suite = ET.SubElement(suites, "testsuite", name=entry.path)
        properties = ET.SubElement(suite, "properties")
        ET.SubElement(properties, "property", name="isolation", value=entry.isolation or "")
        counts = {"tests": 0, "failures": 0, "skipped": 0, "errors": 0}
        for group in GROUPS:
            state = entry.checks.get(group, GroupState.NOT_RUN)
            case = ET.SubElement(suite, "testcase", classname=entry.path, name=group)
            counts["tests"] += 1
            if state is GroupState.FAIL:
                counts["failures"] += 1
                first = next((f for f in entry.failures if _group(f) == group), None)
                message = first.message if first else "failed"
                ET.SubElement(case, "failure", message=message.splitlines()[0]).text = message
            elif state is GroupState.NOT_RUN:
                counts["skipped"] += 1
                verdict = entry.verdict.value
                ET.SubElement(case, "skipped", message=f"not run: verdict {verdict}")
        if entry.verdict is Verdict.ERROR:
            counts["errors"] += 1
            error = ET.SubElement(suite, "error", message="grading failed")
            error.text = "\n".join(f.message for f in entry.failures)
        for key, value in counts.items():
            suite.set(key, str(value))
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def _group(failure: Failure) -> str:
    """The group a failure belongs to: its check's, or the group it names itself."""
    return next((g for g, checks in GROUPS.items() if failure.check in checks), failure.check)


def summary(report: Report) -> str:
    """The table a teacher reads; then what the verdicts rest on: the hard parts check's runs
    reach (strategies/coverage.py), as many runs as reached each in the fullest grading."""
    lines = [
        "| submission | verdict | groups passed | first failing check | shrunk size | runs "
        "| hard parts reached | isolation |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for entry in report.submissions:
        passed = sum(state is GroupState.PASS for state in entry.checks.values())
        first = entry.failures[0] if entry.failures else None
        what = size = "-"
        if first is not None:
            what = first.message.splitlines()[0].replace("|", "\\|")[:120]
            if first.workload is not None:
                size = f"{first.requests} requests, {first.steps} steps"
        runs = reached = "-"
        if entry.sample is not None:
            runs = f"{entry.sample.runs:,} of {entry.sample.of:,}"
            reached = f"{sum(n > 0 for _, n in entry.sample.reached)} of {len(LABELS)}"
        lines.append(
            f"| {entry.path} | {entry.verdict.value} | {passed}/{len(GROUPS)} | {what} | {size} "
            f"| {runs} | {reached} | {entry.isolation or '-'} |"
        )
    fullest = max(
        (e.sample for e in report.submissions if e.sample is not None),
        key=lambda sample: sample.runs,
        default=None,
    )
    if fullest is not None:
        counts = dict(fullest.reached)
        lines += [
            "",
            f"Each submission is graded on the runs `schedcheck check` makes ({fullest.of:,}). "
            "The hard parts they reach, and in how many runs:",
            "",
            "| hard part | runs |",
            "|---|---|",
            *(f"| {label} | {counts.get(label, 0):,} |" for label in LABELS),
        ]
    return "\n".join(lines) + "\n"
