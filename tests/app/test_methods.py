"""A method is one class named by ``_target_`` in its config file: a new one needs nothing else; its settings check
themselves and the app names their problems as config keys; a run checks its settings and builds its schedule once."""

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
import torch
import yaml
from app_runs import compose_config, setting_problems, tiny_run_overrides
from hydra.utils import get_class
from omegaconf import OmegaConf

from theseus_pl.app.checks import settings as settings_check
from theseus_pl.app.checks.settings import checked_settings
from theseus_pl.app.config.kinds import EMBEDDING_MODEL, LANGUAGE_MODEL, TASK_MODEL
from theseus_pl.app.kinds.embedding_model.models import SentenceModels
from theseus_pl.app.kinds.task_model.record import LayerCounts
from theseus_pl.app.methods import schedules
from theseus_pl.app.methods.kind_models import LanguageModels, TaskModels
from theseus_pl.app.methods.language_model import ShortGPT, Streamline
from theseus_pl.app.methods.method import (
    DEFAULT_SUCCESSOR,
    CompressionMethod,
    Method,
    MethodInputs,
    TheseusSettings,
    method_from_config,
)
from theseus_pl.app.methods.task_model import LayerDrop, PatientDistillation, Transfer
from theseus_pl.app.methods.theseus import Theseus
from theseus_pl.app.methods.truncation import FineTuning, KeptLayers
from theseus_pl.app.predecessors.classifier import load_classifier
from theseus_pl.app.run.pipeline import run
from theseus_pl.core.schedules import CurriculumSchedule
from theseus_pl.core.settings import Rule, SettingsError, positive_number
from theseus_pl.data.tasks import glue_task
from theseus_pl.lightning.modules import FineTuningModule

pytestmark = pytest.mark.quick

CONF = Path(__file__).parents[2] / "conf"


@dataclass(frozen=True)
class Truncation(CompressionMethod):
    """A method of one's own: the predecessor's bottom layers fine-tuned, at a share of the optimizer's rate."""

    lr_scale: float

    RULES: ClassVar[dict[str, Rule]] = {"lr_scale": Rule(positive_number, "a number above 0")}

    def build(self, inputs: MethodInputs) -> Method:
        student = inputs.truncated(inputs.predecessor())
        optimizer = {**inputs.optimizer, "lr": inputs.optimizer["lr"] * self.lr_scale}
        return Method(self.name, FineTuningModule(student, inputs.metrics(), **optimizer), lambda: student)


@pytest.fixture
def own_method(tmp_path):
    """The one config file a new method needs, in a config folder of the user's own (``hydra.searchpath``)."""
    folder = tmp_path / "conf" / "method"
    folder.mkdir(parents=True)
    (folder / "truncation.yaml").write_text(f"_target_: {__name__}.Truncation\nname: truncation\nlr_scale: 0.5\n")
    return [f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "method=truncation"]


def test_a_new_method_is_one_class_and_one_config_file(own_method, tiny_base, glue_dir, tmp_path):
    settings = checked_settings(compose_config(*own_method))
    assert settings.problems == [] and settings.method == Truncation(name="truncation", lr_scale=0.5)
    results = run(compose_config(*tiny_run_overrides(tiny_base, glue_dir, tmp_path), *own_method))
    assert results.method == "truncation" and results.schedule is None
    assert results.layers == LayerCounts(predecessor=4, successor=2)
    assert results.settings["method.lr_scale"] == 0.5 and "method._target_" not in results.settings


def test_a_new_methods_settings_are_checked_by_its_own_rules(own_method):
    assert setting_problems(compose_config(*own_method, "method.lr_scale=0")) == [
        "method.lr_scale=0 must be a number above 0."
    ]
    target = f"method._target_={__name__}.Truncation"
    assert setting_problems(compose_config(target, "+method.lr_scale=2")) == []  # an override names it as well


@pytest.mark.parametrize("path", sorted((CONF / "method").glob("*.yaml")), ids=lambda path: path.stem)
def test_each_method_config_names_its_class_and_is_called_by_its_file_name(path):
    config = yaml.safe_load(path.read_text())
    assert issubclass(get_class(config["_target_"]), CompressionMethod)
    assert config["name"] == path.stem
    given = ["method.successor=/a/run/successor"] if "successor" in config else []  # transfer's required key
    kinds = get_class(config["_target_"]).kinds
    if path.stem == "embedding_fine_tuning":
        given.append("+experiment=minilm_embedding_pairs")  # the kept layers on labelled pairs
    elif path.stem.startswith("embedding_") or kinds == (EMBEDDING_MODEL,):
        given.append("+experiment=minilm_embedding_quick")  # a sentence-embedding method runs on sentences
    elif path.stem.startswith("lm_") or TASK_MODEL not in kinds:
        given.append("+experiment=smollm2_quick")  # a decoder method runs on language-model text
    settings = checked_settings(compose_config(f"method={path.stem}", *given))
    assert settings.problems == [] and isinstance(settings.method, get_class(config["_target_"]))


def test_what_the_checks_ask_of_a_method_is_a_property_of_its_class():
    assert Theseus.replaces_modules and Theseus.takes_successor_settings and Theseus.needs_schedule
    for baseline in (PatientDistillation, LayerDrop, Transfer, Truncation, FineTuning):
        assert not (baseline.replaces_modules or baseline.takes_successor_settings or baseline.needs_schedule)
    # The kinds of run each compresses: one Theseus and one truncation baseline (KD: with soft targets) serve all.
    assert Theseus.kinds == FineTuning.kinds == (TASK_MODEL, LANGUAGE_MODEL, EMBEDDING_MODEL)
    assert KeptLayers.kinds == (EMBEDDING_MODEL,) and not KeptLayers(name="embedding_truncation").trains
    assert PatientDistillation.kinds == Truncation.kinds == (TASK_MODEL,)
    assert ShortGPT.kinds == Streamline.kinds == (LANGUAGE_MODEL,)
    assert Transfer(name="transfer", successor="/a/run/successor").models_read() == [
        ("method.successor", "/a/run/successor")
    ]


@pytest.mark.parametrize(
    ("make", "problems"),
    [
        (lambda: FineTuning(name="kd", alpha=2, temperature=0),
         {"alpha": "alpha=2 must be a number in [0, 1].", "temperature": "temperature=0 must be a number above 0."}),
        (lambda: PatientDistillation(name="pkd", alpha=0.5, temperature=1.0, beta=-1),
         {"beta": "beta=-1 must be a number, at least 0 (0: vanilla KD)."}),
        (lambda: LayerDrop(name="layerdrop", drop_rate=1.0),
         {"drop_rate": "drop_rate=1.0 must be null (1 - n/L) or a number in [0, 1)."}),
        (lambda: Transfer(name="", successor="???"),
         {"name": "name='' must be the method's name, as results call it.",
          "successor": "successor='???' must be the successor folder of another run (<run>/successor)."}),
        (lambda: method_from_config({"_target_": "nowhere.Method", "name": "x"}),
         {"_target_": "_target_='nowhere.Method' must be the dotted path of a method class (a CompressionMethod of "
                      "theseus_pl.app.methods.method): pick a method with method=NAME."}),
        (lambda: TheseusSettings(successor_layers=0, init="middle", successor={"importance": "loudest"}),
         {"successor_layers": "successor_layers=0 must be a whole number of layers, at least 1.",
          "init": "init='middle' must be one of bottom, top, every_other, block_influence.",
          "successor._target_": "successor._target_=None must be the dotted path of an importable successor factory.",
          "successor.importance": "successor.importance='loudest' must be one of magnitude, random, activation."}),
    ],
)  # fmt: skip
def test_each_settings_object_names_every_problem_with_its_own_fields(make, problems):
    with pytest.raises(SettingsError) as raised:
        make()
    assert raised.value.problems == problems


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        (["method=kd", "method.alpha=2"], "method.alpha=2 must be a number in [0, 1]."),
        (["method=theseus_kd", "method.alpha=1.5"], "method.alpha=1.5 must be a number in [0, 1]."),
        (["method=theseus_kd", "method.temperature=0"], "method.temperature=0 must be a number above 0."),
        (["method=pkd", "method.beta=abc"], "method.beta='abc' must be a number, at least 0 (0: vanilla KD)."),
        (["method=layerdrop", "method.drop_rate=1.5"],
         "method.drop_rate=1.5 must be null (1 - n/L) or a number in [0, 1)."),
        (["method=transfer"],
         "method.successor='???' must be the successor folder of another run (<run>/successor)."),
        (["method._target_=nowhere.Method"], "method._target_='nowhere.Method' must be the dotted path of a method"),
        (["method=kd", "+method.gamma=1"], "method: FineTuning.__init__() got an unexpected keyword"),
        (["+experiment=smollm2_quick", "method=shortgpt", "+method.alpha=1.0"],
         "method.alpha=1.0 weighs soft targets in the healing, but heal=false: nothing trains"),
        (["deploy.threads=0"], "deploy.threads=0 must be null or at least 1."),
        (["+theseus.depth=3"], "theseus: TheseusSettings.__init__() got an unexpected keyword argument 'depth'"),
    ],
)  # fmt: skip
def test_the_app_names_each_problem_by_its_config_key_before_anything_starts(overrides, problem):
    (found,) = setting_problems(compose_config(*overrides))
    assert found.startswith(problem)


def test_an_option_interpolated_from_a_bad_one_is_reported_once():
    assert setting_problems(compose_config("threads=0")) == [
        "threads=0 must be null (torch's default) or a whole number of threads, at least 1."
    ]  # deploy.threads is ${threads}: the same value, named where it was set


def _spy(monkeypatch, function):
    """Count calls of ``function`` wherever a theseus_pl module holds it."""
    calls = []

    def counting(*args, **kwargs):
        calls.append(args)
        return function(*args, **kwargs)

    for module in list(sys.modules.values()):
        name = getattr(module, "__name__", "")
        if name.startswith("theseus_pl") and getattr(module, function.__name__, None) is function:
            monkeypatch.setattr(module, function.__name__, counting)
    return calls


def test_a_run_checks_its_settings_and_builds_its_schedule_once(monkeypatch, tiny_base, glue_dir, tmp_path):
    checks = _spy(monkeypatch, settings_check.checked_settings)
    builds = _spy(monkeypatch, schedules.build_schedule)
    made = []
    original = CurriculumSchedule.__post_init__
    monkeypatch.setattr(CurriculumSchedule, "__post_init__", lambda self: made.append(self) or original(self))
    results = run(compose_config(*tiny_run_overrides(tiny_base, glue_dir, tmp_path)))
    assert results.method == "theseus_curriculum" and results.switch_step == 3
    assert (len(checks), len(builds), len(made)) == (1, 1, 1)


@pytest.mark.parametrize(("init", "kept"), [("bottom", [0, 1]), ("every_other", [0, 2]), ("top", [2, 3])])
def test_the_truncation_baselines_start_from_the_layers_theseus_init_names(init, kept, tiny_base, tmp_path):
    """Fine-tuning and KD of the truncated predecessor from its bottom layers (the paper) or every other layer
    (Sajjad et al.'s stronger start): the setting was once read by Theseus alone, and both runs were the same."""
    task = glue_task("RTE")
    predecessor = load_classifier(str(tiny_base), task, new_head=True)
    predecessor.save_pretrained(tmp_path / "predecessor")
    theseus = TheseusSettings(2, init, successor={"_target_": DEFAULT_SUCCESSOR, "importance": "activation"})
    inputs = MethodInputs(
        predecessor_dir=str(tmp_path / "predecessor"), models=TaskModels(task), theseus=theseus, optimizer={"lr": 1e-3},
        schedule=CurriculumSchedule(b=0.5, k=0.1), replacement="curriculum", seed=1,
    )  # fmt: skip
    for name in ("fine_tuning", "kd"):
        student = FineTuning(name, alpha=0.5 if name == "kd" else 0.0).build(inputs).successor()
        layers = student.bert.encoder.layer
        assert len(layers) == 2
        for layer, index in zip(layers, kept, strict=True):
            source = predecessor.bert.encoder.layer[index]
            assert torch.equal(layer.attention.self.query.weight, source.attention.self.query.weight)


@pytest.mark.parametrize(
    ("method", "kind", "recorded"),
    [
        ("theseus", TASK_MODEL, "top"),
        ("fine_tuning", TASK_MODEL, "top"),
        ("pkd", TASK_MODEL, "top"),
        ("layerdrop", TASK_MODEL, "every_other"),  # it keeps every other layer after training
        ("transfer", TASK_MODEL, None),  # another run's successor, whole
        ("lm_theseus", LANGUAGE_MODEL, "top"),
        ("lm_truncation", LANGUAGE_MODEL, "bottom"),  # a decoder LM's truncation keeps its bottom layers
        ("shortgpt", LANGUAGE_MODEL, "block_influence"),
        ("streamline", LANGUAGE_MODEL, None),
        ("embedding_truncation", EMBEDDING_MODEL, "top"),
    ],
)
def test_a_run_records_the_layers_its_method_started_from_not_the_setting_it_ignored(method, kind, recorded):
    """The record copied theseus.init: LayerDrop's every-other runs of the init sweep were reported as bottom, top
    and every_other, and the LM protocol's truncation as block_influence (the experiment's setting)."""
    given = ["method.successor=/elsewhere/successor"] if method == "transfer" else []
    group = OmegaConf.to_container(compose_config(f"method={method}", *given).method, resolve=True)
    models = {TASK_MODEL: TaskModels(glue_task("RTE")), LANGUAGE_MODEL: LanguageModels(),
              EMBEDDING_MODEL: SentenceModels(torch.nn.Identity())}[kind]  # fmt: skip
    assert method_from_config(group).start_layers("top", models) == recorded
