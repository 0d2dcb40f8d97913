"""The budget sweep (when does Theseus pay off?): every method gets the same optimizer steps at each budget point,
Theseus replaces for the same share of them, and validation comes every sixth of the run."""

import pytest
from app_runs import compose_config
from hydra import compose, initialize_config_module

# Each protocol and the method it trains.
PROTOCOLS = {"fine_tuning": "fine_tuning", "kd": "kd", "theseus_constant": "theseus",
             "theseus_curriculum": "theseus", "theseus_kd": "theseus_kd"}  # fmt: skip


@pytest.mark.parametrize("experiment", ["sst2_quick", "stsb_quick"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_each_budget_point_gives_every_method_the_stated_steps_share_and_validations(experiment, protocol):
    for steps in (600, 1800, 5400):
        cfg = compose_config(f"+experiment={experiment}", "+sweep=budget", f"protocol={protocol}",
                             f"budget=steps{steps}")  # fmt: skip
        assert cfg.trainer.max_steps == cfg.budget.steps == steps
        assert cfg.schedule_steps == steps // 2  # replacing for half the run, as the quick experiments' 300 of 600
        assert cfg.trainer.val_check_interval * 6 == steps
        assert cfg.method.name == PROTOCOLS[protocol]


def test_the_sweep_varies_the_budget_and_the_seed_for_the_method_named():
    with initialize_config_module("theseus_pl.conf", version_base="1.3"):
        cfg = compose("train", overrides=["+experiment=sst2_quick", "+sweep=budget", "protocol=kd",
                                          "paths.output_dir=x"], return_hydra_config=True)  # fmt: skip
    assert dict(cfg.hydra.sweeper.params) == {"budget": "steps600,steps1800,steps5400", "seed": "1,2,3"}
    assert cfg.method.name == "kd" and cfg.threads == 1
