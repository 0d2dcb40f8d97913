"""Every key of a run's composed config is read by that run (or by its checks, which refuse a value the run would
ignore): nothing a user sets is dropped silently, for every kind of run.

A run of each kind is made with its experiment's config while every read of the config is recorded: a value looked
up (``cfg.data.window``, ``cfg.get(...)``, ``OmegaConf.select``, as the checks' rules do), a group turned into a
container or a settings object (``OmegaConf.to_container(cfg.deploy)``), an object Hydra instantiates (its
``_target_`` and arguments), and a key other keys interpolate (``${schedule_steps}``). A key left unread by a run of
its kind is a setting that run ignores; the only ones allowed are the alternatives a run reads instead (named below,
with why). A key the checks read counts as read: they refuse a value the run would ignore (``deploy.quantize`` on a
decoder-LM run), and validate the rest, which is as far as recording reads can tell.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from app_runs import compose_config, tiny_run_overrides
from decoder_models import tiny_decoder, tiny_documents, tiny_lm_tokenizer
from embedding_models import make_sentence_glue_dir, save_tiny_embedding_model
from omegaconf import DictConfig, OmegaConf
from test_app import CONF, EXPERIMENTS

from theseus_pl.app.config.kinds import EMBEDDING_MODEL, LANGUAGE_MODEL
from theseus_pl.app.config.resolvers import run_kind_name
from theseus_pl.app.config.schema import config_problems
from theseus_pl.app.kinds.language_model.config import LanguageModelConfig
from theseus_pl.app.kinds.task_model.config import TaskModelConfig
from theseus_pl.app.results.registry import registered_kinds
from theseus_pl.app.run.pipeline import run

# Alternatives: a run reads one of them, so the others stay unread by the tiny runs here.
NOT_READ_WHEN = {
    "data.hub_dataset": "data.files is given (the text comes from your files, not a hub dataset)",
    "data.hub_config": "data.files is given",
    "data.hub_split": "data.files is given",
    "data.hub_column": "data.files is given",
    "data.files": "data.task is a GLUE task (a task run reads data.glue_dir instead)",
    "data.text_columns": "data.task is a GLUE task (its own columns)",
    "data.labels": "data.task is a GLUE task (its own labels)",
}


def leaves(node: DictConfig, prefix: str = "") -> Iterator[str]:
    """Every leaf key of ``node`` (an empty group counts as a leaf), dotted."""
    for key, value in node.items_ex(resolve=False):
        if isinstance(value, DictConfig) and len(value):
            yield from leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


@contextmanager
def recorded_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[set[str]]:
    """The dotted keys read from any config while the block runs."""
    read: set[str] = set()
    get_impl, pop, to_container, select = DictConfig._get_impl, DictConfig.pop, OmegaConf.to_container, OmegaConf.select

    def record(node: DictConfig, key: object) -> None:
        with contextlib.suppress(Exception):  # a key OmegaConf cannot name (not a config key)
            read.add(node._get_full_key(key))  # OmegaConf's own name of the key's full path

    def reading_get(self, key, default_value, validate_key=True):
        record(self, key)
        return get_impl(self, key, default_value, validate_key)

    def reading_pop(self, key, *default):
        record(self, key)  # Hydra's instantiate pops _target_
        return pop(self, key, *default)

    def reading_to_container(cfg, *args, **kwargs):
        if isinstance(cfg, DictConfig) and cfg._get_parent() is not None:  # a group; the whole config is only logged
            prefix = cfg._get_full_key("")
            read.update(f"{prefix}.{leaf}" for leaf in leaves(cfg))
        return to_container(cfg, *args, **kwargs)

    def reading_select(cfg, key, *args, **kwargs):
        prefix = cfg._get_full_key("") if isinstance(cfg, DictConfig) and cfg._get_parent() is not None else ""
        read.add(f"{prefix}.{key}" if prefix else key)  # the checks' rules look their keys up so
        return select(cfg, key, *args, **kwargs)

    monkeypatch.setattr(DictConfig, "_get_impl", reading_get)
    monkeypatch.setattr(OmegaConf, "select", staticmethod(reading_select))
    monkeypatch.setattr(DictConfig, "pop", reading_pop)
    monkeypatch.setattr(OmegaConf, "to_container", staticmethod(reading_to_container))
    yield read


def unread_keys(cfg: DictConfig, read: set[str]) -> list[str]:
    """The leaf keys of ``cfg`` no read reached: not the key, nor a group above it, nor an interpolation of it."""
    raw = OmegaConf.to_container(cfg, resolve=False)
    interpolated = set(re.findall(r"\$\{([\w.]+)\}", str(raw)))
    return [
        key for key in leaves(cfg)
        if not any(key == r or key.startswith(f"{r}.") or r.startswith(f"{key}.") for r in read | interpolated)
        and key not in NOT_READ_WHEN and not key.startswith("hydra.")
    ]  # fmt: skip


COMPOSED = {e: compose_config(f"+experiment={e}") for e in EXPERIMENTS}  # composed once: 0.1 s each
KIND_OF = {e: run_kind_name(cfg) for e, cfg in COMPOSED.items()}


def experiments_of(kind: str) -> list[str]:
    return [e for e in EXPERIMENTS if KIND_OF[e] == kind]


@pytest.fixture
def language_model_overrides(tmp_path) -> list[str]:
    folder, texts = tmp_path / "tiny_llama", tmp_path / "texts"
    tiny_decoder("llama").save_pretrained(folder)
    tiny_lm_tokenizer().save_pretrained(folder)
    texts.mkdir()
    for i, text in enumerate(tiny_documents(count=20, words=40)):
        (texts / f"{i:02d}.txt").write_text(text)
    return [
        "model.gguf=null", f"model.base={folder}", f"data.files=[{texts}]", "data.window=8", "data.batch_size=4",
        "data.max_eval_windows=8", "theseus.successor_layers=2", "schedule_steps=3", "trainer.max_steps=6",
        "trainer.val_check_interval=2", "logger=csv", "benchmark.repeats=1", "optimizer.lr=1e-3",
        f"paths.cache_dir={tmp_path / 'cache'}", f"paths.output_dir={tmp_path / 'run'}",
        "trainer.accelerator=cpu",  # the GPU experiments' settings, read on this machine's CPU
    ]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("experiment", experiments_of(LANGUAGE_MODEL))
def test_a_language_model_run_reads_every_setting_of_its_experiment(experiment, language_model_overrides, monkeypatch):
    cfg = compose_config(f"+experiment={experiment}", *language_model_overrides)
    with recorded_reads(monkeypatch) as read:
        run(cfg)
    assert unread_keys(cfg, read) == []


@pytest.mark.slow
@pytest.mark.parametrize("experiment", ["sst2_quick", "rte_curriculum", "stsb_constant", "mnli_curriculum"])
def test_a_task_model_run_reads_every_setting_of_its_experiment(experiment, tiny_base, glue_dir, tmp_path,
                                                                  monkeypatch):  # fmt: skip
    overrides = tiny_run_overrides(tiny_base, glue_dir, tmp_path)
    cfg = compose_config(f"+experiment={experiment}", *overrides, "model.predecessor=null")
    with recorded_reads(monkeypatch) as read:
        run(cfg)
    assert unread_keys(cfg, read) == []


@pytest.mark.slow
def test_a_search_trial_reads_every_setting_the_search_gives_it_and_the_search_every_one_of_its_own(
    tiny_base, glue_dir, tmp_path, monkeypatch
):
    """A trial is a run with the search group's settings (its deploy, its benchmark) and a drawn value of each
    searched key; the search's own settings (``hydra.sweeper.*``) are each a setting it reads, and any other key is
    refused (``tests/app/test_search.py``)."""
    from theseus_pl.app.search.settings import SearchSettings

    overrides = tiny_run_overrides(tiny_base, glue_dir, tmp_path)
    drawn = ["theseus.successor.intermediate_size=32", "optimizer.lr=1e-3", "deploy.repeats=2"]
    onnx_alone = "deploy.openvino=false"  # OpenVINO's export is not the search group's (8 s to 5 s)
    cfg = compose_config("+search=fastest_within", *overrides, "model.predecessor=null", *drawn, onnx_alone)
    with recorded_reads(monkeypatch) as read:
        run(cfg)
    assert unread_keys(cfg, read) == []
    sweeper = OmegaConf.load(CONF / "hydra" / "sweeper" / "search.yaml")
    assert {key for key in sweeper if not key.startswith("_")} == set(SearchSettings.RULES)
    assert SearchSettings.from_config(sweeper).trials == sweeper.trials


@pytest.mark.slow
@pytest.mark.parametrize("experiment", experiments_of(EMBEDDING_MODEL))
@pytest.mark.parametrize("method", ["embedding_theseus", "the kept layers trained"])
def test_a_sentence_embedding_run_reads_every_setting_of_its_experiment(experiment, method, tmp_path, monkeypatch):
    """Each method that trains (the kept layers: embedding_mse on sentences, embedding_fine_tuning on labelled
    pairs): the schedule's settings are read by the checks even where the method replaces nothing (a sweep varies
    methods under one schedule). (embedding_truncation trains nothing, so no Trainer builds the callbacks, as for a
    decoder LM's ShortGPT.)"""
    model = save_tiny_embedding_model(tmp_path / "model", normalize=True)
    on_pairs = bool(compose_config(f"+experiment={experiment}").data.get("pairs"))
    if method != "embedding_theseus":
        method = "embedding_fine_tuning" if on_pairs else "embedding_mse"
    cfg = compose_config(
        f"+experiment={experiment}", f"method={method}", f"model.base={model}",
        f"data.glue_dir={make_sentence_glue_dir(tmp_path / 'glue')}", *([] if on_pairs else ["data.max_sentences=40"]),
        "data.held_out=8", "data.batch_size=8", "theseus.successor_layers=2", "schedule_steps=3", "trainer.max_steps=6",
        "trainer.val_check_interval=2", "logger=csv", "benchmark.repeats=1", f"paths.cache_dir={tmp_path / 'cache'}",
        f"paths.output_dir={tmp_path / 'run'}",
    )  # fmt: skip
    with recorded_reads(monkeypatch) as read:
        run(cfg)
    assert unread_keys(cfg, read) == []


@pytest.mark.slow
def test_a_sentence_embedding_search_trial_reads_every_setting_its_search_gives_it(tmp_path, monkeypatch):
    """``+search=fastest_embedding``'s trial: an embedding run deployed and timed on its own lengths, at a drawn
    depth, method and learning rate."""
    model = save_tiny_embedding_model(tmp_path / "model", normalize=True)
    cfg = compose_config(
        "+experiment=minilm_embedding_quick", "+search=fastest_embedding", "method=embedding_mse",
        "optimizer.lr=1e-3", "theseus.successor_layers=2", f"model.base={model}",
        f"data.glue_dir={make_sentence_glue_dir(tmp_path / 'glue')}", "data.max_sentences=40", "data.held_out=8",
        "data.batch_size=8", "schedule_steps=3", "trainer.max_steps=6", "trainer.val_check_interval=2", "logger=csv",
        "deploy.repeats=2", "deploy.openvino=false", f"paths.cache_dir={tmp_path / 'cache'}",
        f"paths.output_dir={tmp_path / 'run'}",
    )  # fmt: skip
    with recorded_reads(monkeypatch) as read:
        run(cfg)
    assert unread_keys(cfg, read) == []


def test_the_recorder_finds_a_setting_nobody_reads(monkeypatch):
    cfg = compose_config("+experiment=smollm2_quick", "+ignored.setting=1")
    with recorded_reads(monkeypatch) as read:
        cfg.data.window  # noqa: B018 - a read, as a run makes it
        OmegaConf.to_container(cfg.optimizer, resolve=True)
    everything_else = {key for key in leaves(cfg) if not key.startswith(("ignored", "data.window", "optimizer"))}
    assert {"data.window", "optimizer.lr"} <= read
    assert unread_keys(cfg, read | everything_else) == ["ignored.setting"]
    assert "schedule_steps" not in unread_keys(cfg, read)  # the replacement group interpolates it


def test_every_experiment_and_search_is_described_by_its_kinds_typed_settings():
    """The types a kind reads its settings through (its registration's ``config``) describe every key and value its
    experiments and searches set, so a run reads each setting under the name and type its schema gives."""
    composed = {**COMPOSED, "+search=fastest_within": compose_config("+search=fastest_within"),
                "+search=fastest_embedding": compose_config("+experiment=minilm_embedding_quick",
                                                            "+search=fastest_embedding")}  # fmt: skip
    kinds = registered_kinds()
    problems = {name: config_problems(cfg, kinds[run_kind_name(cfg)].config) for name, cfg in composed.items()}
    assert {name: found for name, found in problems.items() if found} == {}


def test_a_key_or_a_type_the_typed_settings_do_not_describe_is_found():
    wrong_key = compose_config("+experiment=rte_curriculum", "+benchmark.warmup=3")
    wrong_type = compose_config("+experiment=smollm2_quick", "data.window=wide")
    assert config_problems(wrong_key, TaskModelConfig) == ["Key 'warmup' not in 'BenchmarkConfig' (TaskModelConfig)"]
    assert "could not be converted to Integer" in config_problems(wrong_type, LanguageModelConfig)[0]
    assert config_problems(compose_config("+experiment=rte_curriculum"), LanguageModelConfig)  # not its kind's data
