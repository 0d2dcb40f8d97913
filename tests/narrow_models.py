"""Tiny models of every family whose layers can run narrower than the embeddings, and their narrow successors."""

import copy

import torch
from conftest import FAMILY_CONFIGS, tiny_inputs
from transformers import AutoModelForSequenceClassification, XLMRobertaConfig

from theseus_pl.core.families import FAMILIES
from theseus_pl.core.replacing import TheseusModel
from theseus_pl.core.successors import successor_factory

HIDDEN = 16  # of the tiny models' 32, 4 heads of 4 dimensions where the predecessor's have 8
NEURONS = 20  # of their 37 feed-forward neurons
CONFIGS = {
    **{family: config for family, config in FAMILY_CONFIGS.items() if FAMILIES[family].attention},
    "xlm-roberta": XLMRobertaConfig(**FAMILY_CONFIGS["roberta"].to_diff_dict()),
}


def predecessor(family: str = "bert") -> torch.nn.Module:
    torch.manual_seed(0)
    return AutoModelForSequenceClassification.from_config(copy.deepcopy(CONFIGS[family])).eval()


def calibration() -> list[dict[str, torch.Tensor]]:
    return [tiny_inputs(batch_size=4, seed=seed) for seed in range(3)]


def narrow_theseus(model: torch.nn.Module, modules: int = 4, **settings: object) -> TheseusModel:
    """``model`` as the run builds it with ``theseus.successor.hidden_size=HIDDEN`` and ``settings``."""
    factory = successor_factory(model, calibration(), hidden_size=HIDDEN, importance="magnitude", **settings)
    return TheseusModel(model, modules, factory=factory).eval()
