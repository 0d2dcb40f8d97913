"""Deployment: the successor as ONNX (and int8), checked against PyTorch on dev rows and timed beside it.

    python -m theseus_pl.deploy RUN_DIR [--quantize int8|none] [--no-openvino] [--no-own-lengths] [--glue-dir PATH]
                                        [--threads N] [--dry-run]
    python -m theseus_pl.deploy MODEL_DIR [--task SST-2 --glue-dir PATH] [--predecessor DIR] [--dry-run]
    python -m theseus_pl.deploy LM_RUN_DIR --gguf f16 q8_0 [--llama-cpp auto|true|false] [--repeats N] [--dry-run]

``RUN_DIR`` is a finished run's folder (``successor/``, ``results.json``, ``.hydra/config.yaml``): its dev set and
its predecessor are used, and the ``deployment`` block goes into its ``results.json`` and its model card.
``MODEL_DIR`` is any sequence-classification checkpoint with its tokenizer, such as an exported successor: dev rows
come from ``--task`` (with ``--glue-dir`` offline), latency ratios from ``--predecessor``; without ``--task`` the
ONNX model is checked and timed on a few example sentences and no dev score is given. The block is also written to
``<model>/onnx/deployment.json``. Inside a run the same stage is ``deploy.onnx=true`` (``deploy.quantize=int8``).

A finished sentence-embedding run's folder deploys the same way: its encoder to ``successor/onnx/model.onnx`` (and
``model_int8.onnx``), where ``SentenceTransformer(path, backend="onnx")`` reads it, and (OpenVINO as below) to
``successor/openvino/openvino_model.xml`` (and ``openvino_model_qint8_quantized.xml``, calibrated on the run's training
sentences), where ``backend="openvino"`` reads it; the sentence vectors checked against PyTorch's and every model
scored on the run's STS-B dev pairs.

``LM_RUN_DIR`` is a finished decoder-LM run's folder: ``--gguf`` writes its successor as GGUF files for llama.cpp
(``successor/gguf/model.<type>.gguf``), checks each against PyTorch on the run's held-out windows and, where
llama-cpp-python is installed, times each against the predecessor at the same type; inside a run the same stage is
``deploy.gguf=[f16,q8_0]``.

Writes ``onnx/model.onnx`` (dynamic batch and sequence axes) and ``onnx/model_int8.onnx`` beside the checkpoint;
where the openvino extra is installed (and ``--target`` is auto or an OpenVINO one) also ``openvino/model.xml`` and
``openvino/model_int8.xml`` (static int8 calibrated on ``--calibration-rows`` training rows: a run folder's, or
``--task``'s), so that auto weighs them too; ``--no-openvino`` leaves them out, ``--openvino`` refuses to go on
without the extra.
Each batch size is timed padded to ``--sequence-length`` and, with dev rows, again at their own lengths (batch 1
unpadded one at a time, larger sizes length-sorted batches; ``--no-own-lengths`` skips it): ``auto`` chooses on those.
``--dry-run`` makes the checks a deployment makes before it exports (the folder holds what it reads, the options are
valid, the deploy extra is installed, the dev rows can be read) and prints what it would export, time and write; it
exports nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from theseus_pl.app.config.side_commands import command_parser, in_flags, refuse
from theseus_pl.deployment.gguf_types import GGUF_TYPES
from theseus_pl.deployment.record import Deployment, DeploySettings, SettingWords, openvino_by_default
from theseus_pl.deployment.targets import AUTO, TARGETS

# What deploys (torch, transformers, ONNX Runtime) is imported once the command line is read: --help and a refused
# option answer at once, not after seconds of imports.


def main(argv: Sequence[str] | None = None) -> Deployment | list[dict[str, Any]] | None:
    """Deploy the folder and print its block (or, with ``--dry-run``, what deploying it would do: None)."""
    dry_run = "check the folder, the options and the deploy extra, print what would be exported; export nothing"
    parser = command_parser("deploy", __doc__, dry_run)
    parser.add_argument("folder", type=Path, metavar="RUN_DIR|MODEL_DIR",
                        help="a finished run's folder, or a sequence-classification checkpoint")  # fmt: skip
    parser.add_argument("--quantize", choices=["int8", "none"], default="int8", help="also write the int8 model")
    parser.add_argument(
        "--openvino", action=argparse.BooleanOptionalAction,
        help="also OpenVINO fp32 (bf16 where the CPU has it), int8 (default: where its extra is installed and "
        "--target is auto or an OpenVINO one)",
    )  # fmt: skip
    parser.add_argument("--calibration-rows", type=int, default=DeploySettings.calibration_rows,
                        help="training rows NNCF calibrates OpenVINO's int8 model on")  # fmt: skip
    parser.add_argument("--task", help="a checkpoint folder's GLUE task, for dev rows (a run folder knows its own)")
    parser.add_argument("--glue-dir", help="local GLUE folder in the classic layout; default: the run's, or the hub")
    parser.add_argument("--predecessor", type=Path, help="a checkpoint folder's predecessor, for the ratios")
    parser.add_argument("--sequence-length", type=int, default=DeploySettings.sequence_length,
                        help="tokens per row in the timing batches (0: each batch's longest row)")  # fmt: skip
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=list(DeploySettings.batch_sizes),
                        help="the batch sizes timed")  # fmt: skip
    parser.add_argument("--own-lengths", action=argparse.BooleanOptionalAction,
                        help="also time the dev rows at their own lengths (what auto chooses on; default: where there "
                        "are dev rows)")  # fmt: skip
    parser.add_argument("--repeats", type=int, default=DeploySettings.repeats, help="timed calls per model and size")
    parser.add_argument("--threads", type=int, help="CPU threads for PyTorch and ONNX Runtime (default: torch's)")
    parser.add_argument(
        "--target",
        choices=[AUTO, *TARGETS],
        default=AUTO,
        help="the model to ship (auto: the fastest of those deployed, OpenVINO's among them, within "
        "--max-score-drop of the fp32 successor)",
    )
    parser.add_argument("--max-score-drop", type=float, default=0.5, help="dev points a target may lose under auto")
    parser.add_argument(
        "--gguf", nargs="+", metavar="TYPE", help=f"decoder-LM runs: GGUF files of types {', '.join(GGUF_TYPES)}"
    )
    parser.add_argument(
        "--llama-cpp", choices=["auto", "true", "false"], default="auto",
        help="with --gguf: time the files in llama.cpp (auto: where llama-cpp-python is installed)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from theseus_pl.app.kinds.task_model.shipping import deploy_model, planned_deployment
    from theseus_pl.app.results.deployment_block import deployment_dict
    from theseus_pl.app.results.envelope import strict_json
    from theseus_pl.app.ship.deploy_folder import is_run_folder, run_deployer
    from theseus_pl.deployment.onnx_export import DeploymentError

    unread = _unread_options(args, parser)
    if args.gguf:
        return _deploy_gguf(args, unread)
    settings = _checked(args, unread, {
        "quantize": None if args.quantize == "none" else args.quantize,
        "sequence_length": args.sequence_length or None,
        "batch_sizes": tuple(args.batch_sizes),
        "repeats": args.repeats,
        "threads": args.threads,
        "target": args.target,
        "max_score_drop": args.max_score_drop,
        "openvino": "auto" if args.openvino is None else args.openvino,
        "calibration_rows": args.calibration_rows,
        "own_lengths": args.own_lengths is not False,
    })  # fmt: skip
    try:
        deployer = run_deployer(args.folder) if is_run_folder(args.folder) else None  # a run deploys as its kind does
        if args.dry_run:
            plan = (
                deployer.plan(args.folder, settings, args.glue_dir)
                if deployer
                else planned_deployment(args.folder, settings, args.task, args.predecessor, args.glue_dir)
            )
            print("\n".join([f"Dry run: nothing was exported. Deploying {args.folder} would:", *plan]))
            return None
        with _stdout_kept_for_json(), _interrupt_said(args.folder):
            if deployer:
                block = deployer.deploy(args.folder, settings, args.glue_dir)
            else:
                block = deploy_model(args.folder, settings, args.task, args.glue_dir, args.predecessor)
    except (DeploymentError, ValueError, OSError, RuntimeError) as error:  # the data source's own message names it
        refuse(in_flags(str(error), ["--glue-dir"] if args.glue_dir is not None else []))  # else the run's setting
    print(strict_json(deployment_dict(block)))  # as results.json holds it: an inf or NaN as null
    return block


# What a deployment to GGUF files does not read, and what only a checkpoint folder reads (a run's record names both).
NOT_FOR_GGUF = ("quantize", "openvino", "calibration_rows", "task", "glue_dir", "predecessor", "sequence_length",
                "batch_sizes", "own_lengths", "target", "max_score_drop")  # fmt: skip
CHECKPOINT_ONLY = ("task", "predecessor")
SWITCHES = ("openvino", "own_lengths")  # --X and --no-X; None where neither is given


def _unread_options(args: argparse.Namespace, parser: argparse.ArgumentParser) -> list[str]:
    """Each option given that this deployment would not read, as a problem: dropped in silence, it deployed something
    other than what the command line said."""
    from theseus_pl.app.ship.deploy_folder import CONFIG, is_run_folder, successor_deploys_alone

    def given(names: Sequence[str]) -> list[str]:
        """Each of ``names`` given, as typed (a switch's False as its --no- form)."""
        return [
            f"--{'no-' if getattr(args, name) is False and name in SWITCHES else ''}{name.replace('_', '-')}"
            for name in names
            if getattr(args, name) != parser.get_default(name)
        ]

    if args.gguf:
        unread = given(NOT_FOR_GGUF)
        return [f"{', '.join(unread)}: for a deployment to ONNX or OpenVINO; --gguf writes a decoder LM's GGUF "
                "files and reads --llama-cpp, --repeats and --threads."] if unread else []  # fmt: skip
    problems = [] if not given(["llama_cpp"]) else ["--llama-cpp: read with --gguf only (a decoder LM's GGUF files)."]
    openvino = openvino_by_default(args.target) if args.openvino is None else args.openvino
    dev_rows = bool(args.task) or is_run_folder(args.folder)  # a checkpoint folder's come from --task
    calibrated = openvino and args.quantize == "int8" and dev_rows
    if given(["calibration_rows"]) and not calibrated:
        problems.append(
            "--calibration-rows: read only where OpenVINO's int8 model is calibrated (on these training rows): "
            "OpenVINO deployed (--openvino; by default where its extra is installed and --target is auto), "
            "--quantize int8, and training rows (a run's folder, or --task for a checkpoint's)."
        )
    if given(["max_score_drop"]) and args.target != AUTO:
        problems.append(f"--max-score-drop: read by --target auto only (the fastest within that many dev points); "
                        f"--target {args.target} names the model shipped.")  # fmt: skip
    elif given(["max_score_drop"]) and not dev_rows:
        problems.append("--max-score-drop: read where auto picks by dev score; without dev rows it picks among the "
                        "models checked against PyTorch's logits. A checkpoint folder's come from --task: give --task "
                        "too.")  # fmt: skip
    if given(["glue_dir"]) and not dev_rows:
        problems.append("--glue-dir: read for a checkpoint folder's dev rows, which --task names: give --task too.")
    if args.own_lengths is True and not dev_rows:  # --no-own-lengths asks what is done: no own-lengths timing
        problems.append("--own-lengths: read where there are dev rows to time at their own lengths; a checkpoint "
                        "folder's come from --task: give --task too.")  # fmt: skip
    unread = given(CHECKPOINT_ONLY) if is_run_folder(args.folder) else []
    if unread and (args.folder / CONFIG).is_file():
        problems.append(f"{', '.join(unread)}: for a checkpoint folder; {args.folder} is a run's, whose record names "
                        "its task and predecessor.")  # fmt: skip
    elif unread and successor_deploys_alone(args.folder):  # no record names them: its successor deploys with them
        options = " ".join(f"{option} {getattr(args, option[2:])}" for option in unread)
        problems.append(f"{', '.join(unread)}: for a checkpoint folder; {args.folder} is a run's, without its record "
                        f"({CONFIG}): deploy its successor with them (python -m theseus_pl.deploy "
                        f"{args.folder / 'successor'} {options}).")  # fmt: skip
    # else a run's successor that is no classifier, without its record: the folder's refusal says what deploys it
    return problems


def _deploy_gguf(args: argparse.Namespace, unread: list[str]) -> list[dict[str, Any]] | None:
    """``--gguf`` on a decoder-LM run's folder: print the rows written (or, with ``--dry-run``, the plan)."""
    from theseus_pl.app.kinds.language_model.shipping import (
        deploy_language_model_run,
        planned_language_model_deployment,
    )
    from theseus_pl.app.results.envelope import strict_json
    from theseus_pl.deployment.gguf_export import GGUFExportError

    llama_cpp = {"true": True, "false": False}.get(args.llama_cpp, args.llama_cpp)
    settings = _checked(args, unread, {"gguf": tuple(args.gguf), "llama_cpp": llama_cpp, "repeats": args.repeats,
                                       "threads": args.threads})  # fmt: skip
    try:
        if args.dry_run:
            plan = planned_language_model_deployment(args.folder, settings)
            print("\n".join([f"Dry run: nothing was exported. Deploying {args.folder} would:", *plan]))
            return None
        with _stdout_kept_for_json(), _interrupt_said(args.folder):
            rows = deploy_language_model_run(args.folder, settings)
    except (GGUFExportError, ValueError, OSError, RuntimeError) as error:  # the data source's own message names it
        refuse(str(error))
    print(strict_json(rows))  # as results.json holds them: an inf perplexity as null
    return rows


def _checked(args: argparse.Namespace, unread: list[str], settings: dict[str, Any]) -> DeploySettings:
    """The command's settings, or its refusal naming every problem at once: a folder that is not there, each option
    given that this deployment would not read (``unread``), and each option out of range, named as typed."""
    from theseus_pl.app.ship.deploy_folder import not_a_model_problem

    folder = args.folder
    problems = [] if folder.is_dir() else [f"{folder} is not a folder: give a finished run's folder or a checkpoint's."]
    if folder.is_dir() and (problem := not_a_model_problem(folder)):
        problems.append(problem)
    problems += unread
    problems += DeploySettings.problems(settings, FlagWords(args)).values()
    if problems:
        refuse("\n".join(problems))
    return DeploySettings(**settings)


# How a flag's value differs from its setting's (deploy.sequence_length=null is --sequence-length 0), where it does.
FLAG_VALUES = {
    "sequence_length": "0 (each batch's longest row) or at least 2 tokens",
    "batch_sizes": "batch sizes, each at least 1, e.g. 1 32",
    "threads": "at least 1 (without it: torch's number of threads)",
    "gguf": f"distinct GGUF types, e.g. f16 q8_0, from {', '.join(GGUF_TYPES)}",
}


class FlagWords(SettingWords):
    """The deploy settings' problems named as the command line gave them: each setting by its flag (deploy.<field>
    is --<field>, its underscores as hyphens) and the value typed."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args

    def typed(self, name: str) -> str | None:
        """The flag of setting ``name`` with its value as typed (a switch by its form); None where it was not given
        and has no default (a default is valid: what another setting needs is a flag given to drop)."""
        value, flag = getattr(self.args, name), "--" + name.replace("_", "-")
        if value is None:
            return None
        if isinstance(value, bool):
            return flag if value else f"--no-{flag[2:]}"
        return f"{flag} {' '.join(map(str, value)) if isinstance(value, list) else value}"

    def refused(self, name: str, value: Any) -> str:
        return self.typed(name) or super().refused(name, value)

    def expected(self, name: str) -> str:
        return FLAG_VALUES.get(name, super().expected(name))

    def given(self, name: str, value: Any) -> str:
        return self.typed(name) or f"--{name.replace('_', '-')} {value}"

    def fix(self, needs: Sequence[tuple[str, Any]]) -> str:
        return " and ".join(f"drop {typed}" if (typed := self.typed(name)) else f"give --{name.replace('_', '-')} "
                            f"{value}" for name, value in needs)  # fmt: skip


@contextlib.contextmanager
def _interrupt_said(folder: Path) -> Iterator[None]:
    """Ctrl-C mid-deployment in one line and status 130, as a shell reports it, not under a traceback: the deployment
    has removed what it wrote by then (a failed step, recorded as such where there is a run's record)."""
    try:
        yield
    except KeyboardInterrupt:
        print(f"Interrupted: the deployment of {folder} removed what it had written. Rerun the command to deploy "
              "it.", file=sys.stderr)  # fmt: skip
        raise SystemExit(130) from None


def _stdout_kept_for_json() -> contextlib.AbstractContextManager[Any]:
    """While deploying, what anything prints goes to stderr, so stdout holds the JSON block alone (``| jq`` works):
    libraries print there unasked (transformers prints a W&B notice on import when ``WANDB_MODE=offline``; NNCF logs
    and draws its progress to stdout while it calibrates, through a handler made with the stream of the moment it is
    imported, which is inside this block: the OpenVINO export imports it only when it quantises)."""
    return contextlib.redirect_stdout(sys.stderr)


def cli() -> None:
    """The ``theseus-pl-deploy`` command."""
    main()


if __name__ == "__main__":
    cli()
