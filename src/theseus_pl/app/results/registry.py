"""The kinds of run, each registered once: what differs between a task model, a decoder LM and a sentence-embedding
model (its run, its record, its card, its report tables, how it ships) is one :class:`Kind`, and every reader asks
:func:`kind_named` or :func:`kind_of` for it instead of keeping a table of its own.

A kind is registered by :func:`register_kind`, as :func:`~theseus_pl.core.families.register_family` registers a model
family: the three built in register themselves in :mod:`theseus_pl.app.kinds`, which is imported by its name the first
time a kind is looked up. The lookup sits in this low wing so that the results reader, the card writer, the report
and deploy can all ask it; the kinds' own modules sit above every wing they take parts from, so the import arrows
still run down only, and the one import by name here is what joins them.

A kind another package ships is found by its entry point in the ``theseus_pl.kinds`` group (its ``pyproject.toml``:
``[project.entry-points."theseus_pl.kinds"] text_scorer = "my_package.kind:KIND"``), loaded after the built-in ones:
installed, its runs are read, checked, run, reported and published by every command, ``python -m theseus_pl``'s
included, without an import of it anywhere. An entry point that names a module registers what the module's import
registers; one that cannot be loaded, or names a kind registered already, is named in a warning and passed over.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from theseus_pl.app.config.schema import RunConfig
from theseus_pl.app.results.envelope import RunRecord

if TYPE_CHECKING:
    from huggingface_hub import ModelCard

    from theseus_pl.deployment.record import Deployment, DeploySettings

log = logging.getLogger(__name__)

BUILT_IN = "theseus_pl.app.kinds"  # the module that registers the kinds theseus_pl ships
ENTRY_POINTS = "theseus_pl.kinds"  # the entry-point group of the kinds other packages ship
R = TypeVar("R", bound=RunRecord)


@dataclass(frozen=True)
class ReportPart:
    """What a kind's report tables wrote into the report's folder: the files, the warnings about its runs (a row
    short of a seed, unequal budgets), the table printed to the console (None: nothing printed) and the values the
    report returns to its caller (the task models': their table, by row and task)."""

    written: list[Path]
    warnings: list[str]
    shown: Path | None
    values: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Deployer:
    """How ``python -m theseus_pl.deploy`` ships a finished run of a kind to ONNX (and OpenVINO): the deployment
    itself, and the dry run's plan of it (both given the run's folder, the settings and a GLUE folder that replaces
    the one the run read, or None)."""

    deploy: Callable[[Path, DeploySettings, str | None], Deployment]
    plan: Callable[[Path, DeploySettings, str | None], list[str]]


@dataclass(frozen=True)
class Kind(Generic[R]):
    """Everything a kind of run brings, by the name its config (``data.kind``) and its ``results.json`` (``kind``)
    give it; typed by its record, so that each part receives its own kind's record. A part left None is a thing the
    kind does not do: each reader refuses its runs in one line naming the kinds that do (a kind under construction
    may register its record alone, and have its runs read and listed)."""

    name: str
    record: type[R]  # its results.json, read and written
    # Its run for the one run skeleton (theseus_pl.app.run.pipeline), built from the config and the checked settings:
    # a RunKind, which sits above this wing (hence Any).
    run: Callable[[Any, Any], Any] | None = None
    # The settings its run reads, typed (theseus_pl.app.config.schema): the groups every kind shares and its data.
    config: type[RunConfig] = RunConfig
    card: Callable[[R, str | None], ModelCard] | None = None  # its successor's card; the hub id once published
    report: Callable[[list[R], str, Path], ReportPart] | None = None  # its tables: the runs, --rows, the folder
    # Its part of the W&B workspace and sweep report: a function giving its theseus_pl.app.tracking.dashboard.Dashboard
    # (above this wing), called as a view is built: W&B's workspace library is imported then, not by every run.
    dashboard: Callable[[], Any] | None = None
    # What its successor folder lacks, beyond a tokenizer, for its users to load it (publish refuses to send it so).
    missing_parts: Callable[[Path], list[str]] | None = None
    deployer: Deployer | None = None  # None: deploy refuses its runs, saying how they ship (shipped_as)
    shipped_as: str = ""  # how its successor ships instead of deploy's ONNX ({successor}: the run's successor/)
    without_gguf: str = ""  # what deploy --gguf's refusal of its runs adds: how its successor ships instead
    # What deploy's refusal of its run's folder without .hydra/config.yaml (its dev set unknown) says to do instead;
    # empty: put that config back. A task model's successor deploys alone with --task; another kind's may not.
    without_config: str = ""
    # What it refuses of a method's options (config, method, Theseus settings -> problems): theseus_pl.app.checks'
    # classes, above this wing (hence Any); None: nothing beyond the rules every run shares.
    method_problems: Callable[[Any, Any, Any], list[str]] | None = None
    # What it compresses, in the words a refusal of another kind's method uses ("method=X compresses ...").
    described: str = ""
    # Which methods compress it, for the refusal of a method that does not ("on ... use ...").
    methods_hint: str = ""
    # Why report's --rows names something its runs lack (its runs, --rows -> the problem, or None): a kind whose
    # tables group runs by --rows; None: its tables take no --rows, and a --rows but the default over its runs and
    # other such kinds' alone is refused (the report's tables.unknown_rows).
    unknown_rows: Callable[[list[R], str], str | None] | None = None
    # Models a search of its runs puts on its front beside the trials, never a trial nor the pick (a measured trial's
    # run folder, the serving batch size, the cache folder -> search_finding.ReferencePoint's): a sentence-embedding
    # search's model2vec static model of the same predecessor.
    search_references: Callable[[Path, int, Path], list[Any]] | None = None
    # The +search= option written for its runs (conf/search/: its space, and the deployment every trial needs);
    # empty: none. Another kind's option is refused on its runs in one line naming this one.
    search_option: str = ""


_KINDS: dict[str, Kind[Any]] = {}
_loaded = False


def register_kind(kind: Kind[R]) -> Kind[R]:
    """Teach every reader of runs (the run skeleton, ``results.json``, the card, the report, deploy) a kind of run;
    replaces what was registered under its name. Returns it, so that a module can keep it by name."""
    if kind.record.kind != kind.name:
        record = kind.record
        raise ValueError(f"The record {record.__name__} says kind {record.kind!r}; the kind is {kind.name!r}.")
    _KINDS[kind.name] = kind
    return kind


def registered_kinds() -> dict[str, Kind[Any]]:
    """Every kind registered, the built-in ones first, in the order they were registered (the report's order)."""
    global _loaded
    if not _loaded:
        _loaded = True  # before the imports, which register through register_kind
        importlib.import_module(BUILT_IN)
        _register_installed_kinds()
    return dict(_KINDS)


def _register_installed_kinds() -> None:
    """Each kind an installed package declares in the ``theseus_pl.kinds`` entry-point group: a :class:`Kind`
    registered, a module imported (its import registers). A failing one is named and passed over: one broken
    package must not stop every command from reading the other kinds' runs."""
    for entry in importlib.metadata.entry_points(group=ENTRY_POINTS):
        where = f"{entry.name} = {entry.value}" + (f" (from {entry.dist.name})" if entry.dist else "")
        try:
            loaded = entry.load()
            if isinstance(loaded, Kind) and loaded.name in _KINDS:  # another package's kind never replaces one
                raise ValueError(f"it names the kind {loaded.name!r}, registered already")
            if isinstance(loaded, Kind):
                register_kind(loaded)
            elif not isinstance(loaded, ModuleType):
                raise TypeError(f"it is a {type(loaded).__name__}, not a Kind or a module that registers one")
        except Exception as error:  # any failure of another package's code: named, passed over
            log.warning("The kind entry point %s was not loaded: %s: %s", where, type(error).__name__, error)


def kind_named(name: str) -> Kind[Any] | None:
    """The kind registered under ``name``; None for a name nobody registered."""
    return registered_kinds().get(name)


def parts(part: str) -> dict[str, Any]:
    """Each registered kind's ``part`` (``"record"``, ``"card"``, ``"report"``, ...) by the kind's name, for the
    kinds that have one, in the registry's order: what a reader hands
    :func:`~theseus_pl.app.results.envelope.for_kind` or :func:`~theseus_pl.app.results.envelope.by_kind`, which
    refuse a record of any other kind in one line naming these."""
    return {name: value for name, kind in registered_kinds().items() if (value := getattr(kind, part)) is not None}
