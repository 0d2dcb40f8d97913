"""A task model's ``README.md``: a Hugging Face model card that can be published as it is.

The YAML header is built by ``huggingface_hub`` (``ModelCardData`` with ``eval_results``, which it writes as the
hub's ``model-index``), so the hub parses and displays it. Everything comes from ``results.json``; no local path
appears, since the card travels with the model. Its code loads the model from "<this folder>" until the model is
published: ``python -m theseus_pl.publish`` rewrites the card with the hub repo's id, so that the code runs as shown.
"""

from __future__ import annotations

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from theseus_pl.app.kinds.task_model.record import TaskModelResults
from theseus_pl.app.results.number_text import known
from theseus_pl.app.ship.card_text import found_by_search, number, quoted, timed_on_a_busy_machine
from theseus_pl.app.ship.deployment_table import (
    busy_sentences,
    int8_sentence,
    latency_table,
    openvino_sentence,
    padded_to,
    runtime_versions,
    target_sentence,
)
from theseus_pl.deployment.record import Deployment

# Our metric names -> the hub's metric ids (https://huggingface.co/metrics).
HUB_METRICS = {
    "accuracy": "accuracy",
    "f1": "f1",
    "matthews_corr": "matthews_correlation",
    "pearson": "pearsonr",
    "spearman": "spearmanr",
}
# MNLI's two dev sets carry these suffixes in results.json.
SPLIT_SUFFIXES = {"_m": 0, "_mm": 1}


# What loads the successor, by ``results.json``'s ``successor.format``: transformers cannot load a pickled module.
LIBRARIES = {"transformers": "transformers", "pickled module": "theseus_pl"}


def task_model_card(results: TaskModelResults, repo_id: str | None = None) -> ModelCard:
    """The card of a classifier or regressor compressed on its task."""
    data = results.data
    card_data = ModelCardData(
        model_name=f"{results.task}-{results.method}-{results.layers.successor}-layers".lower(),
        base_model=results.base_model,
        datasets=[data.dataset] if data.dataset else None,
        metrics=sorted({HUB_METRICS[key] for key, _, _ in _metric_rows(results)}),
        pipeline_tag="text-classification",
        library_name=LIBRARIES[results.successor.format],
        tags=["bert-of-theseus", "model-compression", "theseus_pl"],
        eval_results=_eval_results(results),
    )
    return ModelCard(f"---\n{card_data.to_yaml()}\n---\n\n{_body(results, repo_id)}")


def _metric_rows(results: TaskModelResults) -> list[tuple[str, str, str]]:
    """(our base name, the name in results.json, the dev split) for every metric the hub knows."""
    splits = results.data.eval_splits
    rows = []
    for name in results.successor.metrics:
        base, split = name, splits[0]
        for suffix, index in SPLIT_SUFFIXES.items():
            if name.endswith(suffix) and name.removesuffix(suffix) in HUB_METRICS:
                base, split = name.removesuffix(suffix), splits[index]
        if base in HUB_METRICS:
            rows.append((base, name, split))
    return rows


def _eval_results(results: TaskModelResults) -> list[EvalResult] | None:
    data, metrics = results.data, results.successor.metrics
    rows = [
        EvalResult(
            task_type="text-classification",
            task_name="Text Classification",
            dataset_type=data.dataset or results.task,
            dataset_name=_dataset_title(results),
            dataset_config=data.dataset_config,
            dataset_split=split,
            metric_type=HUB_METRICS[base],
            metric_name=name,
            metric_value=metrics[name],
        )
        for base, name, split in _metric_rows(results)
        if known(metrics[name])
    ]
    return rows or None


def _dataset_title(results: TaskModelResults) -> str:
    return f"GLUE {results.task}" if results.data.dataset == "nyu-mll/glue" else results.task


def _body(results: TaskModelResults, repo_id: str | None) -> str:
    predecessor, successor, data, layers = results.predecessor, results.successor, results.data, results.layers
    metric_rows = "\n".join(
        f"| {name} | {number(predecessor.metrics.get(name), 4)} | {number(successor.metrics.get(name), 4)} |"
        for name in successor.metrics
    )
    widths = "".join(f"| {name} | {before} | {after} |\n" for name, before, after in results.changed_widths())
    shape = f"from {layers.predecessor} to {layers.successor} layers{results.widths_clause()}"
    return f"""# {results.task}: a {layers.successor}-layer successor compressed with theseus_pl

{_origin(results)} It was compressed {shape}
with theseus_pl's `{results.method}` method{_schedule(results)}, {results.steps} training steps.
`theseus_*` methods are progressive module replacing (BERT-of-Theseus, Xu et al., EMNLP 2020): each group of
predecessor layers is replaced by one successor layer with a probability that rises during training, until the
successor alone remains.

## Task and data

{_task(results)} Trained on {data.train_size:,} rows of the training split; scored on {data.eval_size:,} rows
of the dev split ({", ".join(data.eval_splits)}).

## Results

| | predecessor | successor |
|---|---|---|
| dev score (x100) | {number(predecessor.score, 2)} | {number(successor.score, 2)} |
| layers | {layers.predecessor} | {layers.successor} |
{widths}| parameters | {results.params.predecessor:,} | {results.params.successor:,} |

{_retained_and_speed(results)}

| metric | predecessor | successor |
|---|---|---|
{metric_rows}
{found_by_search(results.search, results.hardware)}
## How to use
{_how_to_use(results, repo_id)}{_deployment(results, repo_id)}"""


def _how_to_use(results: TaskModelResults, repo_id: str | None) -> str:
    """transformers' pipeline for a plain checkpoint; theseus_pl's loader for pickled successor modules."""
    if LIBRARIES[results.successor.format] == "theseus_pl":
        return f"""
No transformers config describes these successor modules (a custom factory's modules, or layers narrower than the
embeddings with learned projections between): the model is pickled whole in `successor.pt`, and loading it needs
theseus_pl and the factory's module importable; its ONNX export (`deploy.onnx=true`, or `python -m
theseus_pl.deployment.stage`) needs neither.

```python
{_hub_import(repo_id, "snapshot_download")}from theseus_pl.core.io import load_successor
from transformers import AutoTokenizer

model = load_successor({_local_path(repo_id)})
tokenizer = AutoTokenizer.from_pretrained({quoted(repo_id, "<this folder>")})
logits = model(**tokenizer({_tokenizer_input(results)}, return_tensors="pt")).logits
```
"""
    return f"""
```python
from transformers import pipeline

classifier = pipeline("text-classification", model={quoted(repo_id, "<this folder or its hub id>")})
classifier({_example_input(results)})
```
"""


def _deployment(results: TaskModelResults, repo_id: str | None) -> str:
    """The ONNX files' section: how they were checked, their scores, latencies and sizes, and how to run one."""
    deployment = results.deployment
    if deployment is None:
        return ""
    notes = (
        int8_sentence(deployment)
        + openvino_sentence(deployment)
        + target_sentence(deployment)
        + busy_sentences(deployment)
    )
    return f"""
## Deployment

`{deployment.onnx}` is this model exported by `torch.onnx`, with dynamic batch and sequence axes; its logits
match PyTorch's within {deployment.max_abs_diff:.1e} on {deployment.checked_on}.{notes}
Latency is the median of {deployment.settings.repeats} calls on {deployment.settings.threads} CPU threads (ONNX Runtime
{runtime_versions(deployment)}), rows padded to {padded_to(deployment)}, on the machine that exported it.

{latency_table(deployment, results.predecessor.score, "dev score (x100)")}
{_how_to_run(deployment, results, repo_id)}"""


def _how_to_run(deployment: Deployment, results: TaskModelResults, repo_id: str | None) -> str:
    """The few lines that run the model to ship: OpenVINO's when an OpenVINO target won, ONNX Runtime's for the ONNX
    target (its int8 file where that won, or where an older record names no target), else PyTorch's (above)."""
    target = deployment.target or ""
    if target.startswith("pytorch"):
        cast = ", cast to bf16 (`model.to(torch.bfloat16)`, on a CPU with bf16 instructions)"
        return f"The PyTorch successor is the model to ship here: load it as above{cast if 'bf16' in target else ''}.\n"
    tokenizer = f"tokenizer = AutoTokenizer.from_pretrained({quoted(repo_id, '<this folder>')})"
    inputs = f'inputs = tokenizer({_tokenizer_input(results)}, return_tensors="np")'
    if target.startswith("openvino") and deployment.openvino:
        graph = deployment.openvino_int8 if target == "openvino_int8" else deployment.openvino
        weights = graph.removesuffix(".xml") + ".bin"
        fetch = f'hf_hub_download("{repo_id}", "{weights}")  # the weights, beside the graph\n' if repo_id else ""
        precision = "bf16" if target == "openvino_bf16" else "f32"
        return f"""
```python
import openvino
{_hub_import(repo_id, "hf_hub_download")}from transformers import AutoTokenizer

{tokenizer}
{inputs}
{fetch}model = openvino.Core().compile_model(
    {_local_path(repo_id, graph)}, "CPU", {{"INFERENCE_PRECISION_HINT": "{precision}"}}
)
logits = model({{port.get_any_name(): inputs[port.get_any_name()] for port in model.inputs}})[0]
```
"""
    return f"""
```python
import onnxruntime
{_hub_import(repo_id, "hf_hub_download")}from transformers import AutoTokenizer

{tokenizer}
session = onnxruntime.InferenceSession({_local_path(repo_id, _onnx_file(deployment, target))})
{inputs}
logits = session.run(["logits"], {{node.name: inputs[node.name] for node in session.get_inputs()}})[0]
```
"""


def _onnx_file(deployment: Deployment, target: str) -> str:
    """The ONNX file the card's code runs: the int8 model where it is the one to ship, the fp32 one where that is
    (int8 lost too much, or was slower)."""
    int8 = deployment.onnx_int8 if target in ("onnx_int8", "") else None
    return int8 or deployment.onnx


def _hub_import(repo_id: str | None, name: str) -> str:
    return f"from huggingface_hub import {name}\n" if repo_id else ""


def _local_path(repo_id: str | None, file: str | None = None) -> str:
    """The folder (or one of its files) as a local path: theseus_pl's loader and ONNX Runtime read local files, so
    a published model is downloaded first."""
    if repo_id:
        return f'hf_hub_download("{repo_id}", "{file}")' if file else f'snapshot_download("{repo_id}")'
    return f'"<this folder>/{file}"' if file else '"<this folder>"'


def _origin(results: TaskModelResults) -> str:
    base = f"`{results.base_model}`" if results.base_model else "a local checkpoint"
    if results.predecessor.origin == "given":
        return f"The predecessor is {base}, fine-tuned on the task before compression."
    return f"The predecessor is {base} fine-tuned on the task by theseus_pl."


def _schedule(results: TaskModelResults) -> str:
    if not results.schedule:
        return ""
    switch = f"; every module replaced from step {results.switch_step}" if results.switch_step else ""
    if switch and results.successor_finetuning_steps == 0:  # allow_unfinished_schedule: p never reached 1
        switch += ", which the run ended before"
    return f" (replacement schedule `{results.schedule}`{switch})"


def _task(results: TaskModelResults) -> str:
    data = results.data
    if not data.labels:
        return f"Task: {results.task} ({data.source}), a regression: one output, the predicted score."
    labels = ", ".join(f"{index} = `{label}`" for index, label in enumerate(data.labels))
    return f"Task: {results.task} ({data.source}), labels {labels} (also in `config.json`'s `id2label`)."


def _example_input(results: TaskModelResults) -> str:
    if len(results.data.text_columns) == 2:
        return '{"text": "A first sentence.", "text_pair": "A second sentence."}'
    return '"A sentence to classify."'


def _tokenizer_input(results: TaskModelResults) -> str:
    if len(results.data.text_columns) == 2:
        return '"A first sentence.", "A second sentence."'
    return '"A sentence to classify."'


def _retained_and_speed(results: TaskModelResults) -> str:
    kept = (
        f"The successor keeps {100 * results.retained:.1f}% of the predecessor's score"
        if results.retained is not None
        else f"The share of the predecessor's score kept is not given ({results.retained_note})"
    )
    if results.speedup is not None:
        speed = f"it runs {results.speedup:.2f}x faster at inference on the machine that trained it"
    elif results.speedup_busy_cores is not None:  # timed, twice, and left out: it was measured
        speed = timed_on_a_busy_machine("its speed-up", results.speedup_busy_cores)
    else:
        speed = "its speed-up was not measured"
    return f"{kept}; {speed}."
