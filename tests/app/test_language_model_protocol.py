"""The decoder-LM protocol sweep composes every method on equal token budgets."""

import pytest
from hydra import compose, initialize_config_module

pytestmark = pytest.mark.quick

METHODS = {
    "theseus_curriculum": ("lm_theseus", "curriculum"),
    "theseus_constant": ("lm_theseus", "constant"),
    "shortgpt": ("shortgpt", None),
    "shortgpt_healed": ("shortgpt_healed", None),
    "truncation": ("lm_truncation", None),
    "streamline": ("streamline", None),
}


def _compose(*overrides: str):
    with initialize_config_module("theseus_pl.conf", version_base="1.3"):
        return compose("train", overrides=["+experiment=smollm2_quick", "paths.output_dir=x", *overrides],
                       return_hydra_config=True)  # fmt: skip


def test_the_lm_protocol_sweeps_every_method_and_two_seeds():
    cfg = _compose("+sweep=lm_protocol")
    assert dict(cfg.hydra.sweeper.params) == {"lm_protocol": ",".join(METHODS), "seed": "1,2"}
    assert cfg.threads == 1 and cfg.benchmark.repeats == 0


def test_each_lm_protocol_point_is_its_method_on_the_same_token_budget():
    budgets = set()
    for point, (method, replacement) in METHODS.items():
        cfg = _compose("+sweep=lm_protocol", f"lm_protocol={point}")
        assert cfg.method.name == method
        if replacement:
            assert cfg.replacement.kind == replacement
        budgets.add((cfg.trainer.max_steps, cfg.data.batch_size, cfg.data.window, cfg.data.max_eval_windows))
    assert budgets == {(150, 8, 128, 32)}  # smollm2_quick's steps, batch, window and held-out windows for every method


def test_the_adapted_teacher_options_adapt_on_the_runs_own_steps_and_learning_rate():
    for point, name in (("shortgpt_distilled_adapted", "shortgpt_distilled_adapted"),
                        ("theseus_curriculum_distilled_adapted", "lm_theseus_distilled_adapted")):  # fmt: skip
        cfg = _compose(f"+lm_protocol={point}", "trainer.max_steps=450", "optimizer.lr=3e-4")
        assert cfg.method.name == name and cfg.method.teacher == "adapted" and cfg.method.alpha == 1.0
        assert (cfg.finetune.steps, cfg.finetune.lr) == (450, 3e-4)
