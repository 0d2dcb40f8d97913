"""``hydra/sweeper=search``: a multi-objective Optuna search run as a Hydra sweep, on Hydra's public Sweeper and
Launcher interfaces (``hydra-optuna-sweeper`` pins optuna below 3); Hydra's sweeper class itself is the shim in
``hydra_plugins.theseus_pl_search``, where Hydra looks for plugins.

Each trial is a normal run of the pipeline in the sweep folder (``<sweep dir>/<trial number>``), deployed as the
run's ``deploy`` group says; the search reads its ``results.json`` and weighs it on two objectives: the shipped
model's dev score (maximised) and its p50 time a call at the serving batch size on the dev rows' own lengths
(minimised). The runtime of each trial is the one its run ships (``deploy.target``, by default ``auto``: the fastest
of its deployed models at the dev rows' own lengths whose score stays within ``deploy.max_score_drop`` of its fp32
successor's), so that its record, its card and the front name one model. The study lives in
``<sweep dir>/study.db`` (or the storage URL given): a search killed part-way resumes there with the same
``hydra.sweep.dir``, reruns the trial it was in with the same values and stops at ``hydra.sweeper.trials``; a
second call with more trials adds them. Every finished trial is written to ``<sweep dir>/search/``: the front
(``front.md``, ``front.csv``, ``front.png``) and ``search.json``, the pick: the fastest trial within
``max_score_drop`` points of the predecessor's dev score, whose record and model card then name the search. Once a
measured trial has told the predecessor's score, a trial still ``prune_margin`` points under the floor half-way through
its steps stops there (``callbacks.stop_below``) and is told pruned: no deployment, no point. Once there is a pick, a
trial whose shape an earlier trial timed slower than the pick (``shape_margin``) is told pruned before it trains: its
time is its shape's, so it cannot be the pick. With a latency target (``max_latency_ms``), each shape of the space is
deployed and timed untrained before any trial trains: a target no shape meets ends the search there (status 2,
naming the fastest shape), a trial of a shape over it is told pruned before it trains, and the pick meets both the
floor and the target. The front holds the kind's reference models beside the trials (a
sentence-embedding search's model2vec static model), never the pick.
"""

from __future__ import annotations

import itertools
import logging
import math
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import optuna
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn, JobStatus
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict
from optuna.trial import TrialState

from theseus_pl.app.checks.refused import RunRefused
from theseus_pl.app.config.resolvers import run_kind_name
from theseus_pl.app.config.run_folder import SEARCH_ANSWER, SEARCH_FOLDER
from theseus_pl.app.report.files import write_markdown_and_csv
from theseus_pl.app.results.envelope import write_json, write_results
from theseus_pl.app.results.reading import read_run
from theseus_pl.app.results.search_finding import (
    FrontPoint,
    ReferencePoint,
    SearchableRecord,
    SearchFinding,
    reference_points,
    validates_on_dev_score,
)
from theseus_pl.app.run.pipeline import untrained_deployment
from theseus_pl.app.search.front import (
    TrialPoint,
    UntrainedShape,
    fastest_within,
    front_table,
    is_shape_key,
    label,
    over_the_target,
    pareto_front,
    plot_front,
    shape_name,
    slower_than_the_pick,
    unmet_target,
    untrained_table,
)
from theseus_pl.app.search.settings import SearchSettings
from theseus_pl.app.search.space import SearchSpace, search_space
from theseus_pl.app.ship.model_card import write_model_card
from theseus_pl.deployment.record import Deployment
from theseus_pl.deployment.targets import OWN_LENGTHS, TARGETS, points_in_words, reaches
from theseus_pl.lightning.callbacks import StoppedBelowScore

log = logging.getLogger(__name__)
OUTCOME = "outcome"  # a trial's user attribute once its job ended: "measured", or why it failed
POINT = "point"  # a measured trial's user attribute: what the front needs of it
PREDECESSOR_SCORE = "predecessor_score"
UNTRAINED = "untrained"  # the study's user attribute: the shapes timed untrained (hydra.sweeper.max_latency_ms)
# The study's user attribute: the trials a stopped search was in, by number, each closed and run again (no outcome:
# the trials counted are those run to one), so that its folder is reported as ended, not as waiting for results.
CUT_SHORT = "cut_short"
SEARCHER = "searcher"  # a trial's user attribute: the search that asked for it (searcher_of), in a shared study


class Search:
    """The search the Hydra sweeper ``hydra_plugins.theseus_pl_search`` starts: asks Optuna for each batch of
    trials, launches them with the configured launcher, and tells Optuna each one's measured score and time."""

    def __init__(self, settings: Mapping[str, Any], *, hydra_context: HydraContext, task_function: TaskFunction,
                 config: DictConfig, validate: Callable[[Sequence[Sequence[str]]], None]) -> None:  # fmt: skip
        self.settings = SearchSettings.from_config(settings)
        self.config = config
        self.hydra_context = hydra_context  # its config loader composes a job's config as the launcher would
        self.validate = validate  # the sweeper's check that a batch of overrides composes
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> list[JobReturn]:
        folder = Path(self.config.hydra.sweep.dir)
        folder.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, folder / "multirun.yaml")  # as the basic sweeper does: the report reads it
        space = search_space(self.settings.params, arguments)
        study = open_study(self.settings, folder)
        searcher = searcher_of(folder)
        prunes = validates_on_dev_score(run_kind_name(self.config))  # else val/score is not on the floor's scale
        untrained = self.timed_shapes(study, space, folder) if self.settings.max_latency_ms is not None else []
        if self.settings.max_latency_ms is not None:
            write_untrained(untrained, self.settings, folder / SEARCH_FOLDER)
            if why := unmet_target(untrained, self.settings.max_latency_ms, self.settings.shape_margin):
                print(f"The search cannot start (no trial was trained): {why}", file=sys.stderr)
                raise SystemExit(2)  # as the command line's own refusals of a search end
        returns: list[JobReturn] = []
        while (left := self.settings.trials - len(counted(study))) > 0:
            asked = [study.ask(space.distributions) for _ in range(min(self.settings.parallel, left))]
            for trial in asked:
                trial.set_user_attr(SEARCHER, searcher)
            batch = [trial for trial in asked if not skipped_as_slower(study, trial, self.settings, untrained)]
            if not batch:
                continue
            stop_below = self.settings.stop_below(predecessor_score(study)) if prunes else None
            pruning = [] if stop_below is None else [f"callbacks.stop_below.below={stop_below!r}"]
            overrides = {trial.number: [*space.overrides(trial.params), *pruning] for trial in batch}
            self.validate(list(overrides.values()))
            for numbered in consecutive(batch):  # the launcher numbers a call's jobs on from its first
                launched = list(self.launcher.launch([overrides[trial.number] for trial in numbered],
                                                     initial_job_idx=numbered[0].number))  # fmt: skip
                for trial, job in zip(numbered, launched, strict=True):
                    tell(study, trial, job, self.settings.batch_size)
                returns += launched
        write_answer(study, self.settings, folder / SEARCH_FOLDER, self.references(study))
        return returns

    def timed_shapes(self, study: optuna.Study, space: SearchSpace, folder: Path) -> list[UntrainedShape]:
        """Each shape of the space (every combination of its shape keys' choices; the other keys at their first
        value) deployed and timed untrained, in this process, before any trial trains; kept in the study, so that a
        resumed search times only the shapes it had not."""
        known = [UntrainedShape(**shape) for shape in study.user_attrs.get(UNTRAINED, [])]
        shapes = space_shapes(space)
        first = {key: values[0] for key, values in space.ends().items()}
        for number, shape in enumerate(shapes, 1):
            if any(dict(timed.shape) == shape for timed in known):
                continue
            log.info("Shape %d of %d, timed untrained before any trial trains: %s", number, len(shapes),
                     shape_name(shape))  # fmt: skip
            overrides = [
                *space.overrides({**first, **shape}),
                f"paths.output_dir={folder / SEARCH_FOLDER}",
                f"deploy.batch_sizes=[{self.settings.batch_size}]",
            ]  # the serving batch's time alone
            cfg = self.hydra_context.config_loader.load_sweep_config(self.config, overrides)
            with open_dict(cfg):
                del cfg["hydra"]  # the job's config as the launcher hands it to the run
            try:
                deployment = untrained_deployment(cfg)
            except RunRefused as refused:
                print(f"The search cannot start (no trial was trained): {shape_name(shape)}: "
                      + "; ".join(refused.problems), file=sys.stderr)  # fmt: skip
                raise SystemExit(2) from None
            known.append(untrained_time(deployment, shape, self.settings.batch_size))
            study.set_user_attr(UNTRAINED, [{**vars(timed), "shape": dict(timed.shape)} for timed in known])
            log.info("%s: %.2f ms a call untrained (%s)", shape_name(shape), known[-1].ms, known[-1].target)
        return [timed for timed in known if dict(timed.shape) in shapes]

    def references(self, study: optuna.Study) -> list[ReferencePoint]:
        """The kind's reference models for the front (``references``), from its first measured trial's folder."""
        points = measured_points(study)
        if not self.settings.references or not points:
            return []
        cache_dir = Path(self.config.paths.cache_dir)
        return reference_points(run_kind_name(self.config), Path(points[0].folder), self.settings.batch_size, cache_dir)


def consecutive(trials: Sequence[optuna.Trial]) -> list[list[optuna.Trial]]:
    """The trials in runs of consecutive numbers: a launcher gives a call's jobs the numbers on from the first it is
    given, and a trial's folder is its number (``<sweep dir>/<trial number>``), so a batch with a trial pruned before
    training in its middle is launched in two calls (in one, the trial after it ran in the pruned one's folder)."""
    runs: list[list[optuna.Trial]] = []
    for trial in trials:
        if runs and trial.number == runs[-1][-1].number + 1:
            runs[-1].append(trial)
        else:
            runs.append([trial])
    return runs


def space_shapes(space: SearchSpace) -> list[dict[str, Any]]:
    """Every combination of the space's shape keys' choices (one empty shape where it searches none); the search's
    checks refuse a shape key searched over an interval where shapes are timed."""
    ends = {key: values for key, values in space.ends().items() if is_shape_key(key)}
    assert all(space.is_choice(key) for key in ends)  # refused before the search starts otherwise
    return [dict(zip(ends, values, strict=True)) for values in itertools.product(*ends.values())]


def untrained_time(deployment: Deployment, shape: dict[str, Any], batch_size: int) -> UntrainedShape:
    """A shape's time from its untrained deployment: its fastest runtime at the serving batch size on the dev rows'
    own lengths (whatever its untrained score: the time is the shape's)."""
    row = deployment.latency_ms[f"batch_{batch_size}{OWN_LENGTHS}"]
    timed = {name: ms for name, ms in row.items() if name in TARGETS}
    target = min(timed, key=timed.__getitem__)
    return UntrainedShape(shape, timed[target], target)


def searcher_of(folder: Path) -> str:
    """The search a trial belongs to, among those sharing a study (``hydra.sweeper.storage``): this machine and its
    sweep folder, as a search resumed there has them again."""
    return f"{socket.gethostname()}:{folder.resolve()}"


def open_study(settings: SearchSettings, folder: Path) -> optuna.Study:
    """The sweep's study, made or loaded; a trial left running by a killed search is closed as failed and its values
    asked again first, so that the rerun does not count it. Only this search's own: another machine's running trial in
    a shared study (``hydra.sweeper.storage``) is its to tell, and closing it ended that search with Optuna's error.
    In the sweep folder's own study, a trial asked before searches said whose it is is taken for this one's."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the run's own lines say what each trial does
    study = optuna.create_study(
        study_name=settings.study_name,
        storage=settings.storage_url(folder),
        directions=list(SearchSettings.DIRECTIONS),
        load_if_exists=True,
    )
    ours = {searcher_of(folder), *([None] if settings.storage is None else [])}
    cut_short = dict(study.user_attrs.get(CUT_SHORT, {}))
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if trial.user_attrs.get(SEARCHER) in ours:
            study.tell(trial.number, state=TrialState.FAIL)
            study.enqueue_trial(trial.params)
            cut_short[str(trial.number)] = "cut short as its search was stopped: its values run again in a later trial"
            log.warning("Trial %d was cut short by an earlier search: it runs again", trial.number)
    if cut_short != study.user_attrs.get(CUT_SHORT, {}):
        study.set_user_attr(CUT_SHORT, cut_short)
    # Seeded by how far the study got, so that a resumed search does not draw its first trials' values again.
    study.sampler = optuna.samplers.TPESampler(seed=settings.seed + len(study.trials))
    return study


def counted(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """The trials that ran to an outcome (measured, or failed as a run): those a search's ``trials`` counts."""
    return [trial for trial in study.get_trials(deepcopy=False) if OUTCOME in trial.user_attrs]


def predecessor_score(study: optuna.Study) -> float | None:
    """The predecessor's dev score as the study's measured trials told it; None before the first."""
    measured = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    return max(trial.user_attrs[PREDECESSOR_SCORE] for trial in measured) if measured else None


def skipped_as_slower(
    study: optuna.Study, trial: optuna.Trial, settings: SearchSettings, untrained: Sequence[UntrainedShape] = ()
) -> bool:
    """Whether the trial was told pruned before training: its shape, timed untrained, is over the latency target, or
    an earlier trial of its shape was timed slower than the pick so far (``shape_margin``), so it cannot be the pick.
    It counts as a trial, as one pruned half-way does."""
    why = over_the_target(trial.params, untrained, settings.max_latency_ms, settings.shape_margin)
    predecessor = predecessor_score(study)
    if why is None and predecessor is not None:
        points = measured_points(study)
        pick = fastest_within(points, predecessor - settings.max_score_drop, settings.max_latency_ms)
        why = slower_than_the_pick(trial.params, points, pick, settings.shape_margin)
    if why is None:
        return False
    trial.set_user_attr(OUTCOME, f"pruned before training: {why}")
    study.tell(trial, state=TrialState.PRUNED)
    log.info("Trial %d pruned before training: %s", trial.number, why)
    return True


def measured_points(study: optuna.Study) -> list[TrialPoint]:
    return [
        TrialPoint(**trial.user_attrs[POINT])
        for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    ]


def tell(study: optuna.Study, trial: optuna.Trial, job: JobReturn, batch_size: int) -> None:
    """Tell the study the trial's score and time, that it was pruned (stopped under the score asked of it), or that
    it failed (its run failed, was not deployed, or scored no number); neither is ever a point on the front."""
    try:
        point, predecessor = measured(trial, job, batch_size)
    except TrialPruned as pruned:
        trial.set_user_attr(OUTCOME, f"pruned: {pruned}")
        study.tell(trial, state=TrialState.PRUNED)
        log.info("Trial %d pruned: %s", trial.number, pruned)
        return
    except TrialFailed as failed:
        trial.set_user_attr(OUTCOME, str(failed))
        study.tell(trial, state=TrialState.FAIL)
        log.warning("Trial %d failed: %s", trial.number, failed)
        return
    trial.set_user_attr(OUTCOME, "measured")
    trial.set_user_attr(POINT, point_dict(point))
    trial.set_user_attr(PREDECESSOR_SCORE, predecessor)
    study.tell(trial, [point.score, point.latency_ms])
    log.info("Trial %d: %s, dev %.2f, %.2f ms a call", trial.number, label(point), point.score, point.latency_ms)


class TrialFailed(Exception):
    """A trial that gives no point: why, in a line."""


class TrialPruned(TrialFailed):
    """A trial whose run stopped under the score asked of it (``callbacks.stop_below``)."""


def measured(trial: optuna.Trial, job: JobReturn, batch_size: int) -> tuple[TrialPoint, float]:
    """The trial's point, and the predecessor's dev score, from its finished run's record."""
    if job.status != JobStatus.COMPLETED:
        try:
            job.return_value  # noqa: B018  # raises the job's own error
        except RunRefused as refused:  # values no check before the search foresaw together
            raise TrialFailed(f"its run was refused: {'; '.join(refused.problems)}") from None
        except StoppedBelowScore as stopped:
            raise TrialPruned(str(stopped)) from None
        except BaseException as error:  # the job's failure, whatever it was, fails this trial alone
            raise TrialFailed(f"its run failed ({type(error).__name__}: {error})") from None
    assert job.hydra_cfg is not None  # set by Hydra's run_job for every job it ran
    folder = Path(job.hydra_cfg.hydra.runtime.output_dir)
    record = searchable_record(folder / "results.json")
    deployment, run = record.deployment, record.searched_run()
    if deployment is None:
        raise TrialFailed(f"{folder} was not deployed: the search times deployed models (deploy.onnx=true)")
    row = f"batch_{batch_size}{OWN_LENGTHS}"
    if row not in deployment.latency_ms:
        raise TrialFailed(f"{folder} was not timed at batch {batch_size} on its own lengths ({row})")
    timed = {name: ms for name, ms in deployment.latency_ms[row].items() if name in TARGETS and _a_number(ms)}
    target = deployment.target  # the model the run ships, as its record and card say
    if target not in timed:
        raise TrialFailed(f"{folder}: its shipped model ({target}) has no time a call at batch {batch_size} ({row})")
    score = (deployment.dev_score or {}).get(target)
    predecessor = run.predecessor_score
    if not (_a_number(score) and _a_number(predecessor)):
        raise TrialFailed(f"{folder}: its dev score, or its predecessor's, is not a number")
    other = [key for key in deployment.latency_ms if key.endswith(OWN_LENGTHS) and key != row]
    throughput = deployment.latency_ms[other[-1]].get(target) if other else None
    point = TrialPoint(
        number=trial.number,
        score=score,
        latency_ms=timed[target],
        throughput_ms=throughput if _a_number(throughput) else None,
        settings=dict(trial.params),
        target=target,
        folder=str(folder),
        layers=run.layers,
        intermediate_size=run.intermediate_size,
        fastest_ms=min(timed.values()),
    )
    return point, predecessor


def _a_number(value: object) -> bool:
    """A finite number: a record keeps a NaN (a time or score not taken) as null."""
    return isinstance(value, int | float) and math.isfinite(value)


def searchable_record(path: Path) -> SearchableRecord:
    """The trial's record, of a kind whose records a search can weigh (:mod:`~theseus_pl.app.results.search_finding`);
    another kind's fails the trial."""
    record = read_run(path)
    if not isinstance(record, SearchableRecord):
        raise TrialFailed(f"{path} is a run of kind {record.kind!r}, whose record a search cannot weigh")
    return record


def point_dict(point: TrialPoint) -> dict[str, Any]:
    return {**vars(point), "settings": dict(point.settings)}


def write_answer(
    study: optuna.Study, settings: SearchSettings, output: Path, references: Sequence[ReferencePoint] = ()
) -> TrialPoint | None:
    """The front (table, plot) and the pick of every measured trial, with the ``references`` beside them, into
    ``output``; the pick, or None. A reference within the floor and faster than the pick is said in a warning: the
    answer is then not a compressed successor."""
    points = measured_points(study)
    if not points:
        log.warning("No trial was measured: no front to write")
        return None
    predecessor = predecessor_score(study)
    assert predecessor is not None  # told by every measured trial
    floor = predecessor - settings.max_score_drop
    pick = fastest_within(points, floor, settings.max_latency_ms)
    output.mkdir(parents=True, exist_ok=True)
    target = settings.max_latency_ms
    write_markdown_and_csv(front_table(points, pick, floor, references, target), output, "front")
    plot_front(points, pick, floor, output / "front.png", references, target)
    failed = [trial for trial in counted(study) if trial.state == TrialState.FAIL]
    pruned = [trial for trial in counted(study) if trial.state == TrialState.PRUNED]
    answer = {
        "study": study.study_name,
        "storage": settings.storage_url(output.parent),
        "batch_size": settings.batch_size,
        "predecessor_score": predecessor,
        "max_score_drop": settings.max_score_drop,
        "floor": floor,
        "max_latency_ms": settings.max_latency_ms,
        "trials": len(counted(study)),
        "failed": {str(trial.number): trial.user_attrs[OUTCOME] for trial in failed},
        "pruned": {str(trial.number): trial.user_attrs[OUTCOME] for trial in pruned},
        "cut_short": study.user_attrs.get(CUT_SHORT, {}),  # not counted: run again
        "front": [point_dict(point) for point in pareto_front(points)],
        "pick": point_dict(pick) if pick is not None else None,
        "references": [reference._asdict() for reference in references],
    }
    write_json(output / SEARCH_ANSWER, answer)  # strict JSON: a score that is no number (a NaN reference's) as null
    front = [FrontPoint(point.number, label(point), point.score, point.latency_ms) for point in pareto_front(points)]
    finding = None if pick is None else SearchFinding(
        study.study_name, pick.number, len(counted(study)), settings.batch_size, predecessor, settings.max_score_drop,
        floor, front,
    )  # fmt: skip
    record_the_pick(points, finding)
    if pick is None:
        scored = [point for point in points if math.isfinite(point.score)]  # a NaN score is no trial's best
        best = max(scored, key=lambda point: (point.score, -point.number), default=None)
        named = f" (the best: trial {best.number} at {best.score:.2f})" if best else " (none scored a number)"
        within = "" if target is None else f" at {target:g} ms a call or less"
        log.warning("No trial kept its dev score within %s of the predecessor's %.2f%s%s: see %s; more steps a trial, "
                    "more trials or a larger hydra.sweeper.max_score_drop may reach it",
                    points_in_words(settings.max_score_drop), predecessor, within, named,
                    output / "front.md")  # fmt: skip
    else:
        log.info("The pick: trial %d (%s), dev %.2f (floor %.2f), %.2f ms a call; its run: %s; the front: %s",
                 pick.number, label(pick), pick.score, floor, pick.latency_ms, pick.folder,
                 output / "front.md")  # fmt: skip
    for reference in references:
        if reaches(reference.score, floor) and (pick is None or reference.latency_ms < pick.latency_ms):
            log.warning("%s scores %.2f, within the floor, at %.3f ms a call: faster than any trial that reaches it. "
                        "Ship it rather than a compressed successor, or ask for a smaller hydra.sweeper.max_score_drop",
                        reference.label, reference.score, reference.latency_ms)  # fmt: skip
    return pick


def write_untrained(shapes: Sequence[UntrainedShape], settings: SearchSettings, output: Path) -> None:
    """The shapes timed untrained, fastest first, and whether each is within the latency target (``untrained.md``
    and ``.csv`` beside the front)."""
    output.mkdir(parents=True, exist_ok=True)
    write_markdown_and_csv(untrained_table(shapes, settings.max_latency_ms, settings.shape_margin), output, "untrained")


def record_the_pick(points: Sequence[TrialPoint], finding: SearchFinding | None) -> None:
    """The pick's record and card name the search (``finding``); a trial an earlier call on the folder picked, and a
    later trial displaced, no longer does. A trial whose folder was moved or deleted since is passed over."""
    for point in points:
        path = Path(point.folder) / "results.json"
        if not path.is_file():
            log.warning("Trial %d's record %s is gone: its card cannot say whether the search picked it", point.number,
                        path)  # fmt: skip
            continue
        record = searchable_record(path)
        chosen = finding if finding is not None and point.number == finding.trial else None
        if record.search != chosen:
            record.search = chosen
            write_results(path, record)
            write_model_card(Path(record.searched_run().successor_dir), record)
