"""The docs site builds strictly, the README's links reach its pages, and every result says where it came from."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.quick

ROOT = Path(__file__).parents[1]
DOCS = ROOT / "docs"


@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path):
    """What CI runs: any broken link or anchor, page left out of the nav, or docstring the API reference cannot
    render fails the build."""
    completed = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-5000:]
    assert (tmp_path / "site" / "results" / "index.html").is_file()
    assert (tmp_path / "site" / "api" / "core" / "replacing" / "index.html").is_file()


def readme_links() -> list[str]:
    return re.findall(r"\]\((docs/[^)#\s]+)(?:#[^)]*)?\)", (ROOT / "README.md").read_text())


def test_every_docs_page_the_readme_links_exists():
    links = readme_links()
    assert {"docs/index.md", "docs/results/index.md", "docs/guide/own-model.md", "docs/api/index.md"} <= set(links)
    for link in links:
        assert (ROOT / link).is_file(), link


def nav_pages(entries: list) -> list[str]:
    """Every page mkdocs.yml's nav names, in order."""
    pages = []
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages.extend(nav_pages(value) if isinstance(value, list) else [value])
    return pages


def test_one_navigation_holds_every_page_once():
    """The nav is the one table of contents: every page is in it once; the README and docs/index.md link into it
    instead of listing the pages again."""
    nav = nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
    assert len(nav) == len(set(nav))
    written = {str(page.relative_to(DOCS)) for page in DOCS.rglob("*.md")}
    assert written == set(nav)
    for page in (ROOT / "README.md", DOCS / "index.md"):
        assert len(re.findall(r"\]\((?:docs/)?guide/", page.read_text())) < len(list((DOCS / "guide").glob("*.md"))) / 2


def sections_with_tables(page: Path) -> list[tuple[str, str]]:
    """``(heading, text)`` of each section of ``page`` that holds a Markdown table."""
    parts = re.split(r"^(#{2,3} .+)$", page.read_text(), flags=re.M)
    return [(heading, text) for heading, text in zip(parts[1::2], parts[2::2], strict=True) if "\n|---" in text]


RESULTS_PAGES = sorted((DOCS / "results").glob("*.md"))


@pytest.mark.parametrize(
    "heading_text",
    [section for page in RESULTS_PAGES for section in sections_with_tables(page)],
    ids=lambda section: section[0],
)
def test_every_results_table_says_when_where_and_how_it_was_measured(heading_text):
    heading, text = heading_text
    provenance = re.search(r"\*Recorded (.+?)\*", text, re.S) or re.search(r"\| recorded \|", text)
    assert provenance, f"{heading}: no line saying when, at which commit, on which machine and by which command"
    if provenance.re.pattern.startswith(r"\*Recorded"):
        line = provenance[1]
        assert re.search(r"\d{4}-\d{2}-\d{2}", line), f"{heading}: no date"
        assert re.search(r"`[0-9a-f]{7}`", text), f"{heading}: no commit"
        assert re.search(r"CPU|GPU|machine: not recorded", line), f"{heading}: no machine"
        assert "`" in text.split("*Recorded", 1)[1] or "not recorded" in text, f"{heading}: no command"


def test_guide_pages_leave_the_measured_tables_to_the_results_page():
    """A measured table lives once, on the results page; guide pages link to it."""
    for page in sorted((DOCS / "guide").glob("*.md")):
        text = page.read_text()
        for figure in ("77.40", "83.94", "83.49", "79.71", "81.54", "27.7 ms", "0.18 | 0.72"):
            assert figure not in text, f"{page.name} repeats {figure}; link to its page in docs/results/ instead"
