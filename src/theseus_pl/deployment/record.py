"""The deploy stage's settings and the block it returns: plain records, importable without torch."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from theseus_pl.core.settings import (
    Rule,
    SettingsError,
    boolean,
    field_problems,
    number,
    one_of,
    optional_positive_int,
    positive_int,
    whole_number,
)
from theseus_pl.deployment.gguf_types import GGUF_TYPES
from theseus_pl.deployment.targets import AUTO, TARGETS, auto_in_words

QUANTIZE_CHOICES = (None, "int8")
OPENVINO_PACKAGES = ("openvino", "nncf")  # the openvino extra: OpenVINO runs the models, NNCF quantises them


def missing_openvino_packages() -> list[str]:
    """The openvino extra's packages not installed here (looked up, not imported: importing them takes seconds)."""
    return [name for name in OPENVINO_PACKAGES if importlib.util.find_spec(name) is None]


# Field metadata of a key added after files were written without it: written only when it differs from its default
# (which is what reading a file without the key gives), so that an older file read and written again stays the same.
LEFT_OUT_AT_DEFAULT = {"left_out_at_default": True}


def openvino_by_default(target: str) -> bool:
    """What ``deploy.openvino=auto`` settles to: OpenVINO deployed where ``target`` names one of its models, or is
    auto and the extra is installed (so that auto's pick weighs OpenVINO's models beside ONNX Runtime's)."""
    return target.startswith("openvino") or (target == AUTO and not missing_openvino_packages())


class SettingWords:
    """How a problem with the deploy settings names them: as a run's config sets them (``deploy.<field>=<value>``).
    The deploy command names its flags instead (``theseus_pl.deploy.FlagWords``)."""

    def refused(self, name: str, value: Any) -> str:
        """A value its rule refuses, before "must be ..."."""
        return f"deploy.{name}={value!r}"

    def expected(self, name: str) -> str:
        """What a valid value is, after "must be"."""
        return DeploySettings.RULES[name].expected

    def given(self, name: str, value: Any) -> str:
        """A valid value that needs another setting."""
        return f"deploy.{name}={value}"

    def fix(self, needs: Sequence[tuple[str, Any]]) -> str:
        """What to set so that ``needs`` (the settings, with the values, another needs) hold."""
        return f"set {' and '.join(f'deploy.{name}={str(value).lower()}' for name, value in needs)} too"


@dataclass(frozen=True)
class DeploySettings:
    """How the successor is deployed and timed (``deploy.*`` in a run; the command's flags).

    It checks itself when built: a :class:`~theseus_pl.core.settings.SettingsError` names every value of the wrong
    type or range, as ``deploy.<field>``.
    """

    quantize: str | None = "int8"
    sequence_length: int | None = 128  # timing batches padded (or cut) to this many tokens; None: their longest row
    batch_sizes: tuple[int, ...] = (1, 32)
    repeats: int = 20
    threads: int | None = None  # None: torch's current number of threads
    # The model to ship: auto (the fastest within max_score_drop dev points of the fp32 successor) or one of TARGETS.
    target: str = field(default="auto", metadata=LEFT_OUT_AT_DEFAULT)
    max_score_drop: float = field(default=0.5, metadata=LEFT_OUT_AT_DEFAULT)
    # Decoder LMs: GGUF files of these types for llama.cpp (gguf_export.GGUF_TYPES), and whether to time them in
    # llama.cpp: auto (where llama-cpp-python is installed), true (refused without it), false.
    gguf: tuple[str, ...] = field(default=(), metadata=LEFT_OUT_AT_DEFAULT)
    llama_cpp: bool | str = field(default="auto", metadata=LEFT_OUT_AT_DEFAULT)
    # Also OpenVINO (the openvino extra): fp32, bf16 on a CPU with bf16 instructions, and with quantize=int8 a static
    # int8 model calibrated by NNCF on this many training rows (a fixed draw; never dev rows). "auto" (a run's and the
    # command's default) is settled when the settings are built, so a record says what was deployed: true where the
    # extra is installed and auto may pick OpenVINO's models (deploy.target auto or an OpenVINO one), else false.
    openvino: bool | str = field(default=False, metadata=LEFT_OUT_AT_DEFAULT)
    calibration_rows: int = field(default=300, metadata=LEFT_OUT_AT_DEFAULT)
    # Also time every batch size on dev rows at their own lengths (rows batch_<n>_own_lengths: one at a time unpadded,
    # or length-sorted batches padded to their longest), what auto then chooses on. False here is what a file written
    # before these rows existed says; the run's config and the command default to true.
    own_lengths: bool = field(default=False, metadata=LEFT_OUT_AT_DEFAULT)

    RULES: ClassVar[dict[str, Rule]] = {
        "quantize": Rule(one_of(QUANTIZE_CHOICES), "null (fp32 only) or int8"),
        "sequence_length": Rule(lambda v: v is None or (whole_number(v) and v >= 2), "null or at least 2 tokens"),
        "batch_sizes": Rule(lambda v: isinstance(v, list) and len(v) > 0 and all(map(positive_int, v)),
                            "a list of batch sizes, each at least 1, e.g. [1,32]"),
        "repeats": Rule(positive_int, "a whole number, at least 1"),
        "threads": Rule(optional_positive_int, "null or at least 1"),
        "target": Rule(one_of((AUTO, *TARGETS)), f"one of {', '.join((AUTO, *TARGETS))}"),
        "max_score_drop": Rule(lambda v: number(v) and v >= 0, "a number of dev points, at least 0, e.g. 0.5"),
        "gguf": Rule(lambda v: isinstance(v, list) and all(kind in GGUF_TYPES for kind in v) and len(set(v)) == len(v),
                     f"a list of distinct GGUF types, e.g. [f16,q8_0], from {', '.join(GGUF_TYPES)}"),
        "llama_cpp": Rule(lambda v: v in (True, False, "auto"), "auto, true or false"),
        "openvino": Rule(lambda v: v in (True, False, "auto"), "auto, true or false"),
        "calibration_rows": Rule(positive_int, "a whole number of training rows, at least 1, e.g. 300"),
        "own_lengths": Rule(boolean, "true or false"),
    }  # fmt: skip
    SWITCH: ClassVar[dict[str, Rule]] = {"onnx": Rule(boolean, "true or false")}  # the group's other key

    def __post_init__(self) -> None:
        problems = self.problems(vars(self))
        if problems:
            raise SettingsError(problems)
        if self.openvino == "auto":
            object.__setattr__(self, "openvino", openvino_by_default(self.target))  # frozen: settled once, here

    @classmethod
    def problems(cls, values: Mapping[str, Any], words: SettingWords | None = None) -> dict[str, str]:
        """Every problem with ``values`` (a field's rule refused, a target without the model it names), keyed by
        field, each naming the settings as ``words`` do: a run's config's by default (``deploy.<field>=<value>``),
        the command's flags where it asks them."""
        words = words or SettingWords()
        values = {**{each.name: each.default for each in fields(cls)}, **values}
        values = {key: list(value) if isinstance(value, tuple) else value for key, value in values.items()}
        problems = {  # the fields the rules refuse, each named as ``words`` name it
            name: f"{words.refused(name, values[name])} must be {words.expected(name)}."
            for name in field_problems(values, cls.RULES)
        }
        if "openvino" in problems or "target" in problems:
            return problems
        target = values["target"]
        openvino = openvino_by_default(target) if values["openvino"] == "auto" else values["openvino"]
        needs = [
            (setting, value)
            for setting, value, missing in (
                ("openvino", True, target.startswith("openvino") and openvino is not True),
                ("quantize", "int8", target.endswith("int8") and values["quantize"] != "int8"),
            )
            if missing
        ]
        if needs:
            model = {"onnx_int8": "int8", "openvino_int8": "OpenVINO int8"}.get(target, "OpenVINO")
            problems["target"] = f"{words.given('target', target)} needs the {model} model: {words.fix(needs)}."
        return problems

    def in_words(self) -> str:
        """What a run's deploy stage would make and ship, for ``--check``'s plan (OpenVINO as ``auto`` settled)."""
        int8 = self.quantize == "int8"
        openvino = (
            f"OpenVINO fp32{f' and static int8 (NNCF, {self.calibration_rows:,} training rows)' if int8 else ''}"
            if self.openvino
            else "no OpenVINO"
        )
        ships = self.target if self.target != AUTO else auto_in_words(self.max_score_drop)
        onnx = f"ONNX Runtime fp32{' and int8' if int8 else ''}"
        return f"{onnx}; {openvino}; timed at batch sizes {', '.join(map(str, self.batch_sizes))}; ships {ships}"

    @classmethod
    def from_config(cls, settings: Mapping[str, Any]) -> DeploySettings:
        """From a run's ``deploy`` group; its ``onnx`` switch says whether to deploy at all, not how (it is checked
        here with the rest: one :class:`~theseus_pl.core.settings.SettingsError` names every problem)."""
        problems = field_problems(settings, cls.SWITCH, "deploy.")
        values = {key: value for key, value in settings.items() if key not in cls.SWITCH}
        lists = {key: tuple(value) for key, value in values.items() if isinstance(value, list | tuple)}
        try:
            built = cls(**{**values, **lists})
        except SettingsError as error:
            problems.update(error.problems)
        if problems:
            raise SettingsError(problems)
        return built


def wanted(settings: Mapping[str, Any]) -> bool:
    """Whether a run's ``deploy`` group asks for deployment: ``onnx=true``, ``openvino=true`` or a quantisation (each
    starts from the ONNX export; ``openvino=auto`` only says how a deployment asked for otherwise goes)."""
    return bool(settings.get("onnx")) or settings.get("openvino") is True or settings.get("quantize") is not None


@dataclass(frozen=True)
class Deployment:
    """The ``deployment`` block of ``results.json`` (and of ``<model>/onnx/deployment.json``).

    Models are named ``pytorch_predecessor``, ``pytorch_successor``, ``pytorch_bf16``, ``onnx_fp32``, ``onnx_int8``,
    ``openvino_fp32``, ``openvino_bf16``, ``openvino_int8``; batch sizes ``batch_<n>``.
    ``theseus_pl.app.kinds.task_model.record`` writes and reads it.
    """

    onnx: str  # the fp32 model's path inside the successor's folder
    onnx_int8: str | None  # None without quantisation
    quantization: str | None  # how the int8 model was made
    checked_on: str  # the rows the ONNX logits were checked on, in words
    max_abs_diff: float  # the largest difference from PyTorch's logits
    tolerance: float
    dev_score: dict[str, float | None] | None  # per model, x100; None without dev data
    latency_ms: dict[str, dict[str, float]]  # p50 per batch size, then per model
    speedup_over_predecessor: dict[str, dict[str, float] | None]  # per batch size; None without a predecessor
    size_mb: dict[str, float]  # per model
    smaller_than_predecessor: dict[str, float] | None  # None without a predecessor
    settings: DeploySettings  # with the threads actually used
    versions: dict[str, str]  # torch, onnx, onnxruntime
    seconds: float  # the time the stage took
    # The CPU's model name and the flags deciding int8 and bf16 speed (avx2, avx512_vnni, amx_*, ...); left out of
    # the file when unknown (records written before they were recorded).
    cpu: str | None = field(default=None, metadata=LEFT_OUT_AT_DEFAULT)
    cpu_flags: list[str] = field(default_factory=list, metadata=LEFT_OUT_AT_DEFAULT)
    # ONNX Runtime fusions in the fp32 graph (Attention, SkipLayerNormalization, BiasGelu, ...) and their counts.
    fusions: dict[str, int] = field(default_factory=dict, metadata=LEFT_OUT_AT_DEFAULT)
    # The model to ship (deploy.target; auto: the fastest within deploy.max_score_drop) and why.
    target: str | None = field(default=None, metadata=LEFT_OUT_AT_DEFAULT)
    target_reason: str | None = field(default=None, metadata=LEFT_OUT_AT_DEFAULT)
    # Per batch size timed while other processes kept more than core.timing.BUSY_CORES cores busy (twice): those
    # cores. Its speed-ups are left out (null): they are not the models'.
    busy_cores: dict[str, float] = field(default_factory=dict, metadata=LEFT_OUT_AT_DEFAULT)
    # With deploy.openvino: the IR files' paths inside the successor's folder, and how the int8 one was calibrated.
    openvino: str | None = field(default=None, metadata=LEFT_OUT_AT_DEFAULT)
    openvino_int8: str | None = field(default=None, metadata=LEFT_OUT_AT_DEFAULT)
    calibration: str | None = field(default=None, metadata=LEFT_OUT_AT_DEFAULT)

    @property
    def files(self) -> list[str]:
        """Every model file the block names, inside the successor's folder."""
        return [path for path in (self.onnx, self.onnx_int8, self.openvino, self.openvino_int8) if path]
