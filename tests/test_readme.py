"""The README's commands are the ones CI runs and the ones that exist."""

import re
from pathlib import Path

ROOT = Path(__file__).parents[1]


def quick_start_commands() -> list[str]:
    section = (ROOT / "README.md").read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", section)


def test_quick_start_has_exactly_two_commands_and_ci_runs_the_test_one():
    main_job, tests = quick_start_commands()
    assert main_job.endswith("python -m theseus_pl +experiment=demo")
    assert (ROOT / "conf" / "experiment" / "demo.yaml").is_file()
    assert tests.endswith("python -m pytest")
    assert tests in (ROOT / ".ci" / "run").read_text()
