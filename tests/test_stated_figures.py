"""Figures the README, the help and the configs repeat agree with the record on the results pages they come from,
and the project is described in one sentence everywhere it introduces itself."""

import importlib.metadata
import re
from pathlib import Path

import pytest
import yaml

from theseus_pl.app.config.resolvers import help_description

pytestmark = pytest.mark.quick

ROOT = Path(__file__).parents[1]
RESULTS = ROOT / "docs" / "results"
DESCRIPTION = importlib.metadata.metadata("theseus_pl")["Summary"]  # pyproject.toml's description, installed


def section(page: Path, heading: str) -> str:
    """The text under ``## heading`` up to the next heading of that level."""
    return page.read_text().split(f"\n## {heading}", 1)[1].split("\n## ", 1)[0]


def latest_table(text: str, machine: str = "") -> dict[str, str]:
    """The last ``| figure | value |`` table of a section (its latest record), as figure -> value; with ``machine``,
    of the latest record whose heading (the italic lines above its table) names it."""
    records = re.split(r"\n(?=\*(?:Recorded|Re-run) )", text)
    text = [record for record in records if machine in record.split("\n\n", 1)[0]][-1]
    tables = re.findall(r"((?:^\|.*\|\n)+)", text, flags=re.M)
    rows = [row.strip("|").split(" | ", 1) for row in tables[-1].splitlines()[2:]]
    return {figure.strip(): value.strip() for figure, value in rows}


def minutes(value: str) -> int:
    """``1 min 57 s`` -> 2: the whole minutes a figure is stated in."""
    whole, seconds = re.match(r"(\d+) min (\d+) s", value).groups()
    return round(int(whole) + int(seconds) / 60)


def about(whole_minutes: int) -> str:
    """``1`` -> "about 1 minute", ``6`` -> "about 6 minutes": a rounded figure as the docs write it."""
    return f"about {whole_minutes} minute{'' if whole_minutes == 1 else 's'}"


def paragraph_after(text: str, marker: str) -> str:
    return " ".join(text.split(marker, 1)[1].split("\n\n", 2)[1].split())


def test_the_demos_scores_and_time_agree_with_its_latest_record():
    record = latest_table(section(RESULTS / "quick-runs.md", "The demo"))
    predecessor, successor = re.match(r"([\d.]+) / ([\d.]+)", record["dev accuracy, predecessor / successor"]).groups()
    whole_run = minutes(record["whole run"])
    readme = paragraph_after((ROOT / "README.md").read_text(), "python -m theseus_pl +experiment=demo\n```")
    assert f"({predecessor} and {successor})" in readme
    assert f"in about {whole_run} minutes" in readme
    help_template = yaml.safe_load((ROOT / "conf" / "hydra" / "default.yaml").read_text())["help"]["template"]
    (demo_line,) = [line for line in help_template.splitlines() if "+experiment=demo " in line]
    assert demo_line.endswith(f"(~{whole_run} min)")
    demo_config = (ROOT / "conf" / "experiment" / "demo.yaml").read_text()
    assert f"in about {whole_run} minutes" in " ".join(demo_config.split())


def suite_rows() -> list[dict[str, str]]:
    """The rows of the performance page's suite table, newest first, as column -> value."""
    (table,) = re.findall(r"((?:^\|.*\|\n)+)", section(RESULTS / "performance.md", "The test suite"), flags=re.M)
    header, _, *rows = [[cell.strip() for cell in line.strip("|").split(" | ")] for line in table.splitlines()]
    return [dict(zip(header, row, strict=True)) for row in rows]


def test_the_suites_times_agree_with_the_newest_row_of_its_table():
    """The README and the Development guide state the newest measurement on the AMX Xeon, the whole suite's time and
    the quick subset's, and the guide the newest on the AVX-512 EPYC and on the AVX2-only EPYC, the slowest CPU CI may
    get."""
    rows = suite_rows()
    (newest, *_) = [row for row in rows if row["CPU (2 cores)"].startswith("Intel Xeon with AMX")]
    (epyc, *_) = [row for row in rows if row["CPU (2 cores)"].startswith("AMD EPYC, AVX-512 BF16")]
    (slowest, *_) = [row for row in rows if "AVX2 only" in row["CPU (2 cores)"]]
    suite = minutes(newest["`python -m pytest`"])
    quick = minutes(newest["quick subset"])
    readme = paragraph_after((ROOT / "README.md").read_text(), "python -m pytest\n```")
    development = " ".join((ROOT / "docs" / "guide" / "development.md").read_text().split())
    assert f"in {about(suite)} on 2 cores of an Intel Xeon with AMX" in readme
    assert f"the inner loop, {about(quick)}" in readme
    assert f"takes {about(suite)} on 2 cores of an Intel Xeon with AMX" in development
    assert f"in {about(quick)} on the same 2 cores" in development
    assert f"{about(minutes(epyc['`python -m pytest`']))} on 2 cores of an AMD EPYC with AVX-512 BF16" in development
    assert f"{about(minutes(slowest['`python -m pytest`']))} on 2 cores of an AVX2-only AMD EPYC" in development


def first_paragraph(page: Path) -> str:
    return " ".join(page.read_text().split("\n\n", 2)[1].split())


def test_the_project_has_one_description():
    assert first_paragraph(ROOT / "README.md") == DESCRIPTION
    assert first_paragraph(ROOT / "docs" / "index.md") == DESCRIPTION
    assert yaml.safe_load((ROOT / "mkdocs.yml").read_text())["site_description"] == DESCRIPTION
    shown = " ".join(help_description().split())
    assert shown == f"theseus_pl: {DESCRIPTION[0].lower()}{DESCRIPTION[1:]}"
