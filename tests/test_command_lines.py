"""The five side commands read as one tool: their usage lines name them as invoked, their help is plain text, each
offers --dry-run, and an output folder is --output in every one."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from command_runs import run_command

from theseus_pl.app.config.command_line import refuse_home_shorthand
from theseus_pl.app.config.side_commands import program_name

pytestmark = pytest.mark.quick

COMMANDS = ["report", "deploy", "publish", "dashboard", "submit"]


def module_help(command: str) -> str:
    """``python -m theseus_pl.<command> --help``, run as a user would (with this checkout's code on the path)."""
    src = str(Path(__file__).parents[1] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    done = run_command([sys.executable, "-m", f"theseus_pl.{command}", "--help"], env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_each_commands_help_is_plain_names_it_offers_a_dry_run_and_calls_its_output_folder_output(command):
    text = module_help(command)
    assert text.startswith(f"usage: python -m theseus_pl.{command} ")
    assert "``" not in text and not re.search(r":[a-z]+:`", text)
    assert "--dry-run" in text
    assert set(re.findall(r"--out[\w-]*", text)) <= {"--output"}


@pytest.mark.parametrize("command", COMMANDS)
def test_a_console_script_is_named_by_its_own_name(command, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [f"/venv/bin/theseus-pl-{command}", "--help"])
    module = __import__(f"theseus_pl.{command}", fromlist=["cli"])
    with pytest.raises(SystemExit) as exited:
        module.cli()
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: theseus-pl-{command} ")


def test_each_command_reads_its_command_line_before_it_imports_torch():
    """``--help`` and a refused option answer at once: what deploys, predicts, reports or publishes (torch,
    transformers, Lightning: 5 to 10 s of imports a command on the AVX-512 EPYC) is imported once the line is read.
    And the report's tables and every kind's registration import none of them: ``report`` reads records and writes
    tables (2.1 s where it took 7.7 s). Nor W&B's libraries: its workspace library (0.35 s on the AVX-512 EPYC) is
    imported by every kind's dashboard, which only a view of the runs builds, not every run that reads its kind."""
    modules = ", ".join(f"theseus_pl.{command}" for command in [*COMMANDS, "offline"])
    heavy = "{'torch', 'transformers', 'lightning', 'wandb', 'wandb_workspaces'}"
    commands = f"import sys, {modules}; print(sorted(({heavy} | {{'pandas'}}) & set(sys.modules)))"
    report = ("import sys, theseus_pl.app.report.tables; from theseus_pl.app.results.registry import registered_kinds; "
              f"registered_kinds(); print(sorted({heavy} & set(sys.modules)))")  # fmt: skip
    for code in (commands, report):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
        assert done.stdout.strip() == "[]", (code, done.stdout)


def test_the_name_comes_from_how_python_was_started():
    assert program_name("report", "/site-packages/theseus_pl/report.py") == "python -m theseus_pl.report"
    assert program_name("report", "-c") == "python -m theseus_pl.report"
    assert program_name("report", "/home/me/.local/bin/theseus-pl-report") == "theseus-pl-report"


def test_defaults_are_shown_and_no_default_says_none():
    text = " ".join(module_help("submit").split())  # as one line: argparse wraps the help
    assert "(default: submission)" in text and "(default: 64)" in text
    assert "default: None" not in text and "default: False" not in text


def test_the_app_is_the_theseus_pl_console_script_and_refuses_a_home_shorthand_before_hydra_reads_it():
    (script,) = [
        entry for entry in importlib.metadata.entry_points(group="console_scripts") if entry.name == "theseus-pl"
    ]
    assert script.value == "theseus_pl.__main__:cli"
    assert refuse_home_shorthand(["data.glue_dir=~/glue_data"]) and not refuse_home_shorthand(["data.glue_dir=/glue"])


def test_a_command_still_forks_after_the_test_imported_libraries_that_set_variables_at_import():
    """Lightning and lm-eval set variables as they are imported; a test that imported them must not push every later
    command of its worker into a fresh interpreter (about 8 s each on the AVX2-only EPYC)."""
    import lightning  # noqa: F401
    import lm_eval.models.huggingface  # noqa: F401
    from command_runs import _forkable

    assert _forkable([sys.executable, "-m", "theseus_pl", "--help"], dict(os.environ))
