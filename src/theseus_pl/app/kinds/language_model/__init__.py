"""The decoder LM's registration: a causal LM compressed on text, shipped as GGUF for llama.cpp."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from theseus_pl.app.config.kinds import LANGUAGE_MODEL
from theseus_pl.app.kinds.language_model.card import language_model_card
from theseus_pl.app.kinds.language_model.config import LanguageModelConfig
from theseus_pl.app.kinds.language_model.record import LanguageModelResults
from theseus_pl.app.kinds.language_model.report import write_language_model_report
from theseus_pl.app.results.registry import Kind, ReportPart
from theseus_pl.deployment.targets import ENCODERS


def _method_problems(cfg: Any, method: Any, theseus: Any) -> list[str]:
    """Its method checks, imported as a run is checked: their modules import Lightning, which a report needs not."""
    from theseus_pl.app.kinds.language_model.checks import language_model_method_problems

    return language_model_method_problems(cfg, method, theseus)


def _run(cfg: Any, settings: Any) -> Any:
    from theseus_pl.app.kinds.language_model.run import LanguageModelRun  # Lightning's import waits for a run

    return LanguageModelRun(cfg, settings)


def _report(runs: list[LanguageModelResults], rows: str, output: Path) -> ReportPart:
    """Its tables do not read ``--rows``: a row per method and kept layers."""
    written, warnings = write_language_model_report(runs, output)
    return ReportPart(written, warnings, output / "lm_table.md")


def _dashboard() -> Any:
    """Its part of the W&B workspace and sweep report, imported as a view is built: W&B's workspace library (0.3 s
    and more) is for those views alone, not for every run and reader of its records."""
    from theseus_pl.app.kinds.language_model.dashboard import LANGUAGE_MODEL_DASHBOARD

    return LANGUAGE_MODEL_DASHBOARD


KIND = Kind(
    name=LANGUAGE_MODEL,
    record=LanguageModelResults,
    run=_run,
    config=LanguageModelConfig,
    method_problems=_method_problems,
    card=language_model_card,
    dashboard=_dashboard,
    report=_report,
    shipped_as=f"a decoder-LM run: its successor is the causal-LM folder {{successor}} (transformers safetensors, "
    f"with its model card); {ENCODERS}. Ship it to llama.cpp as GGUF: --gguf f16 q8_0.",
    described="decoder language models",
    methods_hint="on a language model use one of lm_theseus, shortgpt, shortgpt_healed, lm_truncation, streamline",
)  # fmt: skip
