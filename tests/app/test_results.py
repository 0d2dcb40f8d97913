"""results.json: one envelope over a typed record per kind of run, one reader; older files of both kinds load."""

import json
from dataclasses import replace

import pytest
from results_records import V1_RESULTS, V2_LANGUAGE_MODEL, V2_RESULTS, a_run, an_embedding_run

from theseus_pl.app.kinds.language_model.record import LanguageModelResults
from theseus_pl.app.kinds.task_model.record import ModelShape, TaskModelResults
from theseus_pl.app.results.deployment_block import deployment_dict, read_deployment, write_deployment
from theseus_pl.app.results.envelope import SCHEMA_VERSION, ResultsError, WandbLink, write_results
from theseus_pl.app.results.reading import read_run
from theseus_pl.deployment.record import DeploySettings

pytestmark = pytest.mark.quick


def test_a_version_1_file_loads_into_the_record():
    results = read_run(V1_RESULTS, TaskModelResults)
    assert (results.task, results.method, results.steps, results.seed) == ("RTE", "theseus_curriculum", 6, 42)
    assert results.folder == V1_RESULTS.parent
    assert results.predecessor.origin == "fine-tuned" and results.predecessor.metrics == {"accuracy": 0.5}
    assert results.predecessor.shape == ModelShape(layers=4, hidden_size=32, intermediate_size=37)
    assert results.successor.shape == ModelShape(layers=2, hidden_size=32, intermediate_size=37)
    assert results.successor.format == "transformers"
    assert (results.layers.predecessor, results.layers.successor) == (4, 2)
    assert results.params.successor_layers == 13578
    assert results.data.labels == ["entailment", "not_entailment"] and results.data.dataset_config == "rte"
    assert (results.retained, results.retained_note) == (1.0, None)
    assert results.wandb is None and results.failed_steps == {} and results.single_module_scores is None
    deployment = results.deployment
    assert deployment is not None and deployment.onnx_int8 == "onnx/model_int8.onnx"
    assert deployment.settings == DeploySettings(quantize="int8", sequence_length=128, batch_sizes=(1, 2), repeats=1,
                                                 threads=1)  # fmt: skip
    assert list(deployment.latency_ms) == ["batch_1", "batch_2"]


def test_the_new_file_differs_from_version_1_only_by_its_schema_version_and_kind(tmp_path):
    version_1 = V1_RESULTS.read_text()
    written = write_results(tmp_path / "results.json", read_run(V1_RESULTS, TaskModelResults)).read_text()
    assert written == version_1.replace(
        "{\n", f'{{\n  "schema_version": {SCHEMA_VERSION},\n  "kind": "task_model",\n', 1
    )
    layout = read_run(V1_RESULTS, TaskModelResults).to_dict()
    assert layout.pop("schema_version") == 3 and layout.pop("kind") == "task_model"
    assert list(layout.items()) == list(json.loads(version_1).items())
    assert [path.name for path in tmp_path.iterdir()] == ["results.json"]  # written atomically: no staged file left


def test_a_record_round_trips_through_its_file(tmp_path):
    record = a_run(
        deployment=read_run(V1_RESULTS, TaskModelResults).deployment,
        wandb=WandbLink(id="x1", name="RTE theseus_curriculum", group="g", url=None, dir="/runs/run/wandb/run-x1"),
        single_module_scores=[61.0, 64.5],
        failed_steps={"speedup": "RuntimeError: out of memory"},
        resumed_from="/runs/run/checkpoints/last.ckpt",
    )
    path = write_results(tmp_path / "results.json", record)
    again = read_run(path, TaskModelResults)
    assert again == record and again.folder == tmp_path
    assert list(json.loads(path.read_text()).items())[:2] == [("schema_version", 3), ("kind", "task_model")]
    assert json.loads(path.read_text()) == json.loads(json.dumps(record.to_dict()))


def test_a_record_is_written_before_its_wall_time_is_known(tmp_path):
    record = a_run(wall_seconds=None)
    written = json.loads(write_results(tmp_path / "results.json", record).read_text())
    assert list(written)[-2:] == ["retained", "retained_note"] and "wall_seconds" not in written
    assert read_run(tmp_path / "results.json", TaskModelResults) == record


def test_a_score_that_is_not_a_number_is_written_as_null_and_nothing_is_retained(tmp_path):
    record = a_run(successor_score=float("nan"))
    assert record.retained is None and record.retained_note.startswith("a score is not a number")
    written = json.loads(write_results(tmp_path / "results.json", record).read_text())
    assert written["successor"]["score"] is None and written["successor"]["metrics"] == {"accuracy": None}
    assert written["retained"] is None and written["retained_note"] == record.retained_note
    again = read_run(tmp_path / "results.json", TaskModelResults)
    assert again.successor.score is None and again.retained is None and again.retained_note == record.retained_note


def test_retained_is_the_share_of_the_predecessors_score_where_that_means_something():
    assert a_run(predecessor_score=80.0, successor_score=60.0).retained == pytest.approx(0.75)
    one_class = a_run(predecessor_score=0.0, successor_score=10.0)  # e.g. CoLA's Matthews correlation
    assert one_class.retained is None and one_class.retained_note == (
        "the predecessor's score is 0: a share of it means nothing"
    )
    assert a_run(predecessor_score=float("inf")).retained is None


def test_a_file_of_an_older_theseus_pl_gets_the_defaults_of_the_keys_it_lacks(tmp_path):
    older = json.loads(V1_RESULTS.read_text())
    for key in ("failed_steps", "wandb", "single_module_scores", "deployment", "wall_seconds", "retained_note"):
        del older[key]
    for part in ("predecessor", "successor"):
        del older[part]["shape"]
    del older["successor"]["format"], older["params"]["successor_layers"]
    (tmp_path / "results.json").write_text(json.dumps(older))
    results = read_run(tmp_path / "results.json", TaskModelResults)
    assert results.failed_steps == {} and results.wandb is None and results.deployment is None
    assert results.predecessor.shape is None and results.successor.format == "transformers"
    assert results.params.successor_layers is None and results.wall_seconds is None
    assert results.retained_note is None and results.retained == 1.0


def test_a_newer_schema_or_a_missing_key_is_refused_with_what_to_do(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"schema_version": 4, **json.loads(V1_RESULTS.read_text())}))
    with pytest.raises(ResultsError, match=r"schema version 4; this theseus_pl reads versions 1 to 3: upgrade"):
        read_run(path, TaskModelResults)
    for edited in ("3", 0, True):  # not asked to upgrade for a version that no release writes
        path.write_text(json.dumps({**json.loads(V1_RESULTS.read_text()), "schema_version": edited}))
        with pytest.raises(ResultsError, match=rf"has schema_version {edited!r}, which is no schema version \("):
            read_run(path, TaskModelResults)
    for dropped in ("steps", "predecessor.score", "data.labels", "successor.shape.layers", "deployment.onnx"):
        data = json.loads(V1_RESULTS.read_text())
        *parents, key = dropped.split(".")
        holder = data
        for parent in parents:
            holder = holder[parent]
        del holder[key]
        path.write_text(json.dumps(data))
        with pytest.raises(ResultsError, match=rf"^{path}: no {dropped}: not a theseus_pl results.json"):
            read_run(path, TaskModelResults)


def test_the_deployment_block_alone_round_trips_through_deployment_json(tmp_path):
    deployment = read_run(V1_RESULTS, TaskModelResults).deployment
    path = write_deployment(tmp_path / "deployment.json", deployment)
    assert read_deployment(path) == deployment
    assert (
        json.loads(path.read_text()) == json.loads(V1_RESULTS.read_text())["deployment"] == deployment_dict(deployment)
    )


def test_lookup_follows_a_dotted_results_path():
    results = read_run(V1_RESULTS, TaskModelResults)
    assert results.lookup("method") == "theseus_curriculum"
    assert results.lookup("layers.successor") == 2 and results.lookup("successor.shape.intermediate_size") == 37
    assert results.lookup("successor.metrics.accuracy") == 0.5 and results.lookup("retained") == 1.0
    assert results.lookup("deployment.settings.threads") == 1
    assert results.lookup("settings.seed") == 42
    for missing in ("nothing", "layers.nothing", "folder", "to_dict", "successor.metrics.f1", "task.upper"):
        assert results.lookup(missing) is None, missing


def test_the_summary_gives_the_headline_and_each_deployed_model():
    summary = read_run(V1_RESULTS, TaskModelResults).summary()
    assert summary["final/successor_score"] == 50.0 and summary["final/retained"] == 1.0
    assert summary["final/params_successor"] == 26252.0 and summary["final/speedup"] == pytest.approx(1.2804, abs=1e-4)
    assert summary["final/deploy/onnx_int8_score"] == 50.0
    assert summary["final/deploy/onnx_int8_speedup_batch_2"] == pytest.approx(4.5968, abs=1e-4)
    assert "final/deploy/onnx_int8_score" not in a_run().summary()


def test_records_compare_by_what_the_file_holds_not_by_where_it_was_read():
    record = a_run()
    assert replace(record, folder=V1_RESULTS.parent) == record
    assert replace(record, data=replace(record.data, train_size=1)) != record
    assert SCHEMA_VERSION == 3


def test_todays_files_of_both_kinds_load_through_the_one_reader(tmp_path):
    task_model, language_model = read_run(V2_RESULTS), read_run(V2_LANGUAGE_MODEL)
    assert isinstance(task_model, TaskModelResults) and task_model == read_run(V1_RESULTS, TaskModelResults)
    assert isinstance(language_model, LanguageModelResults) and language_model.folder == V2_LANGUAGE_MODEL.parent
    assert (language_model.method, language_model.steps, language_model.seed) == ("lm_theseus", 150, 42)
    assert language_model.successor.perplexity == 38.06
    # Its zero-shot SST-2 accuracy (the hand-written check sst2_local replaced) reads as sst2_local's acc.
    assert language_model.predecessor.lm_eval == {"sst2_local": {"acc": 0.7133}}
    assert language_model.hardware.precision == "bf16-mixed" and language_model.wandb.id == "ab12cd34"
    assert language_model.sample.prompt.startswith("The president") and language_model.speed["decode_speedup"] == 1.67
    # Rewritten, it is the same record, now saying its kind like every version-3 file (and zero-shot as lm-eval).
    again = read_run(write_results(tmp_path / "results.json", language_model))
    assert again == language_model
    written = json.loads((tmp_path / "results.json").read_text())
    assert list(written)[:2] == ["schema_version", "kind"] and written["kind"] == "language_model"
    before = json.loads(V2_LANGUAGE_MODEL.read_text())
    for side in ("predecessor", "successor"):
        before[side]["lm_eval"] = {"sst2_local": {"acc": before[side].pop("zero_shot_sst2")}}
    assert {key: value for key, value in written.items() if key != "schema_version"} == {
        key: value for key, value in before.items() if key != "schema_version"
    }


def test_both_kinds_share_the_envelope_and_name_their_own_headline():
    task_model, language_model = read_run(V2_RESULTS), read_run(V2_LANGUAGE_MODEL)
    for record in (task_model, language_model):
        assert record.lookup("kind") == record.kind and record.lookup("seed") == record.seed
        assert record.lookup("hardware.precision") == (record.hardware.precision if record.hardware else None)
    assert language_model.lookup("successor.kl") == 1.47 and language_model.lookup("speed.decode_speedup") == 1.67
    assert language_model.summary() == {
        "final/predecessor_perplexity": 25.5, "final/successor_perplexity": 38.06, "final/kl": 1.47,
        "final/agreement": 0.4475, "final/train_tokens": 153_600.0, "final/params_predecessor": 134_515_008.0,
        "final/params_successor": 81_432_000.0, "final/prefill_speedup": 1.66, "final/decode_speedup": 1.67,
        "final/predecessor_sst2_local_acc": 0.7133, "final/successor_sst2_local_acc": 0.5092,
    }  # fmt: skip
    assert task_model.summary()["final/successor_score"] == 50.0


def test_a_reader_of_one_kind_refuses_the_other_and_an_unknown_kind_is_named(tmp_path):
    with pytest.raises(
        ResultsError, match=r"kind 'language_model'; this reads 'task_model' runs only \(TaskModelResults\)"
    ):
        read_run(V2_LANGUAGE_MODEL, TaskModelResults)
    assert isinstance(read_run(V2_LANGUAGE_MODEL, LanguageModelResults), LanguageModelResults)
    path = tmp_path / "results.json"
    path.write_text(json.dumps({**json.loads(V2_LANGUAGE_MODEL.read_text()), "schema_version": 3, "kind": "vision"}))
    with pytest.raises(ResultsError, match=r"of kind 'vision'; this theseus_pl reads task_model, language_model"):
        read_run(path)
    damaged = json.loads(V2_LANGUAGE_MODEL.read_text())
    del damaged["successor"]["perplexity"]
    path.write_text(json.dumps(damaged))
    with pytest.raises(ResultsError, match=r"no successor.perplexity: not a theseus_pl results.json"):
        read_run(path)


def _edited(tmp_path, source, key: str, value) -> object:
    """``source``'s record with the value at dotted ``key`` replaced, as a hand edit of the file would."""
    data = json.loads(source.read_text())
    *parents, last = key.split(".")
    holder = data
    for parent in parents:
        holder = holder[int(parent)] if isinstance(holder, list) else holder[parent]
    holder[last] = value
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))  # Infinity and NaN as Python's json writes and reads them
    return path


@pytest.mark.parametrize(
    ("source", "key", "value", "says"),
    [
        (V1_RESULTS, "predecessor.score", "55.0", r"predecessor.score is '55.0' \(text\), not a number or null"),
        (V1_RESULTS, "successor.score", float("inf"), r"successor.score is inf: theseus_pl writes a number that is no"),
        (V1_RESULTS, "successor.metrics.accuracy", "high", r"successor.metrics.accuracy is 'high' \(text\), not a num"),
        (V1_RESULTS, "steps", 6.5, r"steps is 6.5 \(a number\), not a whole number"),
        (V1_RESULTS, "layers.successor", True, r"layers.successor is True \(true or false\), not a whole number"),
        (V1_RESULTS, "data.labels", "entailment", r"data.labels is 'entailment' \(text\), not a list"),
        (V1_RESULTS, "deployment.latency_ms.batch_1", 3.2, r"deployment.latency_ms.batch_1 is 3.2 \(a number\)"),
        (V2_LANGUAGE_MODEL, "successor.perplexity", float("nan"), r"successor.perplexity is nan: theseus_pl writes"),
        (V2_LANGUAGE_MODEL, "successor.kl", "a lot", r"successor.kl is 'a lot' \(text\), not a number or null"),
        (V2_LANGUAGE_MODEL, "hardware.cpu_flags", [1], r"hardware.cpu_flags\[0\] is 1 \(a number\), not text"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_on_reading_naming_its_key(tmp_path, source, key, value, says):
    path = _edited(tmp_path, source, key, value)
    with pytest.raises(ResultsError, match=rf"^{path}: {says}"):
        read_run(path)


def test_the_records_the_writer_writes_read_back_whatever_their_values(tmp_path):
    # A NaN score is written as null and reads back: null is the writer's not-a-number, in a float field too.
    path = _edited(tmp_path, V2_LANGUAGE_MODEL, "successor.perplexity", None)
    assert read_run(path).successor.perplexity is None
    written = write_results(tmp_path / "results.json", a_run(successor_score=float("nan"), wall_seconds=3))
    assert (
        read_run(written, TaskModelResults).successor.score is None
        and read_run(written, TaskModelResults).wall_seconds == 3
    )
    with pytest.raises(ResultsError, match=r"holds a value of the wrong shape"):
        read_run(_edited(tmp_path, V1_RESULTS, "deployment.settings.batch_sizes", 4))


def test_a_perplexity_written_as_null_reads_back_into_a_headline_that_says_n_a(tmp_path):
    """A diverged LM's inf perplexity is written as null; the headline of its record (report --dry-run) raised
    TypeError formatting the None."""
    record = read_run(_edited(tmp_path, V2_LANGUAGE_MODEL, "successor.perplexity", None))
    assert "-> n/a (successor)" in record.headline()


@pytest.mark.parametrize("kind", ["embedding, read back", "embedding, in the run", "task model", "language model"])
def test_a_score_that_is_no_number_is_n_a_in_every_kinds_headline(kind):
    """A constant model's NaN correlation (an LM's inf perplexity) is NaN in the run that scored it, whose last log line
    is its headline, and None once written as null and read back (report --dry-run): the embedding headline raised
    TypeError on the None, and every kind wrote the NaN as nan."""
    nan = float("nan")
    language_model = read_run(V2_LANGUAGE_MODEL)
    record, says = {
        "embedding, read back": (an_embedding_run(successor_sts=None), "-> n/a (successor)"),
        "embedding, in the run": (an_embedding_run(successor_sts=nan), "-> n/a (successor)"),
        "task model": (a_run(successor_score=nan, speedup=nan), "successor n/a (n/a retained)"),
        "language model": (
            replace(language_model, successor=replace(language_model.successor, perplexity=nan)),
            "-> n/a (successor)",
        ),
    }[kind]
    headline = record.headline()
    assert says in headline and "nan" not in headline
