"""The search's answer from planted trials: the Pareto front of score against time, and the fastest within the
floor."""

import logging
import math

import numpy as np
import pandas as pd
import pytest

from theseus_pl.app.kinds.task_model.record import TaskModelResults
from theseus_pl.app.results.reading import read_run
from theseus_pl.app.search.front import TrialPoint, fastest_within, front_table, pareto_front, plot_front

pytestmark = pytest.mark.quick


SETTINGS = {"method": "kd", "optimizer.lr": 8.216908785704085e-05}


def point(number: int, score: float, ms: float, layers: int = 3, target: str = "onnx_int8") -> TrialPoint:
    return TrialPoint(number=number, score=score, latency_ms=ms, throughput_ms=None, settings=SETTINGS,
                      target=target, folder=f"sweep/{number}", layers=layers, intermediate_size=None)  # fmt: skip


PLANTED = [
    point(0, 80.0, 10.0, layers=4),  # the best score, the slowest
    point(1, 79.5, 6.0, layers=3),  # on the front: faster for half a point
    point(2, 79.0, 7.0, layers=3),  # beaten by 1 on both
    point(3, 75.0, 2.0, layers=1),  # on the front: fastest, far below
    point(4, math.nan, 1.0, layers=1),  # a NaN score: never on the front, never the pick
    point(5, 79.5, 6.0, layers=3, target="openvino_int8"),  # ties 1 on both: neither beats the other
]


def test_the_front_holds_the_points_no_other_beats_on_both_fastest_first():
    assert [p.number for p in pareto_front(PLANTED)] == [3, 1, 5, 0]


def test_the_pick_is_the_fastest_within_the_floor_and_none_when_nothing_reaches_it():
    assert fastest_within(PLANTED, floor=79.0).number == 1  # 3 is faster but below; 1 and 5 tie: the earlier
    assert fastest_within(PLANTED, floor=79.8).number == 0
    assert fastest_within(PLANTED, floor=70.0).number == 3
    assert fastest_within(PLANTED, floor=81.0) is None


def test_a_score_exactly_the_allowed_points_under_the_predecessor_is_within_the_floor():
    """As the demo's search on an AMX Xeon recorded them (1,000 dev rows): the predecessor's 774 rows right as
    float32(77.4) = 77.4000015..., a trial's 764 as float32(0.764) x 100 = 76.3999998...: one point under, read as
    under the floor, so that trial, the fastest, was passed over."""
    predecessor, one_point_under = float(np.float32(77.4)), float(np.float32(0.764)) * 100
    assert one_point_under < predecessor - 1.0  # float32's rounding
    on_it, slower = point(0, one_point_under, 0.76), point(1, 77.2, 0.97)
    assert fastest_within([on_it, slower], floor=predecessor - 1.0) == on_it
    assert front_table([on_it], on_it, floor=predecessor - 1.0)["within the floor"].tolist() == ["yes"]
    assert fastest_within([point(2, one_point_under - 0.001, 0.5), slower], floor=predecessor - 1.0) == slower


def test_the_table_marks_the_front_the_floor_and_the_pick_and_the_plot_is_written(tmp_path):
    pick = fastest_within(PLANTED, floor=79.0)
    table = front_table(PLANTED, pick, floor=79.0).set_index("trial")
    assert table.loc[1, "pick"] == "pick" and (table["pick"] == "pick").sum() == 1
    assert list(table.index[table["on the front"] == "yes"]) == [3, 1, 5, 0]
    assert table.loc[2, "within the floor"] == "yes" and table.loc[3, "within the floor"] == "no"
    assert table.loc[4, "within the floor"] == "no" and pd.isna(table.loc[4, "score"])
    assert list(table.index) == [4, 3, 1, 5, 2, 0]  # fastest first
    assert table.loc[0, "method"] == "kd" and table.loc[0, "runtime"] == "onnx_int8"
    assert table.loc[0, "optimizer.lr"] == "8.22e-05"  # a drawn rate in three figures, not rounded to 0.00
    written = plot_front(PLANTED, pick, 79.0, tmp_path / "front.png")
    assert written.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_study_of_planted_trials_gives_its_front_table_plot_and_pick(tmp_path, caplog):
    """What the sweeper writes once its trials are told: a failed trial and a trial cut short are no points."""
    import json

    import optuna

    from theseus_pl.app.search.settings import SearchSettings
    from theseus_pl.app.search.sweeper import OUTCOME, POINT, PREDECESSOR_SCORE, point_dict, write_answer

    study = optuna.create_study(directions=list(SearchSettings.DIRECTIONS))
    for planted in _planted_runs(PLANTED[:4], tmp_path):
        attributes = {OUTCOME: "measured", POINT: point_dict(planted), PREDECESSOR_SCORE: 80.2}
        study.add_trial(optuna.trial.create_trial(values=[planted.score, planted.latency_ms], user_attrs=attributes))
    diverged = {OUTCOME: "its run failed (DivergedError: loss is nan)"}
    study.add_trial(optuna.trial.create_trial(state=optuna.trial.TrialState.FAIL, user_attrs=diverged))
    study.add_trial(optuna.trial.create_trial(state=optuna.trial.TrialState.FAIL))  # cut short: asked again, uncounted
    pick = write_answer(study, SearchSettings(max_score_drop=1.0), tmp_path / "search")
    assert pick is not None and pick.number == 1  # 79.5 within a point of 80.2; 3 faster but far below
    answer = json.loads((tmp_path / "search" / "search.json").read_text())
    assert answer["floor"] == pytest.approx(79.2) and answer["trials"] == 5
    assert answer["failed"] == {"4": "its run failed (DivergedError: loss is nan)"}
    assert [point["number"] for point in answer["front"]] == [3, 1, 0]
    table = pd.read_csv(tmp_path / "search" / "front.csv")
    assert list(table["trial"]) == [3, 1, 2, 0] and list(table.loc[table["pick"] == "pick", "trial"]) == [1]
    assert (tmp_path / "search" / "front.md").is_file() and (tmp_path / "search" / "front.png").is_file()

    # The pick's record and card name the search; another call on the folder that picks another trial moves them.
    found = read_run(tmp_path / "1" / "results.json", TaskModelResults).search
    assert found is not None and (found.trial, found.trials, found.floor) == (1, 5, pytest.approx(79.2))
    assert [(p.trial, p.shape) for p in found.front] == [(3, "1 layers, onnx_int8"), (1, "3 layers, onnx_int8"),
                                                         (0, "4 layers, onnx_int8")]  # fmt: skip
    card = (tmp_path / "1" / "successor" / "README.md").read_text()
    assert "## Found by a search\n\nTrial 1 of a search of 5 trials (theseus_pl's `+search`, Optuna study" in card
    assert "within 1 point of the predecessor's 80.20 (the floor, 79.20)" in " ".join(card.split())
    assert (
        "on AMD EPYC 9R14" in " ".join(card.split())
        and "| 1 (this model) | 3 layers, onnx_int8 | 79.50 | 6.00 |" in card
    )
    assert all(read_run(tmp_path / str(n) / "results.json", TaskModelResults).search is None for n in (0, 2, 3))
    import shutil

    shutil.rmtree(tmp_path / "2")  # a trial's folder deleted since: passed over, not a traceback
    assert write_answer(study, SearchSettings(max_score_drop=0.5), tmp_path / "search").number == 0
    assert read_run(tmp_path / "1" / "results.json", TaskModelResults).search is None
    assert "Found by a search" not in (tmp_path / "1" / "successor" / "README.md").read_text()
    assert read_run(tmp_path / "0" / "results.json", TaskModelResults).search.trial == 0
    # The sweep's report reads the front from the pick's record, as it reads any run.
    from theseus_pl.report import main as report

    report([str(tmp_path), "--output", str(tmp_path / "report")])
    front = pd.read_csv(tmp_path / "report" / "search_front.csv")
    assert list(front["trial"]) == [3, 1, 0] and list(front.loc[front["pick"] == "pick", "trial"]) == [0]
    assert list(front["floor"]) == pytest.approx([79.7] * 3) and list(front["score"]) == [75.0, 79.5, 80.0]
    # ... and so does the sweep's W&B report (python -m theseus_pl.dashboard --report).
    import wandb_workspaces.reports.v2 as wr

    from theseus_pl.app.kinds.task_model.report import find_runs
    from theseus_pl.app.tracking.dashboard import sweep_report

    markdown = [block.text for block in sweep_report("team", "proj", tmp_path, find_runs([tmp_path])[0]).blocks
                if isinstance(block, wr.MarkdownBlock)]  # fmt: skip
    assert markdown[-1] == (tmp_path / "report" / "search_front.md").read_text()
    # No trial within the floor: the warning names the best and what may reach it.
    with caplog.at_level(logging.WARNING, logger="theseus_pl.app.search.sweeper"):
        assert write_answer(study, SearchSettings(max_score_drop=0.1), tmp_path / "search") is None
    assert (
        "No trial kept its dev score within 0.1 points of the predecessor's 80.20 (the best: trial 0 at 80.00): see "
        in caplog.text
    ) and "more steps a trial, more trials or a larger hydra.sweeper.max_score_drop may reach it" in caplog.text


def test_a_trial_stopped_under_its_score_is_told_pruned_counted_and_never_a_point(tmp_path, capsys):
    """Once a measured trial has told the predecessor's score, each next trial is asked to reach the floor less the
    margin half-way (``callbacks.stop_below``); one that stopped under it is pruned: counted, listed, no point, and
    the sweep's report says so rather than waiting for its results."""
    import json

    import optuna
    from hydra.core.utils import JobReturn, JobStatus

    from theseus_pl.app.search.settings import SearchSettings
    from theseus_pl.app.search.sweeper import (
        OUTCOME,
        POINT,
        PREDECESSOR_SCORE,
        counted,
        point_dict,
        predecessor_score,
        tell,
        write_answer,
    )
    from theseus_pl.lightning.callbacks import StoppedBelowScore

    settings = SearchSettings(max_score_drop=1.0, prune_margin=10.0)
    study = optuna.create_study(directions=list(SearchSettings.DIRECTIONS))
    assert settings.stop_below(predecessor_score(study)) is None  # no trial has told it: the first ones run whole
    for planted in _planted_runs(PLANTED[:2], tmp_path):
        attributes = {OUTCOME: "measured", POINT: point_dict(planted), PREDECESSOR_SCORE: 80.2}
        study.add_trial(optuna.trial.create_trial(values=[planted.score, planted.latency_ms], user_attrs=attributes))
    assert settings.stop_below(predecessor_score(study)) == pytest.approx(69.2)  # 80.2 - 1 - 10
    assert SearchSettings(prune_margin=None).stop_below(80.2) is None
    stopped = "Stopped at step 150 of 300: val/score is 57.00, under the 69.2 asked of it from 50% of its steps on"
    tell(study, study.ask(), JobReturn(status=JobStatus.FAILED, _return_value=StoppedBelowScore(stopped)), 1)
    assert study.trials[-1].state == optuna.trial.TrialState.PRUNED and len(counted(study)) == 3
    assert write_answer(study, settings, tmp_path / "search").number == 1
    answer = json.loads((tmp_path / "search" / "search.json").read_text())
    assert answer["pruned"] == {"2": f"pruned: {stopped}"} and answer["failed"] == {} and answer["trials"] == 3
    assert [point["number"] for point in answer["front"]] == [1, 0]

    # The report of the sweep: the pruned trial's job folder (Hydra's .hydra/, no results.json) is no job still to
    # finish but a trial the search ended, with why.
    from theseus_pl.app.report.tables import find_records, report_command

    (tmp_path / "2" / ".hydra").mkdir(parents=True)
    (tmp_path / "2" / ".hydra" / "overrides.yaml").write_text("- optimizer.lr=3e-05\n")
    assert find_records([tmp_path])[1] == []
    report_command([tmp_path], "method", tmp_path / "report", True, pytest.fail)
    printed = capsys.readouterr().out
    assert "no results yet" not in printed
    assert f"1 trials a search ended without results (no point on its front):\n  {tmp_path / '2'}: pruned: " in printed


def _planted_runs(points: list[TrialPoint], folder) -> list[TrialPoint]:
    """Each point with a finished run's record in ``folder/<number>``, as a trial leaves it."""
    from dataclasses import replace

    from results_records import a_run, plant

    from theseus_pl.app.results.envelope import Hardware

    hardware = Hardware("32-true", "32-true", "cpu", "AMD EPYC 9R14", ["avx2"], "set by trainer.precision")
    for planted in points:
        plant(folder / str(planted.number), a_run(successor_dir=str(folder / str(planted.number) / "successor"),
                                                   hardware=hardware))  # fmt: skip
    return [replace(planted, folder=str(folder / str(planted.number))) for planted in points]


def test_a_trial_whose_run_was_refused_fails_alone_saying_why():
    """A combination no check before the search foresaw: its job failed with the run's refusal; the study records
    the trial as failed with the refusal's problems, and the search goes on."""
    import optuna
    from hydra.core.utils import JobReturn, JobStatus

    from theseus_pl.app.checks.refused import RunRefused
    from theseus_pl.app.search.settings import SearchSettings
    from theseus_pl.app.search.sweeper import OUTCOME, counted, tell

    study = optuna.create_study(directions=list(SearchSettings.DIRECTIONS))
    trial = study.ask({"method": optuna.distributions.CategoricalDistribution(["kd"])})
    refused = JobReturn(status=JobStatus.FAILED, _return_value=RunRefused(["one problem", "another"]))
    tell(study, trial, refused, batch_size=1)
    (told,) = counted(study)
    assert told.state == optuna.trial.TrialState.FAIL
    assert told.user_attrs[OUTCOME] == "its run was refused: one problem; another"


def test_a_trial_whose_record_is_of_a_kind_no_search_weighs_fails_naming_the_kind(tmp_path):
    """The search reads its trials through the registry, as any kind whose record has the shape it weighs: a task
    model's and a sentence-embedding model's have it; a decoder LM's (no search of it yet) fails its trial alone,
    naming its kind."""
    import shutil

    from results_records import V2_LANGUAGE_MODEL, a_run, an_embedding_run, plant

    from theseus_pl.app.results.search_finding import SearchableRecord, searchable_kinds, validates_on_dev_score
    from theseus_pl.app.search.sweeper import TrialFailed, searchable_record

    task_model = searchable_record(plant(tmp_path / "task", a_run()))
    assert isinstance(task_model, SearchableRecord)
    assert task_model.searched_run().layers == a_run().layers.successor
    embedding = searchable_record(plant(tmp_path / "embedding", an_embedding_run())).searched_run()
    assert (embedding.predecessor_score, embedding.layers, embedding.intermediate_size) == (82.0, 3, None)
    assert list(searchable_kinds()) == ["task_model", "embedding_model"]
    # A task model validates on its dev score: a search may stop its trials under the floor; an embedding model on
    # its vectors' cosine to the teacher's, another scale: never.
    assert validates_on_dev_score("task_model") and not validates_on_dev_score("embedding_model")
    (tmp_path / "lm").mkdir()
    shutil.copy(V2_LANGUAGE_MODEL, tmp_path / "lm" / "results.json")
    with pytest.raises(TrialFailed, match="of kind 'language_model', whose record a search cannot weigh"):
        searchable_record(tmp_path / "lm" / "results.json")


def test_a_sentence_embedding_search_weighs_its_trials_on_sts_and_its_pick_card_names_the_search(tmp_path):
    """A trial of a sentence-embedding search: its deployment's STS-B dev scores and times, its predecessor's STS-B
    score the floor is measured from; the pick's record and sentence-transformers card name the search."""
    from dataclasses import replace

    import optuna
    from hydra.core.utils import JobReturn, JobStatus
    from omegaconf import OmegaConf
    from results_records import V1_RESULTS, an_embedding_run, plant

    from theseus_pl.app.kinds.embedding_model.record import EmbeddingSide
    from theseus_pl.app.search.settings import SearchSettings
    from theseus_pl.app.search.sweeper import OUTCOME, tell, write_answer

    study = optuna.create_study(directions=list(SearchSettings.DIRECTIONS))
    timed = {"pytorch_successor": 4.0, "onnx_fp32": 3.0, "onnx_int8": 1.0}
    for number, (layers, int8_score, shipped) in enumerate([(3, 81.6, "onnx_int8"), (2, 79.0, "onnx_fp32")]):
        folder = tmp_path / str(number)
        deployment = replace(
            read_run(V1_RESULTS, TaskModelResults).deployment,
            target=shipped,  # as deploy.target=auto picks: within deploy.max_score_drop, 0.5 here
            latency_ms={"batch_1_own_lengths": {k: v * layers for k, v in timed.items()}},
            dev_score={"pytorch_successor": 81.8, "onnx_fp32": 81.8, "onnx_int8": int8_score},
        )
        successor = EmbeddingSide(dir=str(folder / "successor"), layers=layers, params=1, dimensions=384, sts=81.8)
        plant(folder, an_embedding_run(successor=successor, deployment=deployment))
        (folder / "successor").mkdir()
        job = JobReturn(status=JobStatus.COMPLETED, _return_value=None,
                        hydra_cfg=OmegaConf.create({"hydra": {"runtime": {"output_dir": str(folder)}}}))  # fmt: skip
        tell(study, study.ask(), job, batch_size=1)
    assert [trial.user_attrs[OUTCOME] for trial in study.trials] == ["measured", "measured"]
    # Trial 1's int8 copy fell 2.8 under its fp32 one (deploy.max_score_drop 0.5): its fp32 ONNX model is weighed.
    assert [trial.values for trial in study.trials] == [[81.6, 3.0], [81.8, 6.0]]
    pick = write_answer(study, SearchSettings(max_score_drop=1.0), tmp_path / "search")
    assert pick is not None and pick.number == 0  # the predecessor's 82.0, the floor 81.0
    assert read_run(tmp_path / "0" / "results.json").search.front[0].shape == "3 layers, onnx_int8"
    card = (tmp_path / "0" / "successor" / "README.md").read_text()
    assert "## Found by a search" in card and "| 0 (this model) | 3 layers, onnx_int8 | 81.60 | 3.00 |" in card
    assert "library_name: sentence-transformers" in card
    # The sweep's report holds the front, read from the pick's record, as for a task model's search.
    from theseus_pl.report import main as report

    report([str(tmp_path / "0"), str(tmp_path / "1"), "--output", str(tmp_path / "report")])
    front = pd.read_csv(tmp_path / "report" / "search_front.csv")
    assert list(front["trial"]) == [0, 1] and list(front.loc[front["pick"] == "pick", "trial"]) == [0]


def shaped(number: int, score: float, ms: float, layers: int, fastest_ms: float) -> TrialPoint:
    """A trial of a search over depth: its drawn values as Optuna keeps them (a choice's value is its string)."""
    from dataclasses import replace

    drawn = {"theseus.successor_layers": str(layers), "optimizer.lr": 1e-4}
    return replace(point(number, score, ms, layers=layers), settings=drawn, fastest_ms=fastest_ms)


SHAPED = [shaped(0, 80.0, 10.0, layers=4, fastest_ms=9.0), shaped(1, 79.5, 6.0, layers=3, fastest_ms=5.5)]


def test_a_shape_timed_slower_than_the_pick_cannot_be_the_pick_and_one_not_timed_yet_may():
    from theseus_pl.app.search.front import is_shape_key, slower_than_the_pick

    assert is_shape_key("+theseus.successor_layers") and is_shape_key("theseus.successor.intermediate_size")
    assert not is_shape_key("optimizer.lr") and not is_shape_key("method")
    pick = SHAPED[1]
    assert slower_than_the_pick({"theseus.successor_layers": "4", "optimizer.lr": 3e-4}, SHAPED, pick, 0.1) == (
        "theseus.successor_layers=4 took 9.00 ms a call at best in an earlier trial, more than 10% slower than the "
        "pick's 6.00 ms (trial 1): it cannot be the pick"
    )  # its fastest runtime (9.00), not the one its score allowed (10.00), and whatever its learning rate
    assert slower_than_the_pick({"theseus.successor_layers": "4"}, SHAPED, pick, 0.6) is None  # 9.0 within 6.0 + 60 %
    assert slower_than_the_pick({"theseus.successor_layers": "3"}, SHAPED, pick, 0.1) is None  # the pick's own shape
    assert slower_than_the_pick({"theseus.successor_layers": "2"}, SHAPED, pick, 0.1) is None  # not timed yet
    assert slower_than_the_pick({"theseus.successor_layers": "4"}, SHAPED, None, 0.1) is None  # no pick yet
    assert slower_than_the_pick({"theseus.successor_layers": "4"}, SHAPED, pick, None) is None  # every trial trains
    assert slower_than_the_pick({"optimizer.lr": 3e-4}, SHAPED[1:], pick, 0.0) is None  # one shape searched: none


def test_a_trial_of_a_shape_slower_than_the_pick_is_pruned_before_training_and_counted(tmp_path, capsys):
    import json

    import optuna

    from theseus_pl.app.search.settings import SearchSettings
    from theseus_pl.app.search.sweeper import (
        OUTCOME,
        POINT,
        PREDECESSOR_SCORE,
        counted,
        point_dict,
        skipped_as_slower,
        write_answer,
    )

    settings = SearchSettings(max_score_drop=1.0)
    space = {"theseus.successor_layers": optuna.distributions.CategoricalDistribution(["2", "3", "4"]),
             "optimizer.lr": optuna.distributions.FloatDistribution(3e-5, 3e-4, log=True)}  # fmt: skip
    study = optuna.create_study(directions=list(SearchSettings.DIRECTIONS))
    for planted in _planted_runs(SHAPED, tmp_path):
        attributes = {OUTCOME: "measured", POINT: point_dict(planted), PREDECESSOR_SCORE: 80.2}
        study.add_trial(optuna.trial.create_trial(values=[planted.score, planted.latency_ms], user_attrs=attributes,
                                                  params=dict(planted.settings), distributions=space))  # fmt: skip
    study.enqueue_trial({"theseus.successor_layers": "4", "optimizer.lr": 2e-4})
    study.enqueue_trial({"theseus.successor_layers": "2", "optimizer.lr": 2e-4})
    deep, shallow = study.ask(space), study.ask(space)
    assert skipped_as_slower(study, deep, settings) and not skipped_as_slower(study, shallow, settings)
    assert study.trials[deep.number].state == optuna.trial.TrialState.PRUNED
    assert study.trials[shallow.number].state == optuna.trial.TrialState.RUNNING  # it trains
    assert len(counted(study)) == 3  # the two measured and the one pruned before training
    write_answer(study, settings, tmp_path / "search")
    answer = json.loads((tmp_path / "search" / "search.json").read_text())
    assert answer["pruned"] == {"2": "pruned before training: theseus.successor_layers=4 took 9.00 ms a call at best "
                                     "in an earlier trial, more than 10% slower than the pick's 6.00 ms (trial 1): it "
                                     "cannot be the pick"}  # fmt: skip
    assert not skipped_as_slower(study, study.ask(space), SearchSettings(max_score_drop=1.0, shape_margin=None))
    # The sweep's report lists it among the trials the search ended, though it has no folder to find.
    from theseus_pl.app.report.tables import report_command

    report_command([tmp_path], "method", tmp_path / "report", True, pytest.fail)
    assert (
        f"1 trials a search ended without results (no point on its front):\n  {tmp_path / '2'} (never trained): "
        "pruned before training: theseus.successor_layers=4 took 9.00 ms" in capsys.readouterr().out
    )


def test_a_reference_model_sits_on_the_front_beside_the_trials_never_the_pick_and_a_faster_one_is_said(
    tmp_path, caplog
):
    """A sentence-embedding search's model2vec point: in the table and the plot, in search.json, never the pick; where
    it reaches the floor faster than the pick, the search says to ship it."""
    import json

    import optuna

    from theseus_pl.app.results.search_finding import ReferencePoint
    from theseus_pl.app.search.settings import SearchSettings
    from theseus_pl.app.search.sweeper import OUTCOME, POINT, PREDECESSOR_SCORE, point_dict, write_answer

    study = optuna.create_study(directions=list(SearchSettings.DIRECTIONS))
    for planted in _planted_runs(PLANTED[:4], tmp_path):
        attributes = {OUTCOME: "measured", POINT: point_dict(planted), PREDECESSOR_SCORE: 80.2}
        study.add_trial(optuna.trial.create_trial(values=[planted.score, planted.latency_ms], user_attrs=attributes))
    static = ReferencePoint("model2vec static (256 dims)", 70.0, 0.02)
    with caplog.at_level(logging.WARNING, logger="theseus_pl.app.search.sweeper"):
        pick = write_answer(study, SearchSettings(max_score_drop=1.0), tmp_path / "search", [static])
    assert pick is not None and pick.number == 1 and "model2vec" not in caplog.text  # 70.0 is under the floor
    table = pd.read_csv(tmp_path / "search" / "front.csv", keep_default_na=False)
    reference = table[table["on the front"] == "reference"]
    assert list(reference["runtime"]) == [static.label] and list(reference["within the floor"]) == ["no"]
    assert list(reference["score"]) == [70.0] and list(reference["pick"]) == [""]
    answer = json.loads((tmp_path / "search" / "search.json").read_text())
    assert answer["references"] == [{"label": static.label, "score": 70.0, "latency_ms": 0.02}]
    assert answer["pick"]["number"] == 1  # a reference is never a trial, never the pick

    with caplog.at_level(logging.WARNING, logger="theseus_pl.app.search.sweeper"):
        write_answer(study, SearchSettings(max_score_drop=15.0), tmp_path / "search", [static])
    assert (
        "model2vec static (256 dims) scores 70.00, within the floor, at 0.020 ms a call: faster than any trial that "
        "reaches it. Ship it rather than a compressed successor" in caplog.text
    )
    # a reference that scored no number (constant vectors' correlation) is null in search.json, as in every record
    write_answer(study, SearchSettings(max_score_drop=1.0), tmp_path / "search", [static._replace(score=math.nan)])
    strict = json.loads((tmp_path / "search" / "search.json").read_text(), parse_constant=pytest.fail)
    assert strict["references"] == [{"label": static.label, "score": None, "latency_ms": 0.02}]


def test_a_latency_target_keeps_the_pick_under_it_and_refuses_a_space_whose_every_shape_is_over_it():
    from theseus_pl.app.search.front import UntrainedShape, over_the_target, unmet_target, untrained_table

    assert fastest_within(PLANTED, 79.0, max_ms=6.5) == PLANTED[1]  # within the floor and the target
    assert fastest_within(PLANTED, 79.0, max_ms=5.0) is None  # 3 (2.0 ms) is under the floor: no pick
    table = front_table(PLANTED, PLANTED[1], 79.0, max_ms=6.5).set_index("trial")["within the target"]
    assert table.to_dict() == {0: "no", 1: "yes", 2: "no", 3: "yes", 4: "yes", 5: "yes"}
    assert "within the target" not in front_table(PLANTED, PLANTED[1], 79.0)  # no target: no column
    shapes = [UntrainedShape({"theseus.successor_layers": "4"}, 9.0, "onnx_int8"),
              UntrainedShape({"theseus.successor_layers": "2"}, 3.0, "onnx_fp32")]  # fmt: skip
    assert unmet_target(shapes, 2.5, 0.1) == (
        "hydra.sweeper.max_latency_ms=2.5: no shape of the search meets it; the fastest, theseus.successor_layers=2, "
        "takes 3.00 ms a call untrained (onnx_fp32). Raise the target, or search smaller shapes."
    )
    assert unmet_target(shapes, 2.8, 0.1) is None  # 3.0 within the timing's noise of 2.8: trials may meet it
    assert unmet_target([], 2.5, 0.1) is None  # nothing timed: nothing to refuse
    four = {"theseus.successor_layers": "4", "optimizer.lr": 3e-4}
    assert over_the_target(four, shapes, 5.0, 0.1) == (
        "theseus.successor_layers=4 takes 9.00 ms a call untrained, over hydra.sweeper.max_latency_ms=5: it cannot "
        "be the pick"
    )  # whatever its learning rate
    assert over_the_target({"theseus.successor_layers": "2"}, shapes, 5.0, 0.1) is None  # within it
    assert over_the_target({"theseus.successor_layers": "3"}, shapes, 5.0, 0.1) is None  # not timed
    assert over_the_target(four, shapes, None, 0.1) is None  # no target
    table = untrained_table(shapes, 5.0, 0.1)
    assert table.to_dict("list") == {"theseus.successor_layers": ["2", "4"], "runtime": ["onnx_fp32", "onnx_int8"],
                                     "ms a call": [3.0, 9.0], "within the target": ["yes", "no"]}  # fmt: skip


def test_each_shape_is_timed_untrained_once_a_study_and_a_trial_over_the_target_is_not_trained(tmp_path, monkeypatch,
                                                                                                 capsys):  # fmt: skip
    """The sweeper's side of a latency target, in this process: each shape of the space (every combination of its
    shape keys' choices, the other keys at their first value) timed in its fastest runtime at the serving batch size,
    kept in the study so that a second call times none again; a trial of a shape over the target pruned before
    training; a target no shape meets ends the search with status 2."""
    from types import SimpleNamespace

    import optuna
    from omegaconf import OmegaConf

    from theseus_pl.app.search import sweeper
    from theseus_pl.app.search.settings import SearchSettings
    from theseus_pl.app.search.space import search_space

    shape_keys = {"theseus.successor_layers": "choice(2,4)", "theseus.successor.intermediate_size": "choice(16,8)"}
    space = search_space({**shape_keys, "optimizer.lr": "interval(1e-4,1e-3)"}, [])
    assert sweeper.space_shapes(space) == [
        {"theseus.successor_layers": "2", "theseus.successor.intermediate_size": "16"},
        {"theseus.successor_layers": "2", "theseus.successor.intermediate_size": "8"},
        {"theseus.successor_layers": "4", "theseus.successor.intermediate_size": "16"},
        {"theseus.successor_layers": "4", "theseus.successor.intermediate_size": "8"},
    ]
    asked: list[list[str]] = []

    class Loader:  # Hydra's config loader, as the launcher composes a job's config
        def load_sweep_config(self, master, overrides):
            asked.append(list(overrides))
            return OmegaConf.create({"hydra": {}, "overrides": list(overrides)})

    def deployed(cfg):  # the deployment of an untrained shape: 2 layers 1 ms a call, 4 layers 2 ms; int8 the fastest
        layers = int(next(o for o in cfg.overrides if o.startswith("theseus.successor_layers=")).split("=")[1])
        assert "hydra" not in cfg  # the job's config as a run receives it
        row = {"pytorch_predecessor": 0.1, "onnx_fp32": 3.0 * layers, "onnx_int8": layers / 2}
        return SimpleNamespace(latency_ms={"batch_1_own_lengths": row})

    monkeypatch.setattr(sweeper, "untrained_deployment", deployed)
    search = sweeper.Search.__new__(sweeper.Search)  # its launcher is Hydra's: not needed to time shapes
    search.settings, search.config = SearchSettings(max_latency_ms=1.5), OmegaConf.create({})
    search.hydra_context = SimpleNamespace(config_loader=Loader())
    study = optuna.create_study(directions=list(SearchSettings.DIRECTIONS))
    shapes = search.timed_shapes(study, space, tmp_path)
    assert [(dict(s.shape)["theseus.successor_layers"], s.ms, s.target) for s in shapes] == [
        ("2", 1.0, "onnx_int8"),
        ("2", 1.0, "onnx_int8"),
        ("4", 2.0, "onnx_int8"),
        ("4", 2.0, "onnx_int8"),
    ]  # the predecessor's row is no runtime of the successor's
    assert all("optimizer.lr=0.0001" in o and "deploy.batch_sizes=[1]" in o for o in asked)  # lr at its first value
    assert search.timed_shapes(study, space, tmp_path) == shapes and len(asked) == 4  # kept: none timed again
    sweeper.write_untrained(shapes, search.settings, tmp_path / "search")
    assert (tmp_path / "search" / "untrained.md").read_text().count("| yes |") == 2
    study.enqueue_trial({"theseus.successor_layers": "4", "theseus.successor.intermediate_size": "8",
                         "optimizer.lr": 2e-4})  # fmt: skip
    over = study.ask(space.distributions)
    assert sweeper.skipped_as_slower(study, over, search.settings, shapes)
    assert (
        study.trials[over.number]
        .user_attrs[sweeper.OUTCOME]
        .startswith(
            "pruned before training: theseus.successor_layers=4, theseus.successor.intermediate_size=8 takes 2.00 ms"
        )
    )
    # A target under every shape's time: the search ends before asking any trial.
    search.settings = SearchSettings(max_latency_ms=0.5, trials=2, params={})
    monkeypatch.setattr(sweeper, "open_study", lambda settings, folder: study)
    monkeypatch.setattr(sweeper, "search_space", lambda params, arguments: space)
    search.config = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)}}, "data": {}})
    with pytest.raises(SystemExit) as ended:
        search.sweep([])
    assert ended.value.code == 2 and "no shape of the search meets it; the fastest" in capsys.readouterr().err


def test_a_trial_pruned_before_training_in_a_parallel_batch_leaves_each_other_trial_its_own_folder(tmp_path):
    """Trials 2 to 4 asked at once, trial 3 of a shape slower than the pick: the launcher numbers a call's jobs on
    from the first, so trial 4, launched beside trial 2, ran in folder 3, and the report put trial 3's reason on it."""
    import optuna
    from hydra.core.utils import JobReturn, JobStatus
    from omegaconf import OmegaConf

    from theseus_pl.app.search import sweeper
    from theseus_pl.app.search.settings import SearchSettings

    class Launcher:  # numbers its jobs as Hydra's launchers do: the call's first index, then on
        def __init__(self) -> None:
            self.folders: list[tuple[int, list[str]]] = []

        def launch(self, overrides, initial_job_idx):
            self.folders += [(initial_job_idx + i, job) for i, job in enumerate(overrides)]
            return [JobReturn(overrides=job, status=JobStatus.FAILED, _return_value=RuntimeError("planted"))
                    for job in overrides]  # fmt: skip

    search = sweeper.Search.__new__(sweeper.Search)  # the launcher's part of a search, not Hydra's sweeper
    search.settings = SearchSettings(trials=5, parallel=3, max_score_drop=1.0, references=False,
                                     params={"theseus.successor_layers": "choice(3,4)"})  # fmt: skip
    search.config = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)}}, "data": {"kind": None}})
    search.launcher, search.validate = Launcher(), lambda overrides: None
    study = sweeper.open_study(search.settings, tmp_path)
    space = {"theseus.successor_layers": optuna.distributions.CategoricalDistribution(["3", "4"])}
    for number, score, ms, layers in ((0, 80.0, 10.0, 4), (1, 79.5, 6.0, 3)):  # 4 layers: slower than the pick
        planted = TrialPoint(number=number, score=score, latency_ms=ms, throughput_ms=None, target="onnx_int8",
                             settings={"theseus.successor_layers": str(layers)}, folder=str(tmp_path / str(number)),
                             layers=layers, intermediate_size=None, fastest_ms=ms)  # fmt: skip
        study.add_trial(optuna.trial.create_trial(
            values=[planted.score, planted.latency_ms], params=dict(planted.settings), distributions=space,
            user_attrs={sweeper.OUTCOME: "measured", sweeper.POINT: sweeper.point_dict(planted),
                        sweeper.PREDECESSOR_SCORE: 80.2},
        ))  # fmt: skip
    for layers in ("3", "4", "3"):
        study.enqueue_trial({"theseus.successor_layers": layers})
    search.sweep([])
    assert [(number, job[0]) for number, job in search.launcher.folders] == [
        (2, "theseus.successor_layers=3"), (4, "theseus.successor_layers=3")
    ]  # fmt: skip


def test_a_trial_is_weighed_by_the_model_its_run_ships_and_a_time_not_taken_fails_it_alone(tmp_path):
    """Deploy picks on the mean over the batch sizes it timed; the search picked again at the serving batch alone and
    put another runtime on the front and the pick's card than the record shipped. A time not taken (NaN, kept as
    null) crashed the whole search with a TypeError, its trial left running."""
    from dataclasses import replace

    import optuna
    from hydra.core.utils import JobReturn, JobStatus
    from omegaconf import OmegaConf
    from results_records import V1_RESULTS, a_run, plant

    from theseus_pl.app.search.settings import SearchSettings
    from theseus_pl.app.search.sweeper import OUTCOME, POINT, tell

    study = optuna.create_study(directions=list(SearchSettings.DIRECTIONS))
    serving = {"pytorch_successor": 10.0, "onnx_fp32": 6.0, "onnx_int8": 3.0, "openvino_int8": 3.3}
    for number, (shipped, untimed) in enumerate([("openvino_int8", "onnx_fp32"), ("onnx_int8", "onnx_int8")]):
        folder = tmp_path / str(number)
        deployment = replace(
            read_run(V1_RESULTS, TaskModelResults).deployment, target=shipped,
            dev_score={"pytorch_successor": 79.6, "onnx_fp32": 79.6, "onnx_int8": 79.5, "openvino_int8": 79.4},
            latency_ms={"batch_1_own_lengths": {**serving, untimed: None},
                        "batch_32_own_lengths": {name: ms * 10 for name, ms in serving.items()}},
        )  # fmt: skip
        plant(folder, a_run(successor_dir=str(folder / "successor"), deployment=deployment))
        job = JobReturn(status=JobStatus.COMPLETED, _return_value=None,
                        hydra_cfg=OmegaConf.create({"hydra": {"runtime": {"output_dir": str(folder)}}}))  # fmt: skip
        tell(study, study.ask(), job, batch_size=1)
    weighed, failed = study.trials
    assert weighed.values == [79.4, 3.3] and weighed.user_attrs[POINT]["target"] == "openvino_int8"
    assert weighed.user_attrs[POINT]["throughput_ms"] == 33.0 and weighed.user_attrs[POINT]["fastest_ms"] == 3.0
    assert failed.state == optuna.trial.TrialState.FAIL
    assert failed.user_attrs[OUTCOME] == (
        f"{tmp_path / '1'}: its shipped model (onnx_int8) has no time a call at batch 1 (batch_1_own_lengths)"
    )


def test_a_search_joining_a_shared_study_leaves_another_machines_running_trial_to_it(tmp_path):
    """Two searches on one storage (``hydra.sweeper.storage``, where machines share a study): the second closed the
    first's running trial as cut short and asked its values again, and the first then crashed telling its outcome
    (Optuna's UpdateFinishedTrialError). A search resumed in its own folder still reruns the trial it was in."""
    import optuna
    from hydra.core.utils import JobReturn, JobStatus

    from theseus_pl.app.search.settings import SearchSettings
    from theseus_pl.app.search.sweeper import SEARCHER, open_study, searcher_of, tell

    settings = SearchSettings(storage=f"sqlite:///{tmp_path / 'shared.db'}")
    space = {"optimizer.lr": optuna.distributions.FloatDistribution(1e-5, 1e-4)}
    first = open_study(settings, tmp_path / "a")
    running = first.ask(space)
    running.set_user_attr(SEARCHER, searcher_of(tmp_path / "a"))  # as the search tags each trial it asks
    second = open_study(settings, tmp_path / "b")
    assert [trial.state.name for trial in second.trials] == ["RUNNING"]
    tell(first, running, JobReturn(status=JobStatus.FAILED, _return_value=RuntimeError("planted")), batch_size=1)
    assert [trial.state.name for trial in first.trials] == ["FAIL"]
    cut_short = first.ask(space)
    cut_short.set_user_attr(SEARCHER, searcher_of(tmp_path / "a"))
    resumed = open_study(settings, tmp_path / "a")
    assert [trial.state.name for trial in resumed.trials] == ["FAIL", "FAIL", "WAITING"]
    assert resumed.ask(space).params == cut_short.params  # asked again first, with the same values


def test_the_trial_a_stopped_search_was_in_is_reported_as_ended_not_as_waiting_for_results(tmp_path, capsys):
    """Resumed, the search closes the trial it was in and runs its values again in a new trial and folder; the old
    folder (Hydra's record, no results.json) was listed among the jobs with no results yet, though it never gets any."""
    import optuna

    from theseus_pl.app.report.tables import find_records, report_command
    from theseus_pl.app.search.settings import SearchSettings
    from theseus_pl.app.search.sweeper import OUTCOME, POINT, PREDECESSOR_SCORE, open_study, point_dict, write_answer

    settings = SearchSettings(references=False)
    space = {"optimizer.lr": optuna.distributions.FloatDistribution(1e-5, 1e-4)}
    killed = open_study(settings, tmp_path).ask(space)  # its job started in folder 0, then the search was stopped
    (tmp_path / "0" / ".hydra").mkdir(parents=True)
    (tmp_path / "0" / ".hydra" / "overrides.yaml").write_text(f"- optimizer.lr={killed.params['optimizer.lr']}\n")
    study = open_study(settings, tmp_path)
    rerun = study.ask(space)
    (planted,) = _planted_runs([point(rerun.number, 79.5, 5.0)], tmp_path)
    attributes = {OUTCOME: "measured", POINT: point_dict(planted), PREDECESSOR_SCORE: 80.0}
    for name, value in attributes.items():
        rerun.set_user_attr(name, value)
    study.tell(rerun, [79.5, 5.0])
    write_answer(study, settings, tmp_path / "search")
    assert find_records([tmp_path])[1] == []
    report_command([tmp_path], "method", tmp_path / "report", True, pytest.fail)
    assert f"{tmp_path / '0'}: cut short as its search was stopped: its values run again in a later trial" in (
        capsys.readouterr().out
    )


def test_a_plain_override_of_a_searched_key_fixes_it_however_hydra_spells_it():
    """``++theseus.successor_layers=2`` (Hydra's force-add) was matched as spelled: the depth was searched all the same,
    and each trial's drawn depth, after the fixed one, won."""
    from theseus_pl.app.search.space import search_space

    params = {"theseus.successor_layers": "choice(2,3)", "optimizer.lr": "interval(1e-4,1e-3)"}
    for spelled in ("theseus.successor_layers=2", "++theseus.successor_layers=2"):
        space = search_space(params, [spelled])
        assert list(space.distributions) == ["optimizer.lr"] and space.fixed == [spelled]
    added = search_space({"+theseus.successor.width": "choice(8,16)"}, ["theseus.successor.width=4,8"])
    assert list(added.distributions) == ["theseus.successor.width"]  # the command line's sweep, as it spells it
