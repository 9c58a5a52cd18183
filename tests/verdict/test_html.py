"""The HTML page of a failing trace: one self-contained file a student can open."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

from schedcheck.cli.main import main
from schedcheck.drive.driver import run
from schedcheck.drive.loader import load_impl
from schedcheck.model.workload import Config, Request, Workload
from schedcheck.strategies.examples import EXAMPLES
from schedcheck.verdict.html import render
from schedcheck.verdict.verify import verify
from tests.catalogue import standalone
from tests.helpers import ROOT

VOID = {"meta", "br", "rect", "line", "circle", "path", "link", "img"}


class Page(HTMLParser):
    """Collects tags, attributes and text, and checks that tags nest and close."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.texts: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack[-1:]}"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.texts.append(data)


def page_of(mutant: str, workload: Workload) -> tuple[str, Page]:
    impl = load_impl(ROOT / "tests" / "mutants" / f"{mutant}.py")
    verdict = verify(impl, workload)
    html = render(verdict.violations[0], verdict.trace, run(load_impl(), workload))
    return html, Page(html)


def test_page_parses_and_shows_the_failure() -> None:
    html, page = page_of("bt_output_cleared_on_preemption", EXAMPLES["example2"])
    assert page.stack == []  # every tag closed
    assert html.startswith("<!DOCTYPE html>")
    ids = {attrs.get("id") for _, attrs in page.tags}
    assert {"failing-step", "message"} <= ids
    texts = " ".join(page.texts)
    assert "I4 at step 2, schedule(): a2 was preempted" in texts
    assert "output differs from the run without preemption" in texts
    svg_labels = [t.strip() for t in page.texts]
    assert "a1" in svg_labels and "a2" in svg_labels


def test_page_is_self_contained() -> None:
    html, page = page_of("bt_phase2_continue", EXAMPLES["example3"])
    assert all(tag != "script" for tag, _ in page.tags)
    assert all("src" not in attrs and "href" not in attrs for _, attrs in page.tags)
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_thirty_sequences_over_many_steps_all_appear() -> None:
    requests = tuple(Request(f"a{i}", 1 + i % 7, 2 + i % 5, 1 + i // 2) for i in range(30))
    workload = Workload(Config(7, 2, 5, 12), requests)
    _, page = page_of("bt_preempted_to_tail", workload)
    labels = {t.strip() for t in page.texts}
    assert {f"a{i}" for i in range(30)} <= labels
    assert sum(tag == "rect" for tag, _ in page.tags) > 300


def test_check_html_option_writes_the_page(tmp_path: Path) -> None:
    saved = tmp_path / "example2.json"
    saved.write_text(EXAMPLES["example2"].to_json())
    out = tmp_path / "trace.html"
    mutant = str(standalone(ROOT / "tests" / "mutants" / "bt_output_cleared_on_preemption.py"))
    assert main(["check", mutant, "--replay", str(saved), "--html", str(out)]) == 1
    assert Page(out.read_text()).stack == []


def test_a_run_too_long_to_draw_says_so_and_shows_its_trace() -> None:
    """A marathon's page (tens of thousands of steps) draws no timeline (it would weigh
    megabytes); a page of a run of ordinary length does."""
    from schedcheck.invariants.violation import Violation
    from schedcheck.verdict.html import DRAWN_STEPS

    requests = tuple(Request(f"r{k}", 1, 2, 1 + 100 * k) for k in range(25))
    long = run(load_impl(), Workload(Config(4, 2, 2, 4), requests, sample_every=256))
    assert len(long.steps) > DRAWN_STEPS
    violation = Violation("R1", len(long.steps), "schedule()", "a divergence")
    html = render(violation, long)
    assert f"The run has {len(long.steps):,} steps: it is not drawn" in html
    assert "<svg" not in html and len(html) < 50_000 and "a divergence" in html
    short = run(load_impl(), Workload(Config(4, 2, 2, 4), requests[:2]))
    assert "<svg" in render(Violation("R1", 1, "schedule()", "x"), short)
