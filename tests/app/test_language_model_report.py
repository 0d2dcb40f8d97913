"""The report over decoder-LM runs: the LM protocol's table, its warnings and its perplexity-against-layers plot."""

import json
from pathlib import Path

import pytest
from results_records import a_run, plant

from theseus_pl.app.kinds.language_model.record import (
    GenerationSample,
    LanguageModelData,
    LanguageModelResults,
    LanguageModelSide,
)
from theseus_pl.app.kinds.language_model.report import (
    language_model_frame,
    language_model_table,
    language_model_warnings,
    perplexity_figure,
    tokens_figure,
)
from theseus_pl.app.report.files import MANIFEST
from theseus_pl.app.report.tables import find_records
from theseus_pl.app.results.envelope import Hardware, write_results
from theseus_pl.app.results.reading import read_run
from theseus_pl.app.ship.model_card import model_card
from theseus_pl.report import main

pytestmark = pytest.mark.quick

PREDECESSOR_PERPLEXITY = 25.5


def language_model_runs(folder: Path) -> list[LanguageModelResults]:
    """The decoder-LM runs' records below ``folder``, as the report reads them."""
    return [record for record in find_records([folder])[0] if isinstance(record, LanguageModelResults)]


def plant_lm_run(
    folder: Path,
    method: str,
    layers: int,
    perplexity: float,
    seed: int,
    train_tokens: int,
    sst2: tuple[float, float] | None = None,
    other_perplexity: float | None = None,
    settings: dict | None = None,
) -> Path:
    """A decoder-LM run's ``results.json`` as the app writes it, of a 30-layer predecessor; ``sst2``: the
    predecessor's and the successor's lm-eval sst2_local accuracy, if scored; ``other_perplexity``: the successor's on
    the other held-out text, if scored (the predecessor's is 40, KL a tenth of it, agreement 40 %)."""
    before, after = ({"sst2_local": {"acc": acc, "acc_stderr": 0.01}} if sst2 else None for acc in (sst2 or (0, 0)))
    other = other_perplexity is not None
    record = LanguageModelResults(
        method=method,
        settings={"seed": seed, **(settings or {})},
        predecessor=LanguageModelSide(dir="smollm2", layers=30, params=134_515_008, perplexity=PREDECESSOR_PERPLEXITY,
                                      nll=3.24, origin="gguf", lm_eval=before,
                                      other_text={"perplexity": 40.0, "nll": 3.7} if other else None),
        successor=LanguageModelSide(dir=str(folder / "successor"), layers=layers, params=70_000_000,
                                    perplexity=perplexity, nll=4.0, kl=perplexity / 100, agreement=0.5,
                                    lm_eval=after,
                                    other_text={"perplexity": other_perplexity, "nll": 4.5,
                                                "kl": other_perplexity / 10, "agreement": 0.4} if other else None),
        data=LanguageModelData(source="speeches", window=128, train_windows=1523, eval_windows=32, eval_tokens=4064,
                               train_tokens=train_tokens, other_source="headlines" if other else None,
                               other_eval_windows=32 if other else None, other_eval_tokens=4064 if other else None),
        steps=train_tokens // 1024, seed=seed, speed={"decode_speedup": 30 / layers},
        sample=GenerationSample(prompt="The", predecessor=" a", successor=" b"),
        hardware=Hardware(precision="32-true", precision_requested="auto", accelerator="cpu", cpu=None, cpu_flags=[]),
        wall_seconds=120.0,
    )  # fmt: skip
    folder.mkdir(parents=True)
    return write_results(folder / "results.json", record)


def plant_lm_protocol(root: Path, theseus_tokens: int = 61_440) -> None:
    """ShortGPT (no training) and Theseus at 15 kept layers, Theseus also at 20, seeds 1 and 2."""
    for seed in (1, 2):
        plant_lm_run(root / f"shortgpt_{seed}", "shortgpt", 15, 280.0 + 20 * seed, seed, 0)
        plant_lm_run(root / f"theseus15_{seed}", "lm_theseus", 15, 30.0 + 10 * seed, seed, theseus_tokens)
        plant_lm_run(root / f"theseus20_{seed}", "lm_theseus", 20, 28.0 + seed, seed, 61_440)


def test_the_lm_table_gives_each_method_and_depth_its_perplexity_over_seeds_beside_the_predecessor(tmp_path):
    plant_lm_protocol(tmp_path / "runs")
    table = language_model_table(language_model_frame(language_model_runs(tmp_path / "runs")))
    assert list(zip(table["method"], table["layers"], strict=True)) == [
        ("predecessor", 30), ("lm_theseus", 20), ("lm_theseus", 15), ("shortgpt", 15),
    ]  # fmt: skip
    theseus15 = table.iloc[2]
    assert (theseus15["median"], theseus15["min"], theseus15["max"]) == (45.0, 40.0, 50.0)
    assert theseus15["seeds"] == "1 2" and theseus15["tokens trained"] == 61_440
    assert theseus15["decode speed-up"] == 2.0 and theseus15["minutes a run"] == 2.0
    assert table.iloc[0]["median"] == PREDECESSOR_PERPLEXITY and table.iloc[3]["tokens trained"] == 0

    figure = perplexity_figure(table)
    legend = sorted(text.get_text() for text in figure.axes[0].get_legend().get_texts())
    assert legend == ["lm_theseus", "predecessor (30 layers)", "shortgpt"]


def test_a_seed_without_a_perplexity_leaves_its_rows_spread_empty_rather_than_the_other_seeds(tmp_path):
    """A third seed that scored nothing (a NaN, null in its record): pandas skipped it, and the row gave the two
    others' median, min and max beside seeds 1 2 3, as the task-model tables never do."""
    plant_lm_protocol(tmp_path / "runs")
    plant_lm_run(tmp_path / "runs" / "theseus15_3", "lm_theseus", 15, float("nan"), 3, 61_440)
    table = language_model_table(language_model_frame(language_model_runs(tmp_path / "runs")))
    theseus15 = table.iloc[2]
    assert theseus15["seeds"] == "1 2 3" and theseus15[["median", "min", "max"]].isna().all()
    assert (table.iloc[1]["median"], table.iloc[1]["seeds"]) == (29.5, "1 2")  # the other rows as they were


def test_a_predecessor_that_scored_nothing_in_every_run_leaves_its_cells_empty(tmp_path, capsys):
    """Its perplexity was inf or NaN (null in each record): the report ended in a TypeError, rounding a column of
    None, where one run in many with a number made it a column of numbers."""
    for seed in (1, 2):
        path = plant_lm_run(tmp_path / f"run{seed}", "lm_theseus", 15, 30.0 + seed, seed, 61_440)
        record = json.loads(path.read_text())
        record["predecessor"]["perplexity"] = None
        path.write_text(json.dumps(record))
    report = main([str(tmp_path), "--output", str(tmp_path / "out")])
    assert "2 finished runs" in capsys.readouterr().out and (tmp_path / "out" / "lm_table.md").is_file()
    table = language_model_table(language_model_frame(language_model_runs(tmp_path)))
    assert table.iloc[0][["median", "min", "max"]].isna().all() and table.iloc[1]["median"] == 31.5
    assert report["warnings"] == []


def test_the_plot_of_one_depth_ticks_whole_layers(tmp_path):
    for seed in (1, 2):
        plant_lm_run(tmp_path / f"s{seed}", "shortgpt", 15, 300.0, seed, 0)
    figure = perplexity_figure(language_model_table(language_model_frame(language_model_runs(tmp_path))))
    ticks = figure.axes[0].get_xticks()
    assert 15 in ticks and all(float(tick).is_integer() for tick in ticks)


def test_the_lm_table_has_a_column_per_lm_eval_task_only_where_runs_scored_it(tmp_path):
    for seed, accuracy in ((1, 0.6), (2, 0.7)):
        plant_lm_run(tmp_path / f"s{seed}", "shortgpt", 15, 300.0, seed, 0, sst2=(0.76, accuracy))
    table = language_model_table(language_model_frame(language_model_runs(tmp_path)))
    assert list(table.columns[5:8]) == ["KL", "agreement %", "sst2_local acc %"]
    assert table["sst2_local acc %"].tolist() == pytest.approx([76.0, 65.0])
    plant_lm_protocol(tmp_path / "unscored")
    assert "sst2_local acc %" not in language_model_table(
        language_model_frame(language_model_runs(tmp_path / "unscored"))
    )


def test_the_lm_table_gives_the_other_held_out_text_beside_the_training_text_where_runs_scored_one(tmp_path):
    for seed, perplexity in ((1, 50.0), (2, 70.0)):
        plant_lm_run(tmp_path / f"s{seed}", "shortgpt_healed", 15, 30.0, seed, 1024, other_perplexity=perplexity)
    table = language_model_table(language_model_frame(language_model_runs(tmp_path)))
    assert list(table.columns[5:10]) == [
        "KL", "agreement %", "other-text perplexity", "other-text KL", "other-text agreement %",
    ]  # fmt: skip
    assert table["other-text perplexity"].tolist() == [40.0, 60.0]  # the predecessor's, then the median
    assert table["other-text KL"].iloc[1] == pytest.approx(6.0) and table["other-text agreement %"].iloc[1] == 40.0
    plant_lm_protocol(tmp_path / "unscored")
    assert "other-text perplexity" not in language_model_table(
        language_model_frame(language_model_runs(tmp_path / "unscored"))
    )


def test_runs_with_an_adapted_teacher_give_it_a_reference_row_under_the_predecessor(tmp_path):
    for seed in (1, 2):
        folder = plant_lm_run(tmp_path / f"s{seed}", "shortgpt_distilled_adapted", 15, 40.0, seed, 153_600).parent
        record = json.loads((folder / "results.json").read_text())
        record["teacher"] = {**record["predecessor"], "perplexity": 20.0 + seed, "kl": 0.2, "agreement": 0.8,
                             "origin": "adapted"}  # fmt: skip
        record["settings"] = {"finetune.steps": 50}  # a third of the run's 150 steps
        (folder / "results.json").write_text(json.dumps(record))
    table = language_model_table(language_model_frame(language_model_runs(tmp_path)))
    assert table["method"].tolist() == ["predecessor", "predecessor adapted to the text", "shortgpt_distilled_adapted"]
    adapted = table.iloc[1]
    assert (adapted["median"], adapted["min"], adapted["max"], adapted["layers"]) == (21.5, 21.0, 22.0, 30)
    assert adapted["KL"] == 0.2 and adapted["agreement %"] == 80.0 and adapted["tokens trained"] == 51_200
    for seed in (1, 2):  # as recorded since: a run of accumulated batches adapted its teacher on unaccumulated ones
        record = json.loads((tmp_path / f"s{seed}" / "results.json").read_text())
        record["data"]["teacher_train_tokens"] = 12_800
        (tmp_path / f"s{seed}" / "results.json").write_text(json.dumps(record))
    table = language_model_table(language_model_frame(language_model_runs(tmp_path)))
    assert table.iloc[1]["tokens trained"] == 12_800


def test_a_speed_timed_on_a_busy_machine_is_left_out_of_the_table_with_a_warning(tmp_path):
    for seed, other_cores in ((1, 0.05), (2, 1.2)):
        path = plant_lm_run(tmp_path / f"s{seed}", "shortgpt", 15, 300.0, seed, 0)
        record = json.loads(path.read_text())
        record["speed"] = {"decode_speedup": 1.5 * seed, "other_cores": other_cores}
        path.write_text(json.dumps(record))
    frame = language_model_frame(language_model_runs(tmp_path))
    assert language_model_table(frame)["decode speed-up"].iloc[1] == 1.5  # seed 2's 3.0 is not the model's
    (warning,) = language_model_warnings(frame)
    assert warning.startswith("1 run(s) timed their speed while other processes kept the machine busy")
    assert str(tmp_path / "s2") in warning
    assert read_run(path).summary().get("final/decode_speedup") is None and "not the model's" in str(
        model_card(read_run(path))
    )


def test_the_report_command_writes_the_lm_table_and_plot_and_warns_of_unequal_token_budgets(tmp_path, capsys):
    plant_lm_protocol(tmp_path / "runs", theseus_tokens=30_720)
    plant_lm_run(tmp_path / "runs" / "healed", "shortgpt_healed", 15, 33.0, 1, 61_440)  # Theseus had half of it
    report = main([str(tmp_path / "runs"), "--output", str(tmp_path / "out")])
    assert {path.name for path in report["written"]} == {
        "lm_table.md", "lm_table.csv", "lm_runs.md", "lm_runs.csv", "perplexity_vs_layers.png",
    }  # fmt: skip
    lines = (tmp_path / "out" / "lm_table.md").read_text().splitlines()
    assert lines[0].startswith("| method | layers | median | min | max | KL | agreement % | tokens trained |")
    assert lines[5].startswith("| shortgpt | 15 | 310.00 | 300.00 | 320.00 | 3.10 | 50.00 | 0 | 2.00 |")
    assert report["warnings"] == [  # at 20 layers Theseus trains alone: nothing to compare there
        "The language-model methods trained on different numbers of tokens: lm_theseus 30720; shortgpt_healed 61440."
    ]
    assert "| lm_theseus | 15 | 45.00 |" in capsys.readouterr().out


def test_a_folder_of_encoder_and_lm_runs_gets_both_reports(tmp_path):
    plant_lm_protocol(tmp_path / "runs")
    plant(tmp_path / "runs" / "sst2", a_run("SST-2", "theseus_curriculum", 84.0, 82.0))
    report = main([str(tmp_path / "runs"), "--output", str(tmp_path / "out")])
    assert report["tasks"] == ["SST-2"]
    assert (tmp_path / "out" / "table.md").is_file() and (tmp_path / "out" / "lm_table.md").is_file()


def test_two_token_budgets_get_a_row_each_and_a_plot_of_the_score_against_tokens(tmp_path):
    for seed in (1, 2):
        for tokens, other in ((153_600, 800.0), (460_800, 900.0)):
            plant_lm_run(tmp_path / f"healed{tokens}_{seed}", "shortgpt_healed", 15, 30.0, seed, tokens,
                         other_perplexity=other + seed)  # fmt: skip
            plant_lm_run(tmp_path / f"theseus{tokens}_{seed}", "lm_theseus", 15, 35.0, seed, tokens,
                         other_perplexity=other - 50 + seed)  # fmt: skip
    table = language_model_table(language_model_frame(language_model_runs(tmp_path)))
    healed = table[table["method"] == "shortgpt_healed"]
    assert list(healed["tokens trained"]) == [153_600, 460_800]  # not one median over both budgets
    assert list(healed["other-text perplexity"]) == [801.5, 901.5] and list(healed["seeds"]) == ["1 2", "1 2"]

    axes = tokens_figure(table).axes[0]
    assert axes.get_ylabel() == "other held-out text's perplexity"
    lines = {line.get_label(): list(line.get_ydata()) for line in axes.get_lines()}
    assert lines["lm_theseus"] == [751.5, 851.5] and lines["shortgpt_healed"] == [801.5, 901.5]
    assert lines["predecessor (30 layers)"] == [40.0, 40.0]


def test_one_budget_per_method_draws_no_plot_against_tokens(tmp_path):
    plant_lm_protocol(tmp_path)
    assert tokens_figure(language_model_table(language_model_frame(language_model_runs(tmp_path)))) is None
    for seed in (1, 2):  # runs of methods that train nothing: an empty plot was written
        plant_lm_run(tmp_path / "untrained" / f"shortgpt_{seed}", "shortgpt", 15, 300.0, seed, 0)
    table = language_model_table(language_model_frame(language_model_runs(tmp_path / "untrained")))
    assert tokens_figure(table) is None


def test_a_mixed_distillation_loss_is_a_row_of_its_own(tmp_path):
    for alpha, perplexity in ((1.0, 40.0), (0.5, 30.0)):
        path = plant_lm_run(tmp_path / f"alpha{alpha}", "shortgpt_distilled", 15, perplexity, 1, 153_600)
        record = json.loads(path.read_text())
        record["settings"]["method.alpha"] = alpha  # as a run with method.alpha writes it
        path.write_text(json.dumps(record))
    table = language_model_table(language_model_frame(language_model_runs(tmp_path)))
    assert dict(zip(table["method"], table["median"], strict=True))["shortgpt_distilled (alpha 0.5)"] == 30.0
    assert dict(zip(table["method"], table["median"], strict=True))["shortgpt_distilled"] == 40.0


def test_a_report_into_a_folder_of_an_earlier_report_leaves_only_its_own_files(tmp_path, capsys):
    plant_lm_protocol(tmp_path / "lm")
    plant(tmp_path / "encoders" / "sst2", a_run("SST-2", "theseus_curriculum", 84.0, 82.0))
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")  # not a report's: left alone
    (tmp_path / "out" / "budget.csv").write_text("mine")  # named as a report's, but no report wrote it (it was removed)
    main([str(tmp_path / "lm"), "--output", str(tmp_path / "out")])
    report = main([str(tmp_path / "encoders"), "--output", str(tmp_path / "out")])
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == sorted(
        [*(path.name for path in report["written"]), "notes.txt", "budget.csv", MANIFEST]
    )  # no lm_table.md from the earlier report beside this one's table.md
    assert "Removed what an earlier report left there: lm_runs.csv, lm_runs.md, lm_table.csv" in capsys.readouterr().out
    assert (tmp_path / "out" / "budget.csv").read_text() == "mine"


def test_a_damaged_run_is_skipped_in_one_line_and_the_others_are_reported(tmp_path, caplog):
    plant(tmp_path / "runs" / "a", a_run("SST-2", "theseus_curriculum", 84.0, 82.0))
    plant(tmp_path / "runs" / "b", a_run("SST-2", "kd", 84.0, 81.0))
    damaged = tmp_path / "runs" / "a" / "results.json"
    damaged.write_text(damaged.read_text()[:300])  # cut short
    report = main([str(tmp_path / "runs"), "--output", str(tmp_path / "out")])
    assert report["table"]["kd"] and "theseus_curriculum" not in report["table"]
    (skipped,) = [message for message in caplog.messages if "Skipped" in message]
    assert skipped.startswith(f"Skipped {damaged.parent}: {damaged} cannot be read (JSONDecodeError: ")
    damaged.write_text("[]")  # JSON, not a record: an AttributeError stopped the whole report
    caplog.clear()
    report = main([str(tmp_path / "runs"), "--output", str(tmp_path / "out2")])
    assert report["table"]["kd"] and "theseus_curriculum" not in report["table"]
    (skipped,) = [message for message in caplog.messages if "Skipped" in message]
    assert skipped.endswith(f"{damaged} holds a JSON list, not the object of keys a results.json holds.")


def test_a_folder_whose_every_run_is_damaged_is_refused_as_unreadable_not_as_empty(tmp_path, capsys):
    plant(tmp_path / "runs" / "a", a_run("SST-2", "kd", 84.0, 81.0))
    damaged = tmp_path / "runs" / "a" / "results.json"
    damaged.write_text(damaged.read_text()[:300])
    with pytest.raises(SystemExit) as refused:
        main([str(tmp_path / "runs"), "--output", str(tmp_path / "out")])
    assert refused.value.code == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert error.endswith(f"error: No readable results.json under {tmp_path / 'runs'}: 1 found could not be read "
                          "(the warnings above say why); give the folders of finished runs (a run folder or a "
                          "multirun folder such as multirun/2026-01-01_12-00-00).")  # fmt: skip
    assert not (tmp_path / "out").exists()


def test_a_report_of_a_folder_that_is_not_there_is_refused_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as refused:
        main([str(tmp_path / "nowhere")])
    assert refused.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(f"error: {tmp_path / 'nowhere'} is not a folder.")


def test_a_row_pooling_runs_of_different_settings_as_seeds_is_warned_of(tmp_path):
    for seed in (1, 2):  # -m optimizer.lr=1e-4,3e-4 seed=1,2: one row, four "seeds"
        for lr in (1e-4, 3e-4):
            plant_lm_run(tmp_path / f"theseus_{lr}_{seed}", "lm_theseus", 15, 30.0 + seed, seed, 61_440,
                         settings={"optimizer.lr": lr, "trainer.max_steps": 60})  # fmt: skip
        plant_lm_run(tmp_path / f"shortgpt_{seed}", "shortgpt", 15, 300.0, seed, 0, settings={"optimizer.lr": 1e-4})
        # a removal that trains nothing ignores the learning rate and budget it records: no warning for it
        plant_lm_run(tmp_path / f"shortgpt_lr_{seed}", "shortgpt", 15, 300.0, seed, 0,
                     settings={"optimizer.lr": 3e-4, "trainer.max_steps": 450})  # fmt: skip
    assert language_model_warnings(language_model_frame(language_model_runs(tmp_path))) == [
        "lm_theseus (15 layers, 61440 tokens) pools runs of different settings as its seeds: optimizer.lr 0.0001, "
        "0.0003. Report each setting's runs apart."
    ]


@pytest.mark.parametrize("second", [[1, 2], [1, 3]], ids=["the same list", "another list"])
def test_a_list_valued_setting_is_compared_as_its_json_text(tmp_path, second):
    """pandas cannot count lists: a list-valued setting ended the report in ``TypeError: unhashable type: 'list'``,
    even where every run held the same list."""
    for seed, layers_kept in ((1, [1, 2]), (2, second)):
        plant_lm_run(tmp_path / f"theseus_{seed}", "lm_theseus", 15, 30.0 + seed, seed, 61_440,
                     settings={"theseus.kept": layers_kept})  # fmt: skip
    warnings = language_model_warnings(language_model_frame(language_model_runs(tmp_path)))
    assert warnings == ([] if second == [1, 2] else [
        "lm_theseus (15 layers, 61440 tokens) pools runs of different settings as its seeds: theseus.kept [1, 2], "
        "[1, 3]. Report each setting's runs apart."
    ])  # fmt: skip
