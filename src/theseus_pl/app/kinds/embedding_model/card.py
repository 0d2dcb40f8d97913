"""A sentence-embedding successor's ``README.md``: its teacher (the predecessor) and the layers it kept, how close its
STS-B dev score and its vectors stay to the teacher's, its speed-up where it was timed on a quiet machine, how to load
it. The YAML header is ``huggingface_hub``'s ``ModelCardData`` (``pipeline_tag: sentence-similarity``,
``library_name: sentence-transformers``), so the hub offers its sentence-similarity widget and its loading snippet."""

from __future__ import annotations

from pathlib import Path

from huggingface_hub import ModelCard, ModelCardData

from theseus_pl.app.kinds.embedding_model.record import EmbeddingModelResults
from theseus_pl.app.results.number_text import shown
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

TAGS = [
    "sentence-transformers", "sentence-similarity", "feature-extraction", "bert-of-theseus", "model-compression",
    "layer-pruning", "theseus_pl",
]  # fmt: skip


def embedding_model_card(results: EmbeddingModelResults, repo_id: str | None = None) -> ModelCard:
    """The card of a sentence-embedding run's successor; ``repo_id`` (``ORG/NAME``) once published, for its code to
    load from."""
    card_data = ModelCardData(
        model_name=f"{results.method}-{results.successor.layers}-layers".lower(),
        base_model=results.base_model,
        metrics=["spearmanr"],  # the hub's id of STS-B's Spearman correlation
        pipeline_tag="sentence-similarity",
        library_name="sentence-transformers",
        tags=TAGS,
    )
    return ModelCard(f"---\n{card_data.to_yaml()}\n---\n\n{_body(results, repo_id)}")


def _body(results: EmbeddingModelResults, repo_id: str | None) -> str:
    predecessor, successor, data = results.predecessor, results.successor, results.data
    base = f"`{results.base_model}`" if results.base_model else "a local sentence-transformers model"
    kept = (
        f"the teacher's layers {', '.join(map(str, results.kept_layers))} (counting from 0)"
        if results.kept_layers
        else f"{successor.layers} of the teacher's layers"
    )
    schedule = f" (replacement schedule `{results.schedule}`)" if results.schedule else ""
    if results.steps:
        best = "the closest to the teacher's vectors on held-out sentences"
        over = f"{data.train_sentences:,} training sentences"
        if data.train_pairs is not None:
            best = "the best Spearman on held-out training pairs"
            over = f"{data.train_pairs:,} training pairs ({data.train_sentences:,} distinct sentences)"
        chosen = f" The checkpoint scored is step {results.best_step}'s, {best}." if results.best_step else ""
        trained = (
            f"It was then trained for {results.steps} steps ({data.train_sentences_seen:,} sentences seen) on "
            f"{data.loss}, over {over} ({data.source}).{chosen}"
        )
    else:
        trained = "It was not trained: its layers are the teacher's as they were."
    share = results.retained
    kept_share = f"The successor keeps {share:.1f}% of the teacher's STS-B score.\n\n" if share is not None else ""
    return f"""# {results.method}: a {successor.layers}-layer sentence-embedding model compressed with theseus_pl

The teacher (predecessor) is {base}: {predecessor.layers} layers, {predecessor.dimensions}-dimensional sentence
vectors. It was compressed to {successor.layers} layers with theseus_pl's `{results.method}` method{schedule}. The
successor started as {kept}, and keeps the teacher's tokenizer, pooling and normalisation: its vectors have the same
size. {trained}

`embedding_theseus` is progressive module replacing (BERT-of-Theseus, Xu et al., EMNLP 2020); `embedding_mse` (on
unlabelled sentences) and `embedding_fine_tuning` (on labelled pairs) train the kept layers alone on the same loss;
`embedding_truncation` keeps them untrained.

## Results

STS-B dev ({data.sts_pairs:,} pairs): the Spearman correlation (x100) of the cosine similarities of each pair's
vectors with the gold scores, as sentence-transformers' `EmbeddingSimilarityEvaluator` computes it. Fidelity: the
successor's vectors against the teacher's, on {data.held_out_sentences:,} held-out sentences it never trained on.

| | teacher (predecessor) | successor |
|---|---|---|
| STS-B dev Spearman (x100) | {number(predecessor.sts, 2)} | {number(successor.sts, 2)} |
| mean squared error to the teacher's vectors | | {_small(successor.mse)} |
| mean cosine to the teacher's vectors | | {number(successor.cosine, 4)} |
| layers | {predecessor.layers} | {successor.layers} |
| parameters | {predecessor.params:,} | {successor.params:,} |

{kept_share}{_speed(results)}{found_by_search(results.search, results.hardware)}
## How to use

```python
from sentence_transformers import SentenceTransformer

model = SentenceTransformer({quoted(repo_id, "<this folder or its hub id>")})
embeddings = model.encode(["A man is playing a guitar.", "Someone plays an instrument."])
print(model.similarity(embeddings, embeddings))
```
{_deployment(results, repo_id)}"""


def _small(value: float | None) -> str:
    """A mean squared error per dimension: small (1e-4 for vectors of cosine 0.98), so in scientific notation."""
    return shown(value, ".2e")


def _speed(results: EmbeddingModelResults) -> str:
    """The speed-up at each batch size timed, with the CPU it was timed on; no figure from a busy machine."""
    speed = results.trusted_speed
    if results.speed and not speed:
        return f"{timed_on_a_busy_machine('Its speed', results.speed['other_cores'])}.\n"
    if not speed:
        return "Its speed was not measured.\n"
    sizes = sorted(int(key.removeprefix("batch").removesuffix("_speedup")) for key in speed if key.endswith("_speedup"))
    if not sizes:
        return "Its speed was not measured.\n"
    rates = "; ".join(
        f"{'one sentence at a time' if size == 1 else f'in batches of {size}'}: "
        f"{number(speed.get(f'batch{size}_speedup'), 2)}x ({number(speed.get(f'successor_batch{size}'), 0)} "
        f"sentences per second against {number(speed.get(f'predecessor_batch{size}'), 0)})"
        for size in sizes
    )
    hardware = results.hardware
    cpu = f"on {hardware.cpu}" if hardware and hardware.cpu else "on the machine that ran it (its CPU not recorded)"
    return f"Speed-up over the teacher, encoding STS-B dev sentences with `model.encode` in PyTorch {cpu}: {rates}.\n"


def _deployment(results: EmbeddingModelResults, repo_id: str | None) -> str:
    """The exported files' section (after ``python -m theseus_pl.deploy RUN_DIR``): how they were checked, their STS-B
    scores, latencies and sizes, and how to load the one to ship."""
    deployment = results.deployment
    if deployment is None:
        return ""
    settings = deployment.settings
    notes = (
        int8_sentence(deployment)
        + openvino_sentence(deployment)
        + target_sentence(deployment)
        + busy_sentences(deployment)
    )
    return f"""
## Deployment

`{deployment.onnx}` is this model's encoder exported by `torch.onnx` (output `last_hidden_state`, dynamic batch and
sequence axes), where sentence-transformers' ONNX backend looks for it; pooling and normalisation stay this folder's
modules. Its sentence vectors match PyTorch's within {deployment.max_abs_diff:.1e} on {deployment.checked_on}.{notes}
Latency is the median of {settings.repeats} calls on {settings.threads} CPU threads (ONNX Runtime
{runtime_versions(deployment)}), sentences padded to {padded_to(deployment)}, on the machine that exported it.

{latency_table(deployment, results.predecessor.sts, "STS-B dev Spearman (x100)")}
{_how_to_run(deployment, repo_id)}"""


def _how_to_run(deployment: Deployment, repo_id: str | None) -> str:
    """The file to ship through sentence-transformers' backend for its runtime, and through the runtime directly,
    which needs no Optimum (whose ONNX and OpenVINO packages pin transformers below 5 and 5.6)."""
    target = deployment.target or ""
    if target == "pytorch_successor":
        return "The PyTorch successor is the model to ship here: load it as above.\n"  # named, or the fastest
    model = quoted(repo_id, "<this folder>")
    if target.startswith("openvino") and deployment.openvino:
        int8 = target == "openvino_int8" and deployment.openvino_int8
        file = deployment.openvino_int8 if int8 else deployment.openvino
        precision = "bf16" if target == "openvino_bf16" else "f32"
        weights = file.removesuffix(".xml") + ".bin"
        fetch = f'hf_hub_download("{repo_id}", "{weights}")  # the weights, beside the graph\n' if repo_id else ""
        run = f"""{fetch}compiled = openvino.Core().compile_model(
    {_file(repo_id, file)}, "CPU", {{"INFERENCE_PRECISION_HINT": "{precision}"}}
)
features = model.preprocess(["A man is playing a guitar.", "Someone plays an instrument."])
inputs = {{port.get_any_name(): features[port.get_any_name()].numpy() for port in compiled.inputs}}
features["token_embeddings"] = torch.from_numpy(compiled(inputs)[0])"""
        return _snippets(model, "openvino", file, "OpenVINO", "Optimum Intel, which needs transformers < 5.6", run,
                         repo_id)  # fmt: skip
    file = deployment.onnx_int8 if target == "onnx_int8" and deployment.onnx_int8 else deployment.onnx
    run = f"""session = onnxruntime.InferenceSession({_file(repo_id, file)})
features = model.preprocess(["A man is playing a guitar.", "Someone plays an instrument."])
inputs = {{node.name: features[node.name].numpy() for node in session.get_inputs()}}
features["token_embeddings"] = torch.from_numpy(session.run(["last_hidden_state"], inputs)[0])"""
    return _snippets(model, "onnx", file, "ONNX Runtime", "Optimum, which needs transformers 4", run, repo_id)


def _snippets(model: str, backend: str, file: str, runtime: str, needs: str, run: str, repo_id: str | None) -> str:
    """Two ways to run ``file``: sentence-transformers' ``backend`` (``file_name`` named where it is not the
    backend's default), and ``runtime`` alone (``run``: its lines from the tokens to the token vectors), the folder's
    own modules tokenising and pooling."""
    default = {"onnx": "model.onnx", "openvino": "openvino_model.xml"}[backend]
    kwargs = f', model_kwargs={{"file_name": "{Path(file).name}"}}' if Path(file).name != default else ""
    download = "from huggingface_hub import hf_hub_download\n" if repo_id else ""
    return f"""
With sentence-transformers' {runtime} backend (`pip install "sentence-transformers[{backend}]"`: {needs}):

```python
model = SentenceTransformer({model}, backend="{backend}"{kwargs})
```

With {runtime} alone, the folder's own modules doing the tokenising and pooling:

```python
import {"onnxruntime" if backend == "onnx" else "openvino"}
import torch
{download}from sentence_transformers import SentenceTransformer

model = SentenceTransformer({model})  # its tokenizer, pooling and normalisation
{run}
for module in list(model)[1:]:
    features = module(features)
embeddings = features["sentence_embedding"]
```
"""


def _file(repo_id: str | None, file: str) -> str:
    return f'hf_hub_download("{repo_id}", "{file}")' if repo_id else f'"<this folder>/{file}"'
