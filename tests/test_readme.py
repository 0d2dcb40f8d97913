"""The README's commands are the ones CI runs and the ones that exist."""

import re
from pathlib import Path

import pytest
from app_runs import compose_config
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

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


def stated_settings(experiment: str) -> list[tuple[str, str]]:
    """The ``key=value`` settings the README lists in its paragraph on ``+experiment=<experiment>``."""
    marker = f"`+experiment={experiment}` settings:"
    paragraph = (ROOT / "README.md").read_text().split(marker, 1)[1].split("\n\n", 1)[0]
    return re.findall(r"`([\w.]+)=([^`\s]+)`", paragraph)


@pytest.mark.parametrize("experiment", ["demo", "sst2_quick", "stsb_quick"])
def test_quick_experiments_compose_to_the_settings_the_readme_states(experiment):
    settings = stated_settings(experiment)
    assert len(settings) >= 8
    cfg = compose_config(f"+experiment={experiment}")
    for key, value in settings:
        if (ROOT / "conf" / key).is_dir():  # a config group's option, such as model=minilm
            assert cfg[key] == compose_config(f"{key}={value}")[key], key
            continue
        typed = OverridesParser.create().parse_override(f"{key}={value}").value()  # as the command line reads it
        assert OmegaConf.select(cfg, key, throw_on_missing=True) == typed, key
