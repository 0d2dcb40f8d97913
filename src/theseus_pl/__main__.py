"""``python -m theseus_pl +experiment=rte_curriculum [overrides]``: compress a fine-tuned encoder end to end."""

from __future__ import annotations

import logging

import hydra
from omegaconf import DictConfig, OmegaConf

from theseus_pl.config import register_resolvers
from theseus_pl.pipeline import run

log = logging.getLogger("theseus_pl")

register_resolvers()


@hydra.main(version_base="1.3", config_path="pkg://theseus_pl.conf", config_name="train")
def main(cfg: DictConfig) -> float:
    """Print the composed config, run the pipeline, print the headline; the return value serves sweepers."""
    log.info("Composed config:\n%s", OmegaConf.to_yaml(cfg, resolve=True))
    results = run(cfg)
    log.info(
        "%s: predecessor %.2f, successor %.2f (%.1f%% retained), %d -> %d layers, %.2fx faster; results in %s",
        results["task"], results["predecessor"]["score"], results["successor"]["score"], 100 * results["retained"],
        results["layers"]["predecessor"], results["layers"]["successor"], results["speedup"],
        cfg.paths.output_dir,
    )  # fmt: skip
    return results["successor"]["score"]


if __name__ == "__main__":
    main()
