"""Every model family the docs name, under every method of its kind, with every precision ``trainer.precision=auto``
can choose on a CPU (fp32, bf16 autocast) and activation checkpointing on and off: a tiny model through the whole run
(checks, training, scores, export, the record) for a few steps, and its exported successor loaded back as users load
it and run (a prediction, or a few generated tokens). Where the run must refuse (a method that trains nothing cannot
checkpoint activations; a family the decoder path cannot compress), the refusal, in one line, is the row.

The rows are a covering design, not the whole product: each family runs each method once, and the (precision,
checkpointing) pair turns from row to row so that every family and every method meets all four pairs. What breaks
with one factor, or with two together, has its row; the whole product (310 rows, three-way combinations too) took
about four times as long.

One row alone: ``pytest tests/app/test_family_matrix.py -k "gpt2-lm_theseus"``.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import torch
from app_runs import compose_config
from conftest import FAMILY_CONFIGS, make_tiny_rte_glue_dir, make_tiny_tokenizer
from decoder_models import DECODER_CONFIGS, DECODER_VOCAB, tiny_documents, tiny_lm_tokenizer
from transformers import (
    AutoModelForCausalLM,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    GPTNeoXConfig,
    PretrainedConfig,
    Qwen2Config,
    XLMRobertaConfig,
)

from theseus_pl.app.checks.refused import RunRefused
from theseus_pl.app.run.pipeline import run
from theseus_pl.core.families import FAMILIES
from theseus_pl.core.layer_removal import keep_layers

pytestmark = pytest.mark.slow

ENCODERS: dict[str, PretrainedConfig] = {
    **FAMILY_CONFIGS,
    "xlm-roberta": XLMRobertaConfig(**FAMILY_CONFIGS["roberta"].to_diff_dict() | {"model_type": "xlm-roberta"}),
}
# Their tokenizers give no token_type_ids, as these families' own do (their models take none).
NO_TOKEN_TYPES = {"distilbert", "mpnet"}
ENCODER_METHODS = ["theseus", "theseus_kd", "fine_tuning", "kd", "pkd", "layerdrop", "transfer"]
# A decoder's methods; "_distilled": healed on the predecessor's next-token distributions (a frozen teacher).
DECODER_METHODS = ["lm_theseus", "lm_theseus_distilled", "shortgpt", "shortgpt_healed", "shortgpt_healed_distilled",
                   "lm_truncation", "streamline"]  # fmt: skip
PRECISIONS = {"fp32": "32-true", "bf16": "bf16-mixed"}
TRAINS_NOTHING = {"shortgpt"}
NO_ACTIVATION_CHECKPOINTING = {"mpnet"}  # transformers' MPNet has none
# Decoders the decoder path cannot compress with Theseus, each with the start of its one-line refusal.
REFUSED_DECODERS: dict[str, tuple[PretrainedConfig, str]] = {
    "gpt_neox": (
        GPTNeoXConfig(vocab_size=DECODER_VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=4,
                      num_attention_heads=4, max_position_embeddings=64, bos_token_id=1, eos_token_id=2),
        "theseus.layers_path: Cannot find the layers of model type 'gpt_neox' (GPTNeoXForCausalLM).",
    ),
    "qwen2_sliding_window": (  # the upper layers attend within a window: a layer's mask depends on its position
        Qwen2Config(**{**DECODER_CONFIGS["qwen2"].to_diff_dict(), "layer_types": None, "use_sliding_window": True,
                       "sliding_window": 4, "max_window_layers": 2}),
        "method=lm_theseus: qwen2 layers of several attention types (full_attention, sliding_attention",
    ),
}  # fmt: skip


@dataclass(frozen=True)
class Row:
    family: str
    method: str
    precision: str  # a key of PRECISIONS
    checkpointing: bool

    @property
    def decoder(self) -> bool:
        return self.family in DECODER_CONFIGS or self.family in REFUSED_DECODERS

    @property
    def refusal(self) -> str | None:
        """The start of the one-line refusal this row must get (None: it runs)."""
        if self.family in REFUSED_DECODERS:
            return REFUSED_DECODERS[self.family][1]
        if self.checkpointing and self.method in TRAINS_NOTHING:
            return "activation_checkpointing=true saves memory while training; method=shortgpt trains nothing."
        if self.checkpointing and self.family in NO_ACTIVATION_CHECKPOINTING:
            return "activation_checkpointing=true: transformers' MPNetForSequenceClassification has no activation"
        return None

    def __str__(self) -> str:
        return f"{self.family}-{self.method}-{self.precision}-{'checkpointed' if self.checkpointing else 'stored'}"


SETTINGS = [(precision, checkpointing) for precision in PRECISIONS for checkpointing in (False, True)]


def covering_rows(families: list[str], methods: list[str]) -> list[Row]:
    """Each family under each method once, its (precision, checkpointing) pair turned with the row so that every
    family and every method meets all four pairs; a method with fewer than four families gets a row more per pair it
    missed, and a row that must refuse keeps a running twin, so that every family runs every method."""
    rows = [Row(family, method, *SETTINGS[(i + j) % len(SETTINGS)])
            for i, family in enumerate(families) for j, method in enumerate(methods)]  # fmt: skip
    for j, method in enumerate(methods):
        met = {(row.precision, row.checkpointing) for row in rows if row.method == method}
        rows += [Row(families[j % len(families)], method, *setting) for setting in SETTINGS if setting not in met]
    twins = [replace(row, checkpointing=False) for row in rows if row.refusal is not None]
    return rows + [twin for twin in twins if twin not in rows]


ROWS = [
    *covering_rows(list(ENCODERS), ENCODER_METHODS),
    *covering_rows(list(DECODER_CONFIGS), DECODER_METHODS),
    *(Row(family, "lm_theseus", "fp32", False) for family in REFUSED_DECODERS),
]


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The rows' common folder: models, data and one cache (a predecessor is fine-tuned once per family and
    precision, as in a sweep)."""
    root = tmp_path_factory.mktemp("matrix")
    make_tiny_rte_glue_dir(root / "glue")
    (root / "texts").mkdir()
    for i, text in enumerate(tiny_documents(count=20, words=40)):
        (root / "texts" / f"{i:02d}.txt").write_text(text)
    return root


def model_folder(shared: Path, family: str) -> Path:
    """The family's tiny 4-layer model and a tokenizer its model takes, saved once."""
    folder = shared / "models" / family
    if folder.is_dir():
        return folder
    torch.manual_seed(0)
    if family in ENCODERS:
        AutoModelForSequenceClassification.from_config(copy.deepcopy(ENCODERS[family])).save_pretrained(folder)
        (shared / "tokenizer").mkdir(exist_ok=True)
        tokenizer = make_tiny_tokenizer(shared / "tokenizer")
        if family in NO_TOKEN_TYPES:
            tokenizer.model_input_names = ["input_ids", "attention_mask"]
    else:
        config = DECODER_CONFIGS.get(family) or REFUSED_DECODERS[family][0]
        AutoModelForCausalLM.from_config(copy.deepcopy(config)).save_pretrained(folder)
        tokenizer = tiny_lm_tokenizer()
    tokenizer.save_pretrained(folder)
    return folder


def transfer_successor(shared: Path, family: str) -> Path:
    """A 2-layer classifier of the family, as another task's run exports its successor (``method=transfer``)."""
    folder = shared / "transfer" / family
    if not folder.is_dir():
        source = model_folder(shared, family)
        keep_layers(AutoModelForSequenceClassification.from_pretrained(source), [0, 1]).save_pretrained(folder)
        AutoTokenizer.from_pretrained(source).save_pretrained(folder)
    return folder


def overrides(row: Row, shared: Path, output: Path) -> list[str]:
    model = model_folder(shared, row.family)
    common = [
        "theseus.successor_layers=2", "schedule_steps=1", "trainer.max_steps=2", "trainer.val_check_interval=2",
        "logger=csv", "benchmark.repeats=0", "optimizer.lr=1e-3", f"trainer.precision={PRECISIONS[row.precision]}",
        f"activation_checkpointing={str(row.checkpointing).lower()}", f"paths.cache_dir={shared / 'cache'}",
        f"paths.output_dir={output}",
    ]  # fmt: skip
    if row.decoder:
        method = row.method.removesuffix("_distilled")
        return [
            "+experiment=smollm2_quick", "model.gguf=null", f"model.base={model}", f"data.files=[{shared / 'texts'}]",
            "data.window=8", "data.batch_size=4", "data.max_eval_windows=8", "data.other_text.corpus=null",
            f"method={method}", *(["method.alpha=1.0"] if row.method.endswith("_distilled") else []), *common,
        ]  # fmt: skip
    return [
        f"model.base={model}", f"data.glue_dir={shared / 'glue'}", "data.task=RTE", "data.batch_size=4",
        "finetune.epochs=1", "trainer=cpu", f"method={row.method}",
        *([f"method.successor={transfer_successor(shared, row.family)}"] if row.method == "transfer" else []),
        *common,
    ]  # fmt: skip


@pytest.mark.parametrize("row", ROWS, ids=str)
def test_each_family_method_precision_and_checkpointing(row: Row, shared: Path, tmp_path: Path, recwarn) -> None:
    cfg = compose_config(*overrides(row, shared, tmp_path / "run"))
    if row.refusal is not None:
        with pytest.raises(RunRefused) as refused:
            run(cfg)
        assert [problem for problem in refused.value.problems if problem.startswith(row.refusal)], refused.value
        assert not (tmp_path / "run").exists()
        return
    results = run(cfg)
    # a frozen teacher or predecessor left in eval mode had Lightning warn of hundreds of modules at every fit
    assert not [warning for warning in recwarn if "in eval mode at the start of training" in str(warning.message)]
    record = json.loads((tmp_path / "run" / "results.json").read_text())
    assert record["kind"] == ("language_model" if row.decoder else "task_model")
    assert record["hardware"]["precision"] == PRECISIONS[row.precision] and not results.failed_steps
    successor = tmp_path / "run" / "successor"
    tokenizer = AutoTokenizer.from_pretrained(successor)  # as users load what the run shipped
    if row.decoder:
        model = AutoModelForCausalLM.from_pretrained(successor).eval()
        assert model.config.num_hidden_layers == 2 and record["successor"]["perplexity"] > 1
        prompt = tokenizer("the state of the nation", return_tensors="pt")
        with torch.no_grad():
            generated = model.generate(**prompt, max_new_tokens=4, min_new_tokens=4, do_sample=False)
        assert generated.shape[1] == prompt["input_ids"].shape[1] + 4
    else:
        model = AutoModelForSequenceClassification.from_pretrained(successor).eval()
        assert model.config.num_hidden_layers == 2 and 0 <= record["successor"]["score"] <= 100
        pair = tokenizer("the cat sat", "a dog is good", return_tensors="pt")
        with torch.no_grad():
            logits = model(**pair).logits
        assert logits.shape == (1, 2) and torch.isfinite(logits).all()


def test_every_family_the_code_knows_or_the_docs_name_has_rows():
    """A family added to the registry, or named in the README or the docs, fails here until it has its rows."""
    named = {  # the names the docs use, by model type
        "bert": r"\bBERT\b", "roberta": r"\bRoBERTa\b", "xlm-roberta": r"\bXLM-R", "electra": r"\bELECTRA\b",
        "mpnet": r"\bMPNet\b", "distilbert": r"\bDistilBERT\b", "deberta-v2": r"\bDeBERTa", "llama": r"\bLlama\b",
        "qwen2": r"\bQwen2?\b", "mistral": r"\bMistral\b", "gpt2": r"\bGPT-2\b",
    }  # fmt: skip
    root = Path(__file__).parents[2]
    docs = "\n".join(path.read_text() for path in [root / "README.md", *sorted((root / "docs").rglob("*.md"))])
    in_docs = {family for family, pattern in named.items() if re.search(pattern, docs)}
    with_rows = {row.family for row in ROWS if row.refusal is None}
    assert set(FAMILIES) <= set(named), "a registered family the docs have no name for here"
    assert set(FAMILIES) | in_docs <= with_rows
    for family in with_rows:
        methods = ENCODER_METHODS if family in ENCODERS else DECODER_METHODS
        rows = [row for row in ROWS if row.family == family]
        assert {row.method for row in rows if row.refusal is None} == set(methods), family
        assert {(row.precision, row.checkpointing) for row in rows} == set(SETTINGS), family
    for methods in (ENCODER_METHODS, DECODER_METHODS):
        for method in methods:
            assert {(row.precision, row.checkpointing) for row in ROWS if row.method == method} == set(SETTINGS)
    assert len(set(ROWS)) == len(ROWS)
