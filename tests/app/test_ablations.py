"""The ablations: each sweep composes to the right axis, Table 5 evaluates one successor module at a time,
intermediate-task transfer starts from another run's successor."""

import importlib.resources
import json

import pytest
import torch
from app_runs import compose_config, tiny_run_overrides
from conftest import tiny_model
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf
from safetensors.torch import load_file

from theseus_pl.app.kinds.task_model.run import single_module_scores
from theseus_pl.app.methods.schedules import build_schedule
from theseus_pl.app.run.pipeline import run
from theseus_pl.core.replacing import TheseusModel
from theseus_pl.data.datamodule import TextTaskDataModule


def sweep_config(*overrides):
    with initialize_config_module("theseus_pl.conf", version_base="1.3"):
        return compose("train", overrides=["paths.output_dir=x", *overrides], return_hydra_config=True)


@pytest.mark.parametrize(
    ("sweep", "axis", "values"),
    [
        ("schedulers", "replacement", "constant,curriculum,anti_curriculum"),
        ("depths", "theseus.successor_layers", "6,4,3"),
        ("rates", "replacement.p", "0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9"),
        ("rates_equivalent_lr", "replacement.p", "0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9"),
        ("init", "theseus.init", "bottom,top,every_other"),
    ],
)
def test_ablation_sweeps_vary_their_axis(sweep, axis, values):
    cfg = sweep_config("+experiment=rte_constant", f"+sweep={sweep}")
    assert dict(cfg.hydra.sweeper.params) == {axis: values}


def test_equivalent_learning_rate_is_lr_prime_over_p():
    cfg = compose_config(
        "+experiment=rte_constant", "+sweep=rates_equivalent_lr", "replacement.p=0.4", "equivalent_lr=2e-5"
    )
    assert cfg.optimizer.lr == pytest.approx(5e-5)
    assert compose_config("+experiment=rte_constant", "+sweep=rates", "replacement.p=0.4").optimizer.lr == 2e-5


def test_single_module_sweep_stops_at_the_switch():
    cfg = compose_config("+experiment=rte_constant", "+sweep=single_module")
    assert cfg.trainer.max_steps == build_schedule(**cfg.replacement).switch_step
    assert cfg.evaluation.single_modules


def test_fixed_gate_evaluation_runs_exactly_one_successor_module(tiny_tokenizer, tmp_path):
    from glue_files import make_glue_dir

    theseus = TheseusModel(tiny_model("bert", num_labels=2), 3)
    calls = []
    for index, block in enumerate(theseus.blocks):
        block.successor.register_forward_hook(lambda *_, i=index: calls.append(("successor", i)))
        for layer in block.predecessor:
            layer.register_forward_hook(lambda *_, i=index: calls.append(("predecessor", i)))
    glue = str(make_glue_dir(tmp_path / "g"))
    datamodule = TextTaskDataModule("RTE", tiny_tokenizer, glue_dir=glue, cache_dir=tmp_path, batch_size=8,
                                    eval_batch_size=8)  # fmt: skip
    scores = single_module_scores(
        theseus, datamodule, {"accelerator": "cpu", "devices": 1, "enable_progress_bar": False}
    )
    assert len(scores) == 3
    per_evaluation = [calls[i * 4 : (i + 1) * 4] for i in range(3)]  # one dev batch: 2 + 1 + 1 layers
    for i, seen in enumerate(per_evaluation):
        assert [what for what in seen if what[0] == "successor"] == [("successor", i)]
    assert all(block.use_successor for block in theseus.blocks), "the gate is reset to all successors afterwards"


def test_table5_run_writes_one_score_per_module(tiny_base, glue_dir, tmp_path):
    overrides = [o for o in tiny_run_overrides(tiny_base, glue_dir, tmp_path) if not o.startswith("trainer.max_steps")]
    cfg = compose_config(*overrides, "+sweep=single_module")
    results = run(cfg)
    assert len(results.single_module_scores) == 2
    assert results.steps == cfg.schedule_steps
    assert results.successor_finetuning_steps == 0


def test_single_module_scores_need_theseus(tiny_base, glue_dir, tmp_path):
    with pytest.raises(ValueError, match="needs method=theseus"):
        run(compose_config(*tiny_run_overrides(tiny_base, glue_dir, tmp_path), "+sweep=single_module", "method=kd"))


def test_intermediate_task_transfer_fine_tunes_another_runs_successor(tiny_base, glue_dir, tmp_path):
    source = run(compose_config(*tiny_run_overrides(tiny_base, glue_dir, tmp_path, output="mnli"), "data.task=MNLI"))
    transfer = run(compose_config(*tiny_run_overrides(tiny_base, glue_dir, tmp_path), "method=transfer",
                                  f"method.successor={source.successor_dir}"))  # fmt: skip
    assert transfer.method == "transfer" and transfer.task == "RTE"
    assert transfer.layers.successor == 2
    settings = json.loads((tmp_path / "run" / "results.json").read_text())["settings"]
    assert settings["method.successor"] == source.successor_dir
    assert settings["theseus.init"] is None  # no layers of this predecessor chosen: another run's successor, whole


@pytest.mark.parametrize(
    ("override", "message"),
    [("replacement.b=high", r"replacement\.b='high' must be a number"),
     ("replacement.steps_to_full=1.5", r"replacement\.steps_to_full=1\.5 must be an integer")],
)  # fmt: skip
def test_a_sweep_value_of_the_wrong_type_is_named(override, message, tiny_base, glue_dir, tmp_path):
    with pytest.raises(ValueError, match=message):
        run(compose_config(*tiny_run_overrides(tiny_base, glue_dir, tmp_path), override))


def test_an_ablation_deeper_than_the_predecessor_is_refused_before_training(tiny_base, glue_dir, tmp_path):
    with pytest.raises(ValueError, match=r"theseus\.successor_layers=6 must be between 1 and the predecessor's 4"):
        run(compose_config(*tiny_run_overrides(tiny_base, glue_dir, tmp_path), "theseus.successor_layers=6"))
    assert not (tmp_path / "cache" / "predecessors").exists()


def _flat(config) -> dict:
    return dict(_items(OmegaConf.to_container(config, resolve=True)))


def _items(node, prefix=""):
    for key, value in node.items():
        if isinstance(value, dict):
            yield from _items(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


@pytest.mark.parametrize(
    ("ablation", "changes"),
    [
        ("finetune_shared", {"theseus.finetune_shared": True}),
        ("lr_per_phase", {"theseus.lr_schedule": "per_phase"}),
        ("replacing_quarter", {"schedule_steps": 150, "replacement.steps_to_full": 150}),
        ("replacing_three_quarters", {"schedule_steps": 450, "replacement.steps_to_full": 450}),
        ("init_top", {"theseus.init": "top"}),
        ("init_every_other", {"theseus.init": "every_other"}),
    ],
)
def test_each_protocol_ablation_changes_one_thing_of_the_protocols_theseus(ablation, changes):
    def flat(name):
        return _flat(compose_config("+experiment=sst2_quick", "+sweep=protocol_ablations", f"ablation={name}"))

    reference, changed = flat("none"), flat(ablation)
    assert (reference["method.name"], reference["replacement.kind"], reference["optimizer.lr"]) == (
        "theseus", "curriculum", 1e-4
    )  # fmt: skip
    differing = {key: changed[key] for key in reference if changed[key] != reference[key]}
    assert differing == {"ablation": ablation, **changes}


def test_the_ablations_sweep_all_variants_over_three_seeds():
    params = sweep_config("+experiment=sst2_quick", "+sweep=protocol_ablations").hydra.sweeper.params
    folder = importlib.resources.files("theseus_pl.conf") / "ablation"
    variants = {path.name.removesuffix(".yaml") for path in folder.iterdir() if path.name.endswith(".yaml")}
    assert params.seed == "1,2,3"
    assert set(params.ablation.split(",")) == variants


@pytest.mark.parametrize("finetune_shared", [False, True])
def test_finetune_shared_decides_whether_the_exported_successor_keeps_the_predecessors_embeddings(
    finetune_shared, tiny_base, glue_dir, tmp_path
):
    overrides = [  # one validation, after the last step: the exported weights are the ones phase 2 trained
        *tiny_run_overrides(tiny_base, glue_dir, tmp_path), "trainer.val_check_interval=6",
        f"theseus.finetune_shared={finetune_shared}",
    ]  # fmt: skip
    results = run(compose_config(*overrides))
    successor = load_file(f"{results.successor_dir}/model.safetensors")
    predecessor = load_file(f"{results.predecessor.dir}/model.safetensors")
    shared = [key for key in successor if "embeddings" in key or "classifier" in key or "pooler" in key]
    assert shared and results.settings["theseus.finetune_shared"] is finetune_shared
    kept = all(torch.equal(successor[key], predecessor[key]) for key in shared)
    assert kept is not finetune_shared
