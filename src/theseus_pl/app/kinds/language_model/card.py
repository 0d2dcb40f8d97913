"""A decoder-LM successor's ``README.md``: what it was compressed from, on which text, by which method; how far it
moved from its predecessor on held-out text (perplexity, KL, top-1 agreement); its decode speed; a sample; how to
load it. The YAML header is ``huggingface_hub``'s ``ModelCardData`` (``pipeline_tag: text-generation``)."""

from __future__ import annotations

from huggingface_hub import ModelCard, ModelCardData

from theseus_pl.app.kinds.language_model.record import LanguageModelResults
from theseus_pl.app.ship.card_text import number, quoted, timed_on_a_busy_machine
from theseus_pl.core.timing import was_busy

TAGS = ["bert-of-theseus", "model-compression", "layer-pruning", "theseus_pl"]


def language_model_card(results: LanguageModelResults, repo_id: str | None = None) -> ModelCard:
    """The card of a decoder-LM run's successor; ``repo_id`` (``ORG/NAME``) once published, for its code to load
    from."""
    card_data = ModelCardData(
        model_name=f"{results.method}-{results.successor.layers}-layers".lower(),
        base_model=results.base_model,
        metrics=["perplexity"],
        pipeline_tag="text-generation",
        library_name="transformers",
        tags=TAGS,
    )
    return ModelCard(f"---\n{card_data.to_yaml()}\n---\n\n{_body(results, repo_id)}")


def _body(results: LanguageModelResults, repo_id: str | None) -> str:
    predecessor, successor, data = results.predecessor, results.successor, results.data
    base = f"`{results.base_model}`" if results.base_model else "a local causal language model"
    converted = ", converted from its GGUF file" if predecessor.origin == "gguf" else ""
    trained = (
        f"{results.steps} training steps on {data.train_tokens:,} tokens of {data.source}"
        if results.steps
        else f"no training (its layer choice measured on {data.source})"
    )
    schedule = f" (replacement schedule `{results.schedule}`)" if results.schedule else ""
    limit = results.settings.get("evaluation.lm_eval.limit")
    harness = "".join(
        _harness_row(task, metric, predecessor.lm_eval[task].get(metric), value, limit)
        for task, metrics in (successor.lm_eval or {}).items()
        for metric, value in metrics.items()
        if predecessor.lm_eval and task in predecessor.lm_eval and not metric.endswith("_stderr")
    )
    other = successor.other_text and predecessor.other_text
    other_rows = (
        f"| perplexity on {data.other_source} (never trained on) | {number(predecessor.other_text['perplexity'], 2)} | "
        f"{number(successor.other_text['perplexity'], 2)} |\n"
        f"| KL(predecessor ‖ successor) there | | {number(successor.other_text['kl'], 3)} |\n"
        if other
        else ""
    )
    shared = "Embeddings, final norm and head are the predecessor's."
    if results.settings.get("theseus.finetune_shared"):
        shared = (
            "Embeddings, final norm and head were trained with the layers once every module was replaced "
            "(`theseus.finetune_shared`)."
            if results.successor_finetuning_steps != 0  # None: a file written before it was recorded
            else f"{shared[:-1]}: `theseus.finetune_shared` trains them once every module is replaced, which this "
            "run ended before (`allow_unfinished_schedule`)."
        )
    return f"""# {results.method}: a {successor.layers}-layer decoder LM compressed with theseus_pl

The predecessor is {base}{converted}, {predecessor.layers} layers. It was compressed to {successor.layers} layers
with theseus_pl's `{results.method}` method{schedule}, {trained}. `theseus` methods are progressive module replacing
(BERT-of-Theseus, Xu et al., EMNLP 2020); `shortgpt`, `lm_truncation` and `streamline` are layer-removal baselines.
{shared}

## Results on held-out text

Scored on {data.eval_windows} held-out windows of {data.window} tokens ({data.eval_tokens:,} tokens predicted) of the
same source, documents the run never trained on.

| | predecessor | successor |
|---|---|---|
| perplexity | {number(predecessor.perplexity, 2)} | {number(successor.perplexity, 2)} |
| KL(predecessor ‖ successor), nats per token | | {number(successor.kl, 3)} |
| top-1 agreement with the predecessor (%) | | {number(_percent(successor.agreement), 1)} |
{other_rows}{harness}| layers | {predecessor.layers} | {successor.layers} |
| parameters | {predecessor.params:,} | {successor.params:,} |

{_speed(results)}{_gguf(results)}{_sample(results)}
## How to use

```python
from transformers import AutoModelForCausalLM, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained({quoted(repo_id, "<this folder or its hub id>")})
model = AutoModelForCausalLM.from_pretrained({quoted(repo_id, "<this folder or its hub id>")})
inputs = tokenizer("The president said in his speech that", return_tensors="pt")
print(tokenizer.decode(model.generate(**inputs, max_new_tokens=20)[0], skip_special_tokens=True))
```
"""


def _harness_row(task: str, metric: str, before: float | None, after: float, limit: int | None = None) -> str:
    """An lm-eval score of both models; accuracies in percent; ``limit``: scored on the task's first examples only."""
    name = f"lm-eval `{task}`" + (f" (its first {limit} examples)" if limit else "")
    if metric.startswith("acc"):
        return f"| {name} {metric} (%) | {number(_percent(before), 2)} | {number(_percent(after), 2)} |\n"
    return f"| {name} {metric} | {number(before, 4)} | {number(after, 4)} |\n"


def _percent(share: float | None) -> float | None:
    return None if share is None else 100 * share


def _speed(results: LanguageModelResults) -> str:
    speed = results.trusted_speed
    if results.speed and not speed:
        return f"{timed_on_a_busy_machine('Its speed', results.speed['other_cores'])}.\n"
    if not speed:
        return "Its speed was not measured.\n"
    return (
        f"Decoding (batch 1, KV cache, PyTorch fp32 on the machine that trained it) runs at "
        f"{number(speed.get('successor_decode_tokens_per_second'), 1)} tokens per second against the predecessor's "
        f"{number(speed.get('predecessor_decode_tokens_per_second'), 1)} "
        f"({number(speed.get('decode_speedup'), 2)}x); prefill of a batch of held-out windows is "
        f"{number(speed.get('prefill_speedup'), 2)}x faster.\n"
    )


GGUF_HEADER = (
    "| file | type | MiB | agreement with PyTorch (%) | perplexity (PyTorch) | perplexity in llama.cpp (predecessor) "
    "| llama.cpp decode, tokens/s |"
)


def _gguf(results: LanguageModelResults) -> str:
    """The GGUF files for llama.cpp: their check against PyTorch, their perplexity in llama.cpp beside the
    predecessor's file at the same type, and their llama.cpp speed (left out where the machine was busy)."""
    if not results.gguf:
        return ""
    rows = []
    for row in results.gguf:
        in_llama_cpp = row.get("llama_cpp") or {}
        if was_busy(in_llama_cpp.get("other_cores")):
            timed = "timed on a busy machine: left out"
        elif in_llama_cpp:
            timed = (
                f"{number(in_llama_cpp['successor_decode_tokens_per_second'], 1)} against "
                f"{number(in_llama_cpp['predecessor_decode_tokens_per_second'], 1)} "
                f"({number(in_llama_cpp['decode_speedup'], 2)}x; prefill {number(in_llama_cpp['prefill_speedup'], 2)}x)"
            )
        else:
            timed = "not timed"
        scored = (
            f"{number(in_llama_cpp['successor_perplexity'], 2)} ({number(in_llama_cpp['predecessor_perplexity'], 2)})"
            if "successor_perplexity" in in_llama_cpp
            else ("not recorded" if in_llama_cpp else "not run")  # timed by a version that did not score
        )
        rows.append(
            f"| `{row['file']}` | {row['type']} | {number(row['mib'], 1)} | "
            f"{number(_percent(row['agreement']), 1)} | {number(row['perplexity'], 2)} "
            f"({number(row.get('reference_perplexity'), 2)}) | {scored} | {timed} |\n"
        )
    return f"""
## GGUF files for llama.cpp

Read back by transformers and compared with this model on held-out windows (top-1 agreement, perplexity, this
PyTorch model's in brackets); run in llama.cpp on the same windows (perplexity from its own kernels, the predecessor
written at the same type in brackets) and its decoding timed at batch 1 against that predecessor file.

{GGUF_HEADER}
|---|---|---|---|---|---|---|
{"".join(rows)}"""


def _sample(results: LanguageModelResults) -> str:
    sample = results.sample
    if sample is None:
        return ""
    return f"""
## A sample

Both models continue `{sample.prompt}` greedily:

- predecessor: {sample.predecessor!r}
- successor: {sample.successor!r}
"""
