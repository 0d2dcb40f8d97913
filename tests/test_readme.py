"""The commands the README and the docs show are the ones CI runs and the ones that exist."""

import importlib
import re
import shlex
import tomllib
from pathlib import Path

import pytest
from app_runs import compose_config
from hydra import compose, initialize_config_module
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

ROOT = Path(__file__).parents[1]
CONF = ROOT / "conf"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def page_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


def quick_start_commands() -> list[str]:
    section = (ROOT / "README.md").read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", section)


def test_quick_start_has_exactly_two_commands_and_ci_runs_the_test_one():
    main_job, tests = quick_start_commands()
    assert main_job.endswith("python -m theseus_pl +experiment=demo")
    assert (CONF / "experiment" / "demo.yaml").is_file()
    assert tests.endswith("python -m pytest")
    assert tests in (ROOT / ".ci" / "run").read_text()


def test_the_readme_states_the_python_that_pip_enforces_and_ruff_targets():
    """A floor stated below the code's crashes a user's first run (3.10's hashlib has no ``file_digest``, which every
    cache key reads), so the README's floor is ``requires-python``'s, and ruff lints for that version."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    minor = re.fullmatch(r">=3\.(\d+)", project["project"]["requires-python"])[1]
    assert f"Python 3.{minor} or later" in (ROOT / "README.md").read_text()
    assert project["tool"]["ruff"]["target-version"] == f"py3{minor}"


def test_ci_builds_the_docs_strictly():
    assert 'mkdocs build --strict --site-dir "$(mktemp -d)"' in (ROOT / ".ci" / "run").read_text()


def test_the_readme_shows_the_python_example_that_the_tests_run():
    section = (ROOT / "README.md").read_text().split("## In Python", 1)[1].split("\n## ", 1)[0]
    (shown,) = re.findall(r"```python\n(.+?)\n```", section, re.S)
    (run,) = re.findall(r"```python\n(.+?)\n```", (ROOT / "docs" / "guide" / "own-model.md").read_text(), re.S)
    assert shown == run  # the example tests/lightning/test_own_data_example.py runs


def stated_settings(experiment: str) -> list[tuple[str, str]]:
    """The ``key=value`` settings docs/configuration.md lists in its paragraph on ``+experiment=<experiment>``."""
    marker = f"`+experiment={experiment}` settings:"
    paragraph = (ROOT / "docs" / "configuration.md").read_text().split(marker, 1)[1].split("\n\n", 1)[0]
    return re.findall(r"`([\w.]+)=([^`\s]+)`", paragraph)


@pytest.mark.parametrize("experiment", ["demo", "sst2_quick", "stsb_quick"])
def test_quick_experiments_compose_to_the_settings_the_docs_state(experiment):
    settings = stated_settings(experiment)
    assert len(settings) >= 8
    cfg = compose_config(f"+experiment={experiment}")
    for key, value in settings:
        if (CONF / key).is_dir():  # a config group's option, such as model=minilm
            assert cfg[key] == compose_config(f"{key}={value}")[key], key
            continue
        typed = OverridesParser.create().parse_override(f"{key}={value}").value()  # as the command line reads it
        assert OmegaConf.select(cfg, key, throw_on_missing=True) == typed, key


def shown_commands(path: Path) -> list[str]:
    """Every ``python -m theseus_pl ...`` command of a page: in its bash blocks and in inline code."""
    text = path.read_text()
    commands = []
    for block in re.findall(r"```bash\n(.*?)\n```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", line)
            if "python -m theseus_pl " in line:
                commands.append(line[line.index("python -m theseus_pl ") :].strip())
    commands += re.findall(r"`(python -m theseus_pl [^`]+)`", text)
    return commands


APP_COMMANDS = [(page, command) for page in PAGES for command in shown_commands(page)]


def test_the_readme_and_docs_show_app_commands():
    assert {page_id(page) for page, _ in APP_COMMANDS} >= {"README.md", "docs/guide/running.md"}
    assert len(APP_COMMANDS) >= 40


@pytest.mark.parametrize(("page", "command"), APP_COMMANDS, ids=[f"{page_id(p)}: {c}" for p, c in APP_COMMANDS])
def test_every_command_shown_composes(page, command):
    """Each command composes as written; a multirun composes at the first value of each swept key."""
    if re.search(r"\+experiment=\S*<", command):  # a template (+experiment=<task>_curriculum): names checked below
        return
    words = shlex.split(re.sub(r"<[^>]*>", "X", command))[3:]  # <that run>, <date_time>: placeholders; as a shell
    words = [w for w in words if w not in ("-m", "--multirun") and not w.startswith("${")]  # ${args_no_hyphens}: W&B's
    if any(word.startswith("--") for word in words):  # --help, --cfg job
        return
    overrides = []
    for override in OverridesParser.create().parse_overrides(words):
        if override.is_sweep_override():
            overrides.append(f"{override.get_key_element()}={next(iter(override.sweep_string_iterator()))}")
        else:
            overrides.append(override.input_line)
    with initialize_config_module("theseus_pl.conf", version_base="1.3"):  # hydra/launcher=... needs the hydra node
        compose("train", overrides=["paths.output_dir=unused", *overrides], return_hydra_config=True)


def named_options(path: Path) -> list[tuple[str, str]]:
    """``group=option`` for the config groups of conf/ a page names (``+experiment=demo``, ``method=kd``)."""
    groups = "|".join([*sorted(p.name for p in CONF.iterdir() if p.is_dir()), "hydra/launcher"])
    text = re.sub(r"```python\n.*?\n```", "", path.read_text(), flags=re.S)  # callbacks=... is Python there
    return re.findall(rf"(?<![\w./])\+?({groups})=([a-z][\w]*)(?![\w(])", text)  # not a sweep's choice(...)


NAMED = sorted({(page, group, option) for page in PAGES for group, option in named_options(page)})


def test_the_readme_and_docs_name_experiments_and_sweeps():
    names = {(group, option) for _, group, option in NAMED}
    assert ("experiment", "demo") in names and ("experiment", "sst2_quick") in names
    assert ("sweep", "protocol") in names


@pytest.mark.parametrize(("page", "group", "option"), NAMED, ids=[f"{page_id(p)}: {g}={o}" for p, g, o in NAMED])
def test_every_experiment_sweep_and_option_named_exists(page, group, option):
    assert (CONF / group / f"{option}.yaml").is_file(), f"{page_id(page)} names {group}={option}"


def module_commands(path: Path) -> list[str]:
    return re.findall(r"python -m (theseus_pl\.\w+)", path.read_text())


def test_every_module_command_shown_exists():
    for page in PAGES:
        for module in module_commands(page):
            assert (ROOT / "src" / (module.replace(".", "/") + ".py")).is_file(), f"{page_id(page)}: {module}"


def python_names(path: Path) -> list[str]:
    """Dotted ``theseus_pl.…`` names a page gives: inline code, ``_target_=`` values and Python imports."""
    text = path.read_text()
    names = re.findall(r"`(theseus_pl(?:\.\w+)+)(?:\(|`)", text)
    names += re.findall(r"_target_=(theseus_pl(?:\.\w+)+)", text)
    for module, imported in re.findall(r"^from (theseus_pl[\w.]*) import ([\w, ]+)$", text, re.M):
        names += [f"{module}.{name.strip()}" for name in imported.split(",")]
    return names


NAMES = sorted({(page, name) for page in PAGES for name in python_names(page)})


@pytest.mark.parametrize(("page", "name"), NAMES, ids=[f"{page_id(p)}: {n}" for p, n in NAMES])
def test_every_module_and_object_named_exists(page, name):
    parts = name.split(".")
    for split in range(len(parts), 0, -1):  # the longest importable module, then attributes
        try:
            found = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[split:]:
            assert hasattr(found, attribute), f"{page_id(page)} names {name}"
            found = getattr(found, attribute)
        return
    pytest.fail(f"{page_id(page)} names {name}, which does not import")


def repository_paths(path: Path) -> list[str]:
    """Files and folders of this repository a page names in inline code (outputs and placeholders aside)."""
    found = re.findall(r"`((?:src|tests|conf|sweeps|notebooks|benchmarks|docs)/[\w./-]*)`", path.read_text())
    return [p for p in found if not p.startswith("benchmarks/results/")]


def test_every_repository_path_named_exists():
    for page in PAGES:
        for name in repository_paths(page):
            assert (ROOT / name).exists(), f"{page_id(page)} names {name}"
