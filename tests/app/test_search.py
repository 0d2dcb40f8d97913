"""``+search=fastest_within``: a multi-objective search as a Hydra sweep, each trial a deployed and timed run, its
study in SQLite beside the trials, its answer the front and the fastest trial within the floor; bad settings
refused in one line before any trial."""

import json
import sys

import optuna
import pytest
from app_runs import compose_config, tiny_run_overrides
from command_runs import run_command, seed_machine_bf16
from omegaconf import OmegaConf
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from theseus_pl.app.run.pipeline import refusal_problems, untrained_deployment
from theseus_pl.app.search.checks import search_refusals

# The depth and the method searched; the shipped space's other keys fixed by plain overrides.
SPACE = ["theseus.successor_layers=choice(1,2)", "method=choice(theseus,fine_tuning)",
         "theseus.successor.intermediate_size=null", "optimizer.lr=1e-3"]  # fmt: skip
# (OpenVINO's conversion and calibration left out: a trial deploys as any run does, which test_openvino_deploy covers)
CHEAP_DEPLOY = ["deploy.repeats=2", "deploy.batch_sizes=[1,4]", "deploy.openvino=false"]


def search_overrides(tiny_base, glue_dir, tmp_path) -> list[str]:
    """The tiny run's overrides as a search over its depth and method, each trial deployed and timed briefly."""
    tiny = [o for o in tiny_run_overrides(tiny_base, glue_dir, tmp_path)
            if not o.startswith(("paths.output_dir", "theseus.successor_", "optimizer.lr"))]  # fmt: skip
    return [*tiny, "+search=fastest_within", *SPACE, *CHEAP_DEPLOY, "hydra.sweeper.max_score_drop=100"]


def _search(*overrides: str):
    return run_command([sys.executable, "-m", "theseus_pl", "-m", *overrides], timeout=600)


@pytest.mark.slow
def test_a_tiny_search_writes_its_study_front_and_pick_and_resumes_without_redoing_finished_trials(
    tiny_base, glue_dir, tmp_path
):
    sweep = tmp_path / "search"
    seed_machine_bf16(tmp_path / "cache")  # the trials' joblib workers start knowing it
    overrides = [*search_overrides(tiny_base, glue_dir, tmp_path), f"hydra.sweep.dir={sweep}"]
    # Two trials at once under the joblib launcher.
    first = _search(*overrides, "hydra.sweeper.trials=2", "hydra.sweeper.parallel=2", "hydra/launcher=local_parallel",
                    "hydra.launcher.n_jobs=2")  # fmt: skip
    assert first.returncode == 0, first.stderr[-3000:]
    study = optuna.load_study(study_name="search", storage=f"sqlite:///{sweep / 'study.db'}")
    assert [trial.state.name for trial in study.trials] == ["COMPLETE", "COMPLETE"]
    # A search killed in its third trial leaves that trial running; the next call (basic launcher) runs it again with
    # the same values, counts it once, and leaves the finished trials as they are.
    searched = {"theseus.successor_layers": ["1", "2"], "method": ["theseus", "fine_tuning"]}
    cut_short = study.ask({key: optuna.distributions.CategoricalDistribution(v) for key, v in searched.items()})
    # (their weights: a record's search block moves to the pick)
    finished = {path: path.stat().st_mtime_ns for path in sweep.glob("[01]/successor/model.safetensors")}
    # A latency target every shape meets: each shape (1 and 2 layers) deployed and timed untrained before trial 3.
    second = _search(*overrides, "hydra.sweeper.trials=3", "hydra.sweeper.max_latency_ms=1000")
    assert second.returncode == 0, second.stderr[-3000:]
    trials = optuna.load_study(study_name="search", storage=f"sqlite:///{sweep / 'study.db'}").trials
    assert [trial.state.name for trial in trials] == ["COMPLETE", "COMPLETE", "FAIL", "COMPLETE"]
    assert trials[3].params == cut_short.params and (sweep / "3" / "results.json").is_file()
    assert {path: path.stat().st_mtime_ns for path in sweep.glob("[01]/successor/model.safetensors")} == finished
    assert len(finished) == 2
    answer = json.loads((sweep / "search" / "search.json").read_text())
    assert answer["trials"] == 3 and answer["failed"] == answer["pruned"] == {}
    # Asked to reach the floor less 10 points half-way once the first trials told the predecessor's score.
    asked = [OmegaConf.load(sweep / str(number) / ".hydra" / "overrides.yaml") for number in (0, 1, 3)]
    stop = "callbacks.stop_below.below="
    stops = [[float(o.removeprefix(stop)) for o in overrides if o.startswith(stop)] for overrides in asked]
    assert stops == [[], [], [pytest.approx(answer["floor"] - 10)]]
    pick = answer["pick"]
    assert pick is not None and pick["score"] >= answer["floor"] == answer["predecessor_score"] - 100
    assert pick["latency_ms"] == min(point["latency_ms"] for point in answer["front"])  # the floor keeps every trial
    assert (sweep / str(pick["number"]) / "successor" / "onnx" / "model.onnx").is_file()  # shipped where it ran
    card = (sweep / str(pick["number"]) / "successor" / "README.md").read_text()  # naming the search that chose it
    assert f"Trial {pick['number']} of a search of 3 trials" in card and f"| {pick['number']} (this model) |" in card
    assert pick["target"] in ("pytorch_successor", "pytorch_bf16", "onnx_fp32", "onnx_int8")
    front = (sweep / "search" / "front.md").read_text()
    assert front.count("\n") == 2 + 3 and "| pick |" in front  # a header, its rule and a row a measured trial
    assert (sweep / "search" / "front.png").stat().st_size > 0
    assert answer["max_latency_ms"] == 1000 and pick["latency_ms"] <= 1000
    untrained = (sweep / "search" / "untrained.md").read_text()
    assert untrained.count("\n") == 2 + 2 and untrained.count("| yes |") == 2  # both shapes, within the target
    # A target no shape meets is refused before any trial trains, naming the fastest shape (timed by the call before:
    # the study keeps the shapes' times, none is timed again).
    third = _search(*overrides, "hydra.sweeper.trials=4", "hydra.sweeper.max_latency_ms=1e-6")
    assert (
        third.returncode == 2
        and "The search cannot start (no trial was trained): hydra.sweeper.max_latency_ms=1e-06: "
        "no shape of the search meets it; the fastest, theseus.successor_layers="
        in third.stderr
    ), third.stderr[-3000:]
    assert len(optuna.load_study(study_name="search", storage=f"sqlite:///{sweep / 'study.db'}").trials) == 4


def test_bad_search_settings_are_refused_in_one_line_each_before_any_trial(tiny_base, glue_dir, tmp_path):
    overrides = search_overrides(tiny_base, glue_dir, tmp_path)
    assert search_refusals(overrides, refusal_problems) == []
    bad = ["hydra.sweeper.max_score_drop=one", "hydra.sweeper.trials=0", "hydra.sweeper.prune_margin=-1"]
    assert search_refusals([*overrides, *bad]) == [
        "hydra.sweeper.trials=0 must be a whole number of trials, at least 1, e.g. 16.",
        "hydra.sweeper.max_score_drop='one' must be a number of dev points, at least 0, e.g. 1.0.",
        "hydra.sweeper.prune_margin=-1 must be null (every trial runs to its end) or a number of dev points under the "
        "floor, e.g. 10.0.",
    ]
    assert search_refusals([*overrides, "hydra.sweeper.max_latency_ms=0"]) == [
        "hydra.sweeper.max_latency_ms=0 must be null (no target) or a number of milliseconds a call above 0, e.g. 2.5."
    ]
    assert search_refusals(
        [*overrides, "hydra.sweeper.max_latency_ms=2", "+theseus.successor.hidden_size=interval(16,32)"]
    ) == [
        "hydra.sweeper.max_latency_ms times each shape of the space before training: +theseus.successor.hidden_size "
        "is searched over an interval; give its shapes as choice(...)."
    ]
    assert search_refusals([*overrides, "deploy.batch_sizes=[1,32]", "hydra.sweeper.batch_size=8"]) == [
        "hydra.sweeper.batch_size=8 is not timed: deploy.batch_sizes=[1, 32] (add it there)."
    ]
    assert search_refusals([*overrides, "deploy.onnx=false", "deploy.quantize=null"]) == [
        "deploy.onnx=false: the search times each trial's deployed models; set deploy.onnx=true."
    ]
    deeper = "theseus.successor_layers=choice(2,9)"
    too_deep = "theseus.successor_layers=9 must be between 1 and the predecessor's 4 layers."
    assert search_refusals([*overrides, deeper], refusal_problems) == [
        f"combination 2 (theseus.successor_layers=9 method=theseus): {too_deep}",
        f"combination 3 (theseus.successor_layers=9 method=fine_tuning): {too_deep}",
    ]
    # Two values refused together: Theseus alone narrows the width, found before a trial draws them both.
    narrow = "theseus.successor.intermediate_size=choice('null',32)"
    narrow_kd = ("theseus.successor.intermediate_size=32 shapes Theseus successors; method=kd builds its student from "
                 "whole predecessor layers (depth only). Leave it null.")  # fmt: skip
    assert search_refusals([*overrides, "method=choice(theseus,kd)", narrow], refusal_problems) == [
        f"combination {number} (theseus.successor_layers={layers} method=kd theseus.successor.intermediate_size=32): "
        f"{narrow_kd}"
        for number, layers in ((3, 1), (7, 2))
    ]
    assert search_refusals([*overrides, "method=choice(kd)"]) == [
        "hydra.sweeper.params.method=choice(kd) holds one value: nothing to search (set it as a plain override)."
    ]
    assert search_refusals([*overrides, "+hydra.sweeper.trails=3"])[0].startswith(
        "hydra.sweeper.trails is no setting of the search (its settings: trials, max_score_drop, "
    )
    assert search_refusals(["+experiment=smollm2_quick", "+search=fastest_within"]) == [
        "data.kind=language_model: the search weighs encoder task models (classifiers and regressors) "
        "(data.kind=task_model), sentence-embedding models (data.kind=embedding_model) for now; search this kind's "
        "settings with a plain sweep (-m key=a,b)."
    ]
    assert search_refusals(["+experiment=minilm_embedding_quick", "+search=fastest_within"]) == [
        "+search=fastest_within is written for data.kind=task_model runs (its space, their deployment); a "
        "data.kind=embedding_model run's search is +search=fastest_embedding."
    ]  # one line, not one a combination of its widths
    embedding_search = [override.replace("fastest_within", "fastest_embedding") for override in overrides]
    assert search_refusals(embedding_search)[0].startswith(
        "+search=fastest_embedding is written for data.kind=embedding_model runs"
    )
    assert search_refusals(["+experiment=demo", "seed=1,2"]) is None  # the basic sweeper's: checks.multirun's


def test_the_command_line_refuses_a_bad_search_before_it_starts(tiny_base, glue_dir, tmp_path):
    completed = _search(*search_overrides(tiny_base, glue_dir, tmp_path), f"hydra.sweep.dir={tmp_path / 's'}",
                        "hydra.sweeper.trials=0")  # fmt: skip
    assert completed.returncode == 2
    assert completed.stderr.strip().splitlines()[-1] == (
        "- hydra.sweeper.trials=0 must be a whole number of trials, at least 1, e.g. 16."
    )
    assert not (tmp_path / "s").exists()


def test_a_shape_is_timed_untrained_from_a_stand_in_predecessor_with_nothing_trained(tiny_base, glue_dir, tmp_path):
    """A search's latency target times each shape before any trial: the successor the method starts from, built
    from the base with a new head where no fine-tuned predecessor is cached (none is made), deployed as a trial is."""
    overrides = [o for o in search_overrides(tiny_base, glue_dir, tmp_path) if "choice(" not in o]
    cfg = compose_config(*overrides, "theseus.successor_layers=1", "method=theseus",
                         f"paths.output_dir={tmp_path / 'never'}")  # fmt: skip
    block = untrained_deployment(cfg)
    assert {"onnx_fp32", "onnx_int8"} <= set(block.latency_ms["batch_1_own_lengths"])
    assert not (tmp_path / "never").exists() and not list((tmp_path / "cache").glob("theseus-pl-untrained-*"))
    assert not list((tmp_path / "cache").rglob("*.safetensors"))  # no predecessor fine-tuned into the cache


def test_a_shape_is_timed_untrained_on_the_dev_rows_when_the_predecessor_needs_no_fine_tuning(
    tiny_base, glue_dir, tmp_path
):
    """A given predecessor (or one cached in the trials' precision, as on a CPU without bf16) is loaded, not
    fine-tuned; the shapes are still timed on the task's dev rows, which nothing else has read yet."""
    predecessor = tmp_path / "predecessor"  # the tiny base with RTE's two labels
    labels = {0: "entailment", 1: "not_entailment"}
    AutoModelForSequenceClassification.from_pretrained(
        tiny_base, id2label=labels, label2id={v: k for k, v in labels.items()}, ignore_mismatched_sizes=True
    ).save_pretrained(predecessor)
    AutoTokenizer.from_pretrained(tiny_base).save_pretrained(predecessor)
    overrides = [o for o in search_overrides(tiny_base, glue_dir, tmp_path) if "choice(" not in o]
    cfg = compose_config(*overrides, "theseus.successor_layers=1", "method=theseus",
                         f"model.predecessor={predecessor}", f"paths.output_dir={tmp_path / 'never'}")  # fmt: skip
    block = untrained_deployment(cfg)
    assert {"onnx_fp32", "onnx_int8"} <= set(block.latency_ms["batch_1_own_lengths"])
