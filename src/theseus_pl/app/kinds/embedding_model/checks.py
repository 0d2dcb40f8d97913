"""What a sentence-embedding run refuses of its method's options before compute."""

from __future__ import annotations

from omegaconf import DictConfig, ListConfig

from theseus_pl.app.checks.settings import changed_from_defaults, encoder_gguf_problems
from theseus_pl.app.methods.method import (
    BLOCK_INFLUENCE,
    PREDECESSOR_TEACHER,
    CompressionMethod,
    SoftTargets,
    TheseusSettings,
)


def embedding_model_method_problems(cfg: DictConfig, method: CompressionMethod, theseus: TheseusSettings) -> list[str]:
    """Settings a sentence-embedding run does not read (yet), or cannot honour."""
    problems = []
    pairs = cfg.data.get("pairs")
    on_pairs = "pairs" in cfg.data  # data=sentence_pairs, whatever data.pairs holds (its own rule checks it)
    if on_pairs and method.name == "embedding_mse":
        problems.append(
            f"method=embedding_mse trains the kept layers to the predecessor's sentence vectors; data.pairs={pairs} "
            "trains on gold scores: use method=embedding_fine_tuning (the kept layers on the pairs' CoSENT loss)."
        )
    if on_pairs:  # data.max_sentences=10 was recorded, and every pair trained on
        problems += [
            f"data.{key} is read by data=sentences; data=sentence_pairs trains on the pairs of data.pairs: leave it "
            "out."
            for key in ("max_sentences", "corpora", "train_tasks")
            if cfg.data.get(key) is not None
        ]
    if not on_pairs and method.name == "embedding_fine_tuning":
        problems.append(
            "method=embedding_fine_tuning trains the kept layers on labelled pairs (data=sentence_pairs); on "
            "unlabelled sentences the same student trained to the predecessor's vectors is method=embedding_mse."
        )
    if isinstance(method, SoftTargets) and method.alpha > 0:
        problems.append(
            f"method.alpha={method.alpha} weighs a KL to soft targets in; a sentence-embedding run has no classes: its "
            "loss is already the MSE to the predecessor's sentence vectors (CoSENT on labelled pairs). Leave it 0."
        )
    elif isinstance(method, SoftTargets) and method.teacher != PREDECESSOR_TEACHER:
        problems.append(
            f"method.teacher={method.teacher} adapts a decoder LM's predecessor to its text; a sentence-embedding "
            "run's targets are its predecessor's own vectors. Leave method.teacher=predecessor."
        )
    if theseus.init == BLOCK_INFLUENCE:
        problems.append(
            f"theseus.init={BLOCK_INFLUENCE} measures layers on language-model windows: decoder-LM runs only. Use "
            "bottom, top or every_other."
        )
    if cfg.evaluation.single_modules is True:
        problems.append(
            "evaluation.single_modules=true scores each Theseus module alone on a task; a sentence-embedding run is "
            "scored on STS-B dev. Leave it false."
        )
    if not method.takes_successor_settings:
        problems += [
            f"theseus.successor.{name}={width} shapes Theseus successors; method={method.name} keeps whole "
            "predecessor layers (depth only). Leave it null."
            for name, width in theseus.widths.items()
        ]
    else:  # a traceback where the neurons' importance is measured (no batches here), and unrecorded where not
        problems += [
            f"theseus.successor.{name}={width} narrows encoder classifiers' successors; a sentence-embedding "
            "successor is made of whole copied layers (depth only). Leave it null."
            for name, width in theseus.widths.items()
        ]
    if isinstance(cfg.evaluation.lm_eval.tasks, ListConfig) and cfg.evaluation.lm_eval.tasks:
        problems.append(
            f"evaluation.lm_eval.tasks={list(cfg.evaluation.lm_eval.tasks)} scores a decoder LM; a sentence-embedding "
            "run is scored on STS-B dev. Leave it []."
        )
    problems += encoder_gguf_problems(cfg)
    if changed := changed_from_defaults(cfg, "finetune"):
        problems.append(f"{', '.join(changed)}: the predecessor is compressed as given (model.base), never fine-tuned "
                        "first. Leave the finetune group at its defaults.")  # fmt: skip
    return problems
