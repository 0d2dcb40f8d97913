"""``python -m theseus_pl +experiment=rte_curriculum [overrides]``: compress a fine-tuned encoder end to end."""

from __future__ import annotations

import logging
import sys

import hydra
from omegaconf import DictConfig, OmegaConf

from theseus_pl.app.config import register_resolvers

log = logging.getLogger("theseus_pl")

register_resolvers()


@hydra.main(version_base="1.3", config_path="pkg://theseus_pl.conf", config_name="train")
def main(cfg: DictConfig) -> float | None:
    """Print the composed config, run the pipeline, print the headline; the return value serves sweepers."""
    from theseus_pl.app.model_card import widths_clause
    from theseus_pl.app.pipeline import run  # torch, Lightning, transformers: not needed to refuse a bad command line
    from theseus_pl.app.tracking.quiet import install_filters

    install_filters()
    log.info("Composed config:\n%s", OmegaConf.to_yaml(cfg, resolve=True))
    results = run(cfg)
    if results is None:  # a DDP rank other than 0: rank 0 reports
        return None
    retained = "n/a" if results.retained is None else f"{100 * results.retained:.1f}%"
    speedup = "n/a" if results.speedup is None else f"{results.speedup:.2f}x"
    log.info(
        "%s: predecessor %.2f, successor %.2f (%s retained), %d -> %d layers%s, %s faster; results in %s",
        results.task, results.predecessor.score, results.successor.score, retained,
        results.layers.predecessor, results.layers.successor, widths_clause(results), speedup,
        cfg.paths.output_dir,
    )  # fmt: skip
    for step, error in results.failed_steps.items():
        log.warning("Step %r did not complete: %s", step, error)
    return results.successor.score


def refuse_home_shorthand(arguments: list[str]) -> None:
    """Hydra's override grammar rejects an unquoted ``~`` with a lexer error that names no fix: name it here."""
    for argument in arguments:
        key, equals, value = argument.partition("=")
        if equals and value.startswith("~"):
            raise SystemExit(
                f"{argument}: Hydra's override grammar does not accept an unquoted ~. Write {key}=$HOME{value[1:]} "
                "(your shell expands $HOME) or give the full path."
            )


def cli() -> None:
    """``python -m theseus_pl`` and the ``theseus-pl`` command."""
    refuse_home_shorthand(sys.argv[1:])
    main()


if __name__ == "__main__":
    cli()
