"""The successor's model card: valid hub metadata from results.json, whatever the task's metric and dev sets."""

import json
from dataclasses import replace

import pytest
from app_runs import compose_config
from huggingface_hub import ModelCard
from results_records import V1_RESULTS, V2_LANGUAGE_MODEL, a_run, an_embedding_run

from theseus_pl.app.kinds.task_model.record import DataFacts, LayerCounts, ParamCounts, TaskModelResults
from theseus_pl.app.results.reading import read_run
from theseus_pl.app.run.stages import hub_id
from theseus_pl.app.ship.model_card import model_card, write_model_card
from theseus_pl.core.schedules import CurriculumSchedule

pytestmark = pytest.mark.quick


def results_for(task, metrics, eval_splits=("validation",), labels=("a", "b"), dataset="nyu-mll/glue", **changes):
    record = a_run(task, predecessor_score=50.0, successor_score=50.0, base_model="org/base",
                   schedule="CurriculumSchedule(b=0.5)", switch_step=100, steps=200,
                   layers=LayerCounts(predecessor=6, successor=3), params=ParamCounts(predecessor=2000, successor=1000),
                   speedup=2.0)  # fmt: skip
    data = DataFacts(train_size=10, eval_size=5, eval_splits=list(eval_splits), text_columns=["text"],
                     labels=list(labels), source="somewhere", dataset=dataset,
                     dataset_config=task.lower() if dataset else None)  # fmt: skip
    predecessor, successor = (
        replace(part, metrics=metrics, shape=None) for part in (record.predecessor, record.successor)
    )
    return replace(record, predecessor=predecessor, successor=successor, data=data, **changes)


def parsed(results):
    return ModelCard(str(model_card(results)))  # what a reader of the saved file gets


def test_mnli_scores_name_their_dev_set():
    metrics = {"accuracy_m": 0.8, "accuracy_mm": 0.7}
    card = parsed(results_for("MNLI", metrics, ("validation_matched", "validation_mismatched"), ("e", "n", "c")))
    assert {(r.dataset_split, r.metric_type, r.metric_value) for r in card.data.eval_results} == {
        ("validation_matched", "accuracy", 0.8), ("validation_mismatched", "accuracy", 0.7)
    }  # fmt: skip
    assert card.data.eval_results[0].dataset_name == "GLUE MNLI"


def test_a_regression_names_hub_metrics_and_no_labels():
    card = parsed(results_for("STS-B", {"pearson": 0.9, "spearman": 0.8, "mean": 0.85}, labels=()))
    assert card.data.metrics == ["pearsonr", "spearmanr"]
    assert [r.metric_type for r in card.data.eval_results] == ["pearsonr", "spearmanr"]
    assert "a regression" in card.text


def test_own_data_has_no_hub_dataset_and_missing_numbers_are_not_invented():
    results = results_for("reviews", {"accuracy": None}, dataset=None, speedup=None)
    results = replace(results, successor=replace(results.successor, score=float("nan")))
    card = parsed(results)
    assert card.data.datasets is None and card.data.eval_results is None
    assert "speed-up was not measured" in card.text and "n/a" in card.text
    assert "The share of the predecessor's score kept is not given (a score is not a number" in card.text
    busy = parsed(replace(results, speedup_busy_cores=1.4)).text  # timed and left out: it said "not measured"
    assert "its speed-up was timed while other processes kept 1.4 cores of the machine busy, twice, and is left" in busy
    assert "not measured" not in busy


def test_the_card_of_a_version_1_results_file_is_the_card_its_run_wrote(tmp_path):
    # model_card_v1.md is the README.md theseus_pl wrote (at 0fa8775) for the run of results_v1.json.
    path = write_model_card(tmp_path, read_run(V1_RESULTS, TaskModelResults))
    assert path.read_text() == (V1_RESULTS.parent / "model_card_v1.md").read_text()
    assert "## Deployment" in path.read_text()


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["model=minilm"], "sentence-transformers/all-MiniLM-L6-v2"),
        (["model.base=org/base"], "org/base"),
        (["model.base=org/base", "model.predecessor=org/fine-tuned"], "org/fine-tuned"),
        (["model.base=/models/mine"], None),
        (["model.base=/models/mine", "model.hub_id=org/mine"], "org/mine"),
        # a shipped model's hub id names its packaged copy only: another model given in its place is not called so
        (["model=minilm", "model.base=/models/mine"], None),
        (["model=minilm", "model.base=org/other"], "org/other"),
        (["model=minilm", "model.base=/models/mine", "model.hub_id=org/mine"], "org/mine"),
        (["model=mpnet_base", "model.base=/unpacked/model"], None),
        (["+experiment=smollm2_quick"], "HuggingFaceTB/SmolLM2-135M-Instruct"),
        (["+experiment=smollm2_quick", "model.gguf=null", "model.base=/models/llama"], None),
        (["+experiment=smollm2_quick", "model.gguf=null", "model.base=org/llama"], "org/llama"),
        (["model=minilm", "model.predecessor=org/minilm-rte"], "org/minilm-rte"),
    ],
)
def test_base_model_is_the_hub_id_the_user_named(overrides, expected):
    assert hub_id(compose_config(*overrides).model) == expected


def test_a_given_predecessor_keeps_the_shipped_id_only_where_it_was_fine_tuned_from_it(tmp_path):
    shipped = compose_config("model=minilm").model
    ours, elsewhere = tmp_path / "RTE-0123456789abcdef", tmp_path / "my-classifier"
    for folder, base in ((ours, shipped.base), (elsewhere, "/models/bert-rte")):
        folder.mkdir()
        (folder / "predecessor.json").write_text(json.dumps({"base": base, "finetune": {}}))
    assert hub_id(compose_config("model=minilm", f"model.predecessor={ours}").model) == shipped.hub_id
    assert hub_id(compose_config("model=minilm", f"model.predecessor={elsewhere}").model) is None
    (elsewhere / "predecessor.json").unlink()  # a classifier this tool did not make records no base
    assert hub_id(compose_config("model=minilm", f"model.predecessor={elsewhere}").model) is None
    given = compose_config("model=minilm", f"model.predecessor={elsewhere}", "model.hub_id=org/bert-rte").model
    assert hub_id(given) == "org/bert-rte"


def test_a_score_that_is_not_a_number_is_left_out_of_the_metadata():
    card = parsed(results_for("STS-B", {"pearson": 0.9, "spearman": float("nan")}, labels=()))
    assert [(r.metric_type, r.metric_value) for r in card.data.eval_results] == [("pearsonr", 0.9)]
    assert "| spearman | n/a | n/a |" in card.text


def test_the_card_gives_the_schedule_as_people_read_it():
    schedule = CurriculumSchedule.from_steps_to_full(b=0.3, steps_to_full=150)  # the demo's
    results = results_for("RTE", {"accuracy": 0.5}, schedule=schedule.describe(), switch_step=schedule.switch_step)
    assert (
        "with theseus_pl's `theseus_curriculum` method (replacement schedule `curriculum: p = 0.3 at step 0, 1 from "
        "step 150`; every module replaced from step 150), 200 training steps." in parsed(results).text
    )
    unfinished = replace(results, schedule="curriculum: p = 0.3 at step 0, 1 from step 250", switch_step=250,
                         successor_finetuning_steps=0)  # allow_unfinished_schedule  # fmt: skip
    assert (
        "every module replaced from step 250, which the run ended before), 200 training steps."
        in parsed(unfinished).text
    )


@pytest.mark.parametrize("repo_id", [None, "org/rte-3-layers"], ids=["in the run folder", "published"])
def test_a_pickled_successor_names_theseus_pl_as_its_library_and_is_downloaded_before_loading(repo_id):
    results = results_for("RTE", {"accuracy": 0.5})
    results = replace(results, successor=replace(results.successor, format="pickled module"))
    card = ModelCard(str(model_card(results, repo_id)))
    assert card.data.library_name == "theseus_pl"  # its loader: transformers cannot load a pickled module
    loaded = f'load_successor(snapshot_download("{repo_id}"))' if repo_id else 'load_successor("<this folder>")'
    assert f"model = {loaded}\n" in card.text
    assert ("from huggingface_hub import snapshot_download\n" in card.text) == bool(repo_id)


def test_the_card_of_a_decoder_lm_run_says_what_a_user_of_it_needs():
    results = replace(read_run(V2_LANGUAGE_MODEL), base_model="HuggingFaceTB/SmolLM2-135M-Instruct")
    card = ModelCard(str(model_card(results)))  # what a reader of the saved file gets
    assert card.data.pipeline_tag == "text-generation" and card.data.library_name == "transformers"
    assert card.data.base_model == "HuggingFaceTB/SmolLM2-135M-Instruct" and card.data.metrics == ["perplexity"]
    text = card.text
    assert "The predecessor is `HuggingFaceTB/SmolLM2-135M-Instruct`, converted from its GGUF file, 30 layers" in text
    assert "compressed to 15 layers\nwith theseus_pl's `lm_theseus` method" in text
    assert "150 training steps on 153,600 tokens of the 2012 US party convention speeches" in text
    assert "| perplexity | 25.50 | 38.06 |" in text and "nats per token | | 1.470 |" in text
    assert "| top-1 agreement with the predecessor (%) | | 44.8 |" in text
    assert "| lm-eval `sst2_local` acc (%) | 71.33 | 50.92 |" in text  # read from a file of zero_shot_sst2
    assert "45.4 tokens per second against the predecessor's 27.1 (1.67x)" in text
    assert "- successor: ' is the economy of the world.'" in text
    assert 'AutoModelForCausalLM.from_pretrained("<this folder or its hub id>")' in text
    assert "/runs/" not in text and "/cache/" not in text  # the card travels with the model: no local path
    assert "(never trained on)" not in text  # a run that scored no other held-out text


def test_a_decoder_lm_card_gives_the_other_held_out_text_where_the_run_scored_one():
    results = read_run(V2_LANGUAGE_MODEL)
    results = replace(
        results,
        predecessor=replace(results.predecessor, other_text={"perplexity": 61.2, "nll": 4.11}),
        successor=replace(
            results.successor, other_text={"perplexity": 140.5, "nll": 4.95, "kl": 0.93, "agreement": 0.4}
        ),
        data=replace(results.data, other_source="Guardian headlines of 2017-2020"),
    )
    text = ModelCard(str(model_card(results))).text
    assert "| perplexity on Guardian headlines of 2017-2020 (never trained on) | 61.20 | 140.50 |" in text
    assert "| KL(predecessor ‖ successor) there | | 0.930 |" in text


def test_a_decoder_lm_card_gives_each_gguf_file_its_llama_cpp_perplexity_and_leaves_out_a_busy_timing():
    speeds = {"predecessor_decode_tokens_per_second": 89.5, "successor_decode_tokens_per_second": 152.1,
              "decode_speedup": 1.71, "prefill_speedup": 1.99, "predecessor_perplexity": 25.6,
              "successor_perplexity": 32.4, "other_cores": 0.05}  # fmt: skip
    check = {"mib": 157.3, "max_logit_diff": 0.02, "agreement": 1.0, "perplexity": 32.38, "reference_perplexity": 32.37}
    rows = [
        {"type": "f16", "file": "gguf/model.f16.gguf", **check, "agreement_floor": 0.99, "llama_cpp": speeds},
        {"type": "q8_0", "file": "gguf/model.q8_0.gguf", **check, "agreement_floor": 0.95,
         "llama_cpp": {**speeds, "successor_perplexity": 32.5, "other_cores": 1.2}},
        {"type": "q4_0", "file": "gguf/model.q4_0.gguf", **check, "agreement_floor": 0.6, "llama_cpp": None},
    ]  # fmt: skip
    results = replace(read_run(V2_LANGUAGE_MODEL), gguf=rows)
    text = ModelCard(str(model_card(results))).text
    assert "| `gguf/model.f16.gguf` | f16 | 157.3 | 100.0 | 32.38 (32.37) | 32.40 (25.60) | 152.1 against 89.5" in text
    assert "| 32.50 (25.60) | timed on a busy machine: left out |" in text
    assert "| `gguf/model.q4_0.gguf` | q4_0 | 157.3 | 100.0 | 32.38 (32.37) | not run | not timed |" in text
    summary = results.summary()
    assert summary["final/gguf_q8_0_llama_cpp_successor_perplexity"] == 32.5
    assert "final/gguf_q8_0_llama_cpp_decode_speedup" not in summary  # busy: not the model's speed-up
    assert summary["final/gguf_f16_llama_cpp_decode_speedup"] == 1.71


def test_the_card_of_a_sentence_embedding_run_says_what_a_user_of_it_needs():
    card = parsed(an_embedding_run())
    assert card.data.pipeline_tag == "sentence-similarity" and card.data.library_name == "sentence-transformers"
    assert card.data.base_model == "sentence-transformers/all-MiniLM-L6-v2" and card.data.metrics == ["spearmanr"]
    assert {"sentence-transformers", "sentence-similarity", "feature-extraction", "theseus_pl"} <= set(card.data.tags)
    text = card.text
    assert "The teacher (predecessor) is `sentence-transformers/all-MiniLM-L6-v2`: 6 layers, 384-dimensional" in text
    assert "successor started as the teacher's layers 3, 4, 5 (counting from 0)" in text
    assert "trained for 500 steps (16,000 sentences seen)" in text and "step 400's" in text
    assert "| STS-B dev Spearman (x100) | 82.00 | 78.50 |" in text
    assert "keeps 95.7% of the teacher's STS-B score" in text  # 78.5 / 82
    assert "| mean squared error to the teacher's vectors | | 1.23e-04 |" in text
    assert "| mean cosine to the teacher's vectors | | 0.9712 |" in text
    assert "| layers | 6 | 3 |" in text and "| parameters | 22,713,216 | 17,390,208 |" in text
    assert "in PyTorch on AMD EPYC 7B13 64-Core Processor" in text
    assert "one sentence at a time: 1.90x (180 sentences per second against 95)" in text
    assert "in batches of 32: 1.94x (795 sentences per second against 410)" in text
    assert 'model = SentenceTransformer("<this folder or its hub id>")\n' in text and "model.encode([" in text
    assert "/runs/" not in text  # the card travels with the model: no local path


def test_an_embedding_card_leaves_out_a_busy_timing_and_says_what_it_does_not_know():
    quiet = an_embedding_run()
    busy = {**quiet.speed, "other_cores": 1.3}
    results = replace(quiet, speed=busy, steps=0, best_step=None, base_model=None, kept_layers=None,
                      method="embedding_truncation", successor=replace(quiet.successor, sts=None))  # fmt: skip
    card = ModelCard(str(model_card(results, "org/minilm-3")))
    assert card.data.base_model is None
    assert "The teacher (predecessor) is a local sentence-transformers model" in card.text
    assert "kept 1.3 cores of the machine busy, twice, and is left out: not the model's alone" in card.text
    assert "1.90x" not in card.text and "1.94x" not in card.text  # the busy machine's figures
    assert "It was not trained: its layers are the teacher's as they were." in card.text
    assert "| STS-B dev Spearman (x100) | 82.00 | n/a |" in card.text and "% of the teacher's" not in card.text
    assert 'SentenceTransformer("org/minilm-3")' in card.text  # published: loads from its repo


def test_an_embedding_card_of_a_pytorch_successor_named_by_deploy_target_does_not_call_it_the_fastest():
    """``--target pytorch_successor``: the card said it "was the fastest here", beside timings where ONNX ran faster."""
    from theseus_pl.deployment.targets import pick_target

    deployment = read_run(V1_RESULTS, TaskModelResults).deployment
    choice = pick_target("pytorch_successor", deployment.latency_ms, deployment.dev_score, 0.5)
    named = replace(deployment, target=choice.target, target_reason=choice.reason)
    card = str(model_card(replace(an_embedding_run(), deployment=named)))
    assert "The PyTorch successor is the model to ship here: load it as above." in card
    assert "fastest here" not in card
