"""What a kind of run supplies to the one run skeleton (:func:`~theseus_pl.app.run.pipeline.run`): everything else
(settings checks, seeding, the machine, the method, loggers, training, the record, the optional steps, W&B) is the
same for every kind."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, NamedTuple, TypeVar, cast

import lightning.pytorch as pl
from omegaconf import DictConfig, OmegaConf

from theseus_pl.app.checks.refused import RunRefused
from theseus_pl.app.checks.settings import RunSettings
from theseus_pl.app.config.schema import RunConfig
from theseus_pl.app.methods.kind_models import KindModels
from theseus_pl.app.methods.method import Method, MethodInputs
from theseus_pl.app.predecessors.resumable_training import interrupted_at, work_folder
from theseus_pl.app.results.envelope import Hardware, RunRecord, WandbLink
from theseus_pl.deployment.record import Deployment

R = TypeVar("R", bound=RunRecord)


class PredecessorTraining(NamedTuple):
    """What ``--check`` times of a predecessor still to be trained before the method: its module, the batches left,
    the training in words, and whether it validates after each epoch (a fine-tuning keeps its best dev epoch; a
    decoder's adaptation to its text validates never)."""

    module: pl.LightningModule
    batches: int
    what: str
    validates: bool


class RunKind(Generic[R]):
    """One kind of run: a task model (an encoder compressed on a task), a language model (a decoder on text), a
    sentence-embedding model (an encoder compressed to its own sentence vectors), or one of your own; typed by the
    record it writes (``R``), which its optional steps and W&B publishing receive."""

    name: str  # the run's name in its W&B identity: the task's, or the kind's
    description: str  # the kind in words
    loss: str = "the run's loss"  # what its methods train on, in words (--check's plan)
    datamodule: pl.LightningDataModule
    # The composed config read as the kind's settings types (its registration's ``config``): ``cfg`` typed. The
    # checks read ``cfg``, naming each key they refuse; the run reads its values here.
    config: RunConfig

    def __init__(self, cfg: DictConfig, settings: RunSettings) -> None:
        self.cfg, self.settings = cfg, settings
        self.config = cast(RunConfig, cfg)  # Hydra's structured-config reading: each value looked up when read
        self.output_dir = Path(cfg.paths.output_dir)
        self.cache_dir = Path(cfg.paths.cache_dir)  # predecessors, tokenised data, the bf16 measurement
        self._interrupted: dict[Path, int | None] = {}

    def finetune_settings(self) -> dict[str, Any]:
        """The predecessor's fine-tuning (an encoder's on its task) or adaptation (a decoder's to its text) as its
        module takes them: resolved, since a sweep interpolates them."""
        return OmegaConf.to_container(self.cfg.finetune, resolve=True)  # type: ignore[return-value]  # a mapping

    def check(self) -> None:
        """Raise :class:`~theseus_pl.app.checks.refused.RunRefused` with the settings' problems and this kind's
        (models, data), all in one message; before the run folder exists."""
        raise NotImplementedError

    def prepare_data(self) -> None:
        """What the data needs once the run is seeded; a kind that counts its training data only here (a decoder's
        text, as windows) refuses here what needs the count (:class:`~theseus_pl.app.checks.refused.RunRefused`)."""

    def data_fingerprint(self) -> tuple[str, str] | None:
        """After :meth:`prepare_data`: a fingerprint of the data the run trains on and its description, kept in every
        checkpoint so a resume onto changed data is refused (None: the settings name the data fully)."""
        return None

    def prepare_predecessor(self, evaluation: dict[str, Any]) -> None:
        """What the predecessor needs before a method is built from it (a task model: fine-tuning, or the cache)."""

    def stand_in_predecessor(self, folder: Path, evaluation: dict[str, Any]) -> PredecessorTraining | None:
        """Ready :meth:`method_inputs` for ``--check``'s timing without training anything: where the predecessor is
        still to be made, a model of its shapes saved into ``folder`` stands in, and the training that would make it
        is returned (to be timed too); None where the predecessor needs no training."""
        return None

    def interrupted_training(self, entry: Path) -> int | None:
        """The step the interrupted training of the cache entry at ``entry`` would continue from, read once: a work
        folder that is damaged or of other library versions is reported once, not by the plan and again by its
        projected time."""
        if entry not in self._interrupted:
            self._interrupted[entry] = interrupted_at(work_folder(entry))
        return self._interrupted[entry]

    def plan(self, steps: int | None, world_size: int, precision: str) -> list[str]:
        """What this kind's run would read and train on, in lines (``--check``), once :meth:`check` passed and the
        data is prepared; ``steps``: the run's optimizer steps (None where an epoch count leaves them unknown);
        ``world_size``: the processes that train together, each on its own batches (DDP); ``precision``: the one
        the run would train in (a cached predecessor is cached by it)."""
        raise NotImplementedError

    def method_inputs(self, optimizer: dict[str, Any]) -> MethodInputs:
        raise NotImplementedError

    def inputs_from(
        self,
        predecessor_dir: str,
        models: KindModels,
        optimizer: dict[str, Any],
        calibration: Callable[[], Any] | None = None,
        adapted_dir: str | None = None,
    ) -> MethodInputs:
        """This run's :class:`MethodInputs` over its kind's ``models``: the settings every kind hands its method
        (Theseus's, the schedule, the seed) from the run's own."""
        settings = self.settings
        return MethodInputs(predecessor_dir, models, settings.theseus, optimizer, settings.schedule,
                            self.cfg.replacement.kind, self.cfg.seed, calibration, adapted_dir)  # fmt: skip

    def record(
        self,
        trainer: pl.Trainer | None,
        method: Method,
        resumed_from: str | None,
        evaluation: dict[str, Any],
        hardware: Hardware,
        link: WandbLink | None,
    ) -> R:
        """The successor exported to ``successor/``, it and the predecessor evaluated, the record built."""
        raise NotImplementedError

    def optional_steps(self, results: R) -> list[tuple[str, Callable[[], object]]]:
        """Steps after the scores are written (timing, deployment, model card, a sample), each by its name in
        ``failed_steps``: one that fails is recorded there, never raised."""
        return []

    def untrained_deployment(self, method: Method, successor_dir: Path) -> Deployment:
        """The successor ``method`` starts from, untrained, saved into ``successor_dir`` and deployed as the run's
        ``deploy`` group says (its time is its shape's: a search's latency target weighs shapes by it before
        training); refused by a kind that cannot."""
        raise RunRefused([f"A {self.description} run cannot deploy an untrained successor: its shapes cannot be timed "
                          "before training (hydra.sweeper.max_latency_ms)."])  # fmt: skip

    def publish(self, experiment: Any, results: R, results_path: Path) -> None:
        """The finished record in the W&B run (summary, tables, files); raises on a W&B failure."""
        raise NotImplementedError
