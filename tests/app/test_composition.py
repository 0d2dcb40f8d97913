"""What Hydra would refuse as it composes a run's config is said in one line each, with the nearest setting, and
the command exits with status 2 (Hydra's own words exited 1 and advised adding a key nothing reads)."""

import sys

import pytest
from command_runs import run_command

from theseus_pl.app.config.composition import composition_problems

pytestmark = pytest.mark.quick


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        (["trainer.max_step=6"], "trainer.max_step=6: the config has no trainer.max_step; did you mean "
                                 "trainer.max_steps or trainer.max_epochs?"),
        (["+experiment=demo", "optimizer.lrr=1"], "optimizer.lrr=1: the config has no optimizer.lrr; did you mean "
                                                  "optimizer.lr?"),
        (["+experiment=minilm_embedding_quick", "method.alpha=0.5"],
         "method.alpha=0.5: the config has no method.alpha; its settings are name, for_kinds."),
        (["+experiment=demo", "+experiment=sst2_quick"], "Hydra cannot compose the config: Multiple values for "
                                                         "experiment. To override a value use 'override experiment: "
                                                         "sst2_quick'"),
        (["data.task=ñø☃"], "data.task=ñø☃: Hydra's override grammar cannot read the value. Quote it, as the shell "
                           "passes it on: 'data.task=\"ñø☃\"'."),
    ],
)  # fmt: skip
def test_each_override_hydra_cannot_apply_is_named_with_its_fix(arguments, problem):
    assert composition_problems(arguments) == [problem]


def test_a_config_that_composes_a_sweep_or_hydras_own_settings_are_left_alone():
    assert composition_problems(["+experiment=demo", "optimizer.lr=1e-4", "hydra.run.dir=/x", "~logger"]) == []
    assert composition_problems(["-m", "optimizer.lrr=1,2"]) == []  # a sweep: each job is checked on its own
    assert composition_problems(["--config-name", "other", "anything.at=all"]) == []


def test_the_command_exits_with_status_2_and_the_one_line(tmp_path):
    completed = run_command([sys.executable, "-m", "theseus_pl", "trainer.max_step=6"], timeout=300, cwd=tmp_path)
    assert completed.returncode == 2 and "Traceback" not in completed.stderr
    assert completed.stderr.splitlines() == [
        "The command line cannot be read:",
        "- trainer.max_step=6: the config has no trainer.max_step; did you mean trainer.max_steps or "
        "trainer.max_epochs?",
    ]
    assert not list(tmp_path.iterdir())
