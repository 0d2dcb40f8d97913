"""The decoder LM's registration: a causal LM compressed on text, shipped as GGUF for llama.cpp."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from theseus_pl.app.checks.settings import language_model_method_problems
from theseus_pl.app.config.kinds import LANGUAGE_MODEL
from theseus_pl.app.report.language_model import write_language_model_report
from theseus_pl.app.results.language_model import LanguageModelResults
from theseus_pl.app.results.registry import Kind, ReportPart
from theseus_pl.app.ship.deploy_folder import ENCODERS
from theseus_pl.app.ship.language_model_card import language_model_card
from theseus_pl.app.tracking.dashboard import LANGUAGE_MODEL_DASHBOARD


def _run(cfg: Any, settings: Any) -> Any:
    from theseus_pl.app.run.language_model import LanguageModelRun  # Lightning's import waits for a run

    return LanguageModelRun(cfg, settings)


def _report(runs: list[LanguageModelResults], rows: str, output: Path) -> ReportPart:
    """Its tables do not read ``--rows``: a row per method and kept layers."""
    written, warnings = write_language_model_report(runs, output)
    return ReportPart(written, warnings, output / "lm_table.md")


KIND = Kind(
    name=LANGUAGE_MODEL,
    record=LanguageModelResults,
    run=_run,
    method_problems=language_model_method_problems,
    card=language_model_card,
    dashboard=LANGUAGE_MODEL_DASHBOARD,
    report=_report,
    shipped_as=f"a decoder-LM run: its successor is the causal-LM folder {{successor}} (transformers safetensors, "
    f"with its model card); {ENCODERS}. Ship it to llama.cpp as GGUF: --gguf f16 q8_0.",
    other_method="method={method} compresses encoders; on a language model use one of lm_theseus, shortgpt, "
    "shortgpt_healed, lm_truncation, streamline.",
)  # fmt: skip
