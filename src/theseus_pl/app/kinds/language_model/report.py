"""The decoder-LM runs' part of ``python -m theseus_pl.report``: the LM protocol's table and its picture.

A language-model run's ``results.json``
(:class:`~theseus_pl.app.kinds.language_model.record.LanguageModelResults`, ``kind`` ``language_model``) has no task
score: its methods are compared by held-out perplexity, which is only comparable
between runs scored on the same windows of the same predecessor. So the table groups runs by method, kept layers and
tokens trained on, and gives, over seeds, the median, min and max perplexity, with the KL divergence to the
predecessor, top-1 agreement and the decode speed-up beside it; the predecessor gets a row of its own. Where the methods
ran at more than one token budget, a second picture draws each method's score against the tokens it trained on.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from theseus_pl.app.kinds.language_model.record import LanguageModelResults
from theseus_pl.app.report.files import PREDECESSOR, write_markdown_and_csv
from theseus_pl.app.report.over_seeds import in_seed_order, spread_over_seeds
from theseus_pl.app.report.tables import settings_by_key
from theseus_pl.core.timing import BUSY_CORES

# The columns of the other held-out text (data.other_text), where the runs scored one: medians over seeds.
ADAPTED = "predecessor adapted to the text"  # the row of runs' adapted teachers (method.teacher=adapted), if any
OTHER_TEXT = {"other-text perplexity": "other_text.perplexity", "other-text KL": "other_text.kl",
              "other-text agreement %": "other_text.agreement"}  # fmt: skip


def language_model_frame(runs: list[LanguageModelResults]) -> pd.DataFrame:
    """One line per run, the record's fields flattened (``successor.perplexity``, ``speed.decode_speedup``, …), and
    its ``folder``. A field every run holds as null (a perplexity that was inf or NaN, which ``results.json`` writes
    as null) is a column of missing numbers: as None its median and rounding raised TypeError."""
    frame = pd.json_normalize([run.to_dict() for run in runs])
    unset = [column for column in frame.columns if frame[column].isna().all()]
    frame[unset] = frame[unset].astype(float)
    frame["folder"] = [str(run.folder or "") for run in runs]
    if "settings.method.alpha" in frame:  # a mixed loss (0 < method.alpha < 1) is a method of its own in the table
        alpha = frame["settings.method.alpha"]
        mixed = alpha.between(0, 1, inclusive="neither")
        frame.loc[mixed, "method"] = frame["method"] + " (alpha " + alpha.map("{:g}".format) + ")"
    return frame


def language_model_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per method, kept layers and token budget, the median, min and max held-out perplexity over seeds (none where a
    seed has none), and the medians of KL, agreement, decode speed-up and minutes a run; the predecessor first. Rows
    sorted by kept layers, then method, then tokens."""
    optional = {"speed.decode_speedup": float("nan"), "wall_seconds": float("nan"), "successor.kl": float("nan"),
                "peak_memory.cpu_mb": float("nan"), "peak_memory.gpu_mb": float("nan")}  # fmt: skip
    frame = frame.assign(**{column: value for column, value in optional.items() if column not in frame})
    if "speed.other_cores" in frame:  # a speed timed on a busy machine is not the model's
        frame.loc[frame["speed.other_cores"] > BUSY_CORES, "speed.decode_speedup"] = float("nan")
    groups = frame.groupby(["method", "successor.layers", "data.train_tokens"], sort=False)
    spread = spread_over_seeds(groups["successor.perplexity"])  # none where a seed has none
    table = pd.DataFrame({
        "median": spread["median"],
        "min": spread["min"],
        "max": spread["max"],
        "KL": groups["successor.kl"].median(),
        "agreement %": groups["successor.agreement"].median() * 100,
        "tokens trained": groups["data.train_tokens"].median().astype(int),
        "decode speed-up": groups["speed.decode_speedup"].median(),
        "minutes a run": groups["wall_seconds"].median() / 60,
        "peak memory GiB": groups["peak_memory.cpu_mb"].median() / 1024,  # the process's resident set
        "peak GPU memory GiB": groups["peak_memory.gpu_mb"].median() / 1024,  # CUDA's allocated peak
        "seeds": groups["seed"].agg(lambda seeds: " ".join(in_seed_order(seeds))),
    }).reset_index().drop(columns="data.train_tokens").rename(columns={"successor.layers": "layers"})  # fmt: skip
    predecessor = pd.DataFrame([{
        "method": PREDECESSOR, "layers": int(frame["predecessor.layers"].iloc[0]),
        "median": frame["predecessor.perplexity"].median(), "min": frame["predecessor.perplexity"].min(),
        "max": frame["predecessor.perplexity"].max(), "tokens trained": 0,
    }])  # fmt: skip
    if frame.get("successor.other_text.perplexity", pd.Series(dtype=float)).notna().any():  # data.other_text
        for column, field in OTHER_TEXT.items():
            share = 100 if column.endswith("%") else 1
            table.insert(
                table.columns.get_loc("tokens trained"),
                column,
                groups[f"successor.{field}"].median().to_numpy() * share,
            )
        predecessor["other-text perplexity"] = frame["predecessor.other_text.perplexity"].median()
    for task, metric in _harness_columns(frame):  # evaluation.lm_eval.tasks: a column per task's first metric
        column, scale = _harness_column(task, metric)
        table.insert(table.columns.get_loc("tokens trained"), column,
                     groups[f"successor.lm_eval.{task}.{metric}"].median().to_numpy() * scale)  # fmt: skip
        predecessor[column] = frame[f"predecessor.lm_eval.{task}.{metric}"].median() * scale
    if table["peak GPU memory GiB"].isna().all():  # no run on a GPU
        table = table.drop(columns="peak GPU memory GiB")
    table = table.sort_values(["layers", "method", "tokens trained"], ascending=[False, True, True], kind="stable")
    return pd.concat([predecessor, *_adapted_rows(frame, table.columns), table], ignore_index=True)[table.columns]


def _adapted_rows(frame: pd.DataFrame, columns: pd.Index) -> list[pd.DataFrame]:
    """The adapted teachers' rows, one per adaptation budget (tokens): the medians over the runs that made one. Its
    figures are the teacher's, in the successors' columns (its KL and agreement to the untouched predecessor)."""
    if "teacher.perplexity" not in frame or frame["teacher.perplexity"].isna().all():
        return []
    adapted = frame[frame["teacher.perplexity"].notna()]
    # its adaptation's tokens as recorded; in records from before they were, finetune.steps of the run's batches
    # (too many where the run accumulated batches or trained on several devices: the adaptation does neither)
    tokens = adapted["settings.finetune.steps"] * adapted["data.train_tokens"] / adapted["steps"]
    if "data.teacher_train_tokens" in adapted:
        tokens = adapted["data.teacher_train_tokens"].fillna(tokens)
    tokens = tokens.astype(int)
    rows = []
    for budget, teachers in adapted.groupby(tokens, sort=True):
        row: dict[str, object] = {
            "method": ADAPTED, "layers": int(teachers["teacher.layers"].iloc[0]),
            "median": teachers["teacher.perplexity"].median(), "min": teachers["teacher.perplexity"].min(),
            "max": teachers["teacher.perplexity"].max(), "KL": teachers["teacher.kl"].median(),
            "agreement %": teachers["teacher.agreement"].median() * 100, "tokens trained": int(budget),
        }  # fmt: skip
        for column, field in OTHER_TEXT.items():
            if column in columns and f"teacher.{field}" in teachers:
                row[column] = teachers[f"teacher.{field}"].median() * (100 if column.endswith("%") else 1)
        for task, metric in _harness_columns(frame):
            column, scale = _harness_column(task, metric)
            if f"teacher.lm_eval.{task}.{metric}" in teachers:
                row[column] = teachers[f"teacher.lm_eval.{task}.{metric}"].median() * scale
        rows.append(pd.DataFrame([row]))
    return rows


def _harness_column(task: str, metric: str) -> tuple[str, float]:
    """The table's column for an lm-eval task's metric and the factor to it: accuracies in per cent."""
    return (f"{task} {metric} %", 100) if metric.startswith("acc") else (f"{task} {metric}", 1)


def _harness_columns(frame: pd.DataFrame) -> list[tuple[str, str]]:
    """Each lm-eval task the runs scored and its first metric (``acc`` for multiple choice), in the runs' order."""
    columns: dict[str, str] = {}
    for name in frame.columns:
        parts = name.split(".")
        if len(parts) == 4 and parts[:2] == ["successor", "lm_eval"] and not parts[3].endswith("_stderr"):
            columns.setdefault(parts[2], parts[3])
    return list(columns.items())


def language_model_warnings(frame: pd.DataFrame) -> list[str]:
    """What makes the rows incomparable: different held-out windows or predecessors, a row whose runs differ in more
    than their seed, or unequal token budgets among the methods that train."""
    warnings = []
    if frame["data.eval_tokens"].nunique() > 1 or frame["predecessor.perplexity"].round(6).nunique() > 1:
        warnings.append(
            "The language-model runs were scored on different held-out tokens or predecessors: their perplexities "
            "do not compare (give every run the same model, data and data.max_eval_windows)."
        )
    if "speed.other_cores" in frame and (frame["speed.other_cores"] > BUSY_CORES).any():
        busy = frame.loc[frame["speed.other_cores"] > BUSY_CORES, "folder"]
        warnings.append(
            f"{len(busy)} run(s) timed their speed while other processes kept the machine busy: their decode "
            f"speed-ups are left out of the table ({', '.join(busy)})."
        )
    warnings += _pooled_settings(frame)
    trained = frame[frame["data.train_tokens"] > 0]  # at each depth, every method that trains at the same budgets
    budgets = trained.groupby(["successor.layers", "method"])["data.train_tokens"].agg(
        lambda tokens: "/".join(map(str, sorted(set(tokens))))
    )
    unequal = {layers for layers, methods in budgets.groupby(level=0) if methods.nunique() > 1}
    if unequal:
        named = "; ".join(f"{method} {tokens}" for (layers, method), tokens in budgets.items() if layers in unequal)
        warnings.append(f"The language-model methods trained on different numbers of tokens: {named}.")
    return warnings


# Settings only training reads: a method that trains nothing (ShortGPT's removal) ignores them.
TRAINING_ONLY = ("settings.optimizer.", "settings.trainer.", "settings.method.", "schedule")


def _pooled_settings(frame: pd.DataFrame) -> list[str]:
    """A warning for each row of :func:`language_model_table` whose runs differ in a setting other than the seed, or in
    their replacement schedule (``-m optimizer.lr=1e-4,3e-4 seed=1,2``): its median, min and max are then over two
    grid points, not over seeds. The values compare as the task-model report's do, as JSON text
    (:func:`~theseus_pl.app.report.tables.settings_by_key`): a list-valued setting is no value pandas can count, and
    ended the report in a TypeError; a setting a run lacks reads as null."""
    settings = [column for column in frame if column.startswith("settings.") and column != "settings.seed"]
    settings += ["schedule"] if "schedule" in frame else []
    warnings = []
    for (method, layers, tokens), runs in frame.groupby(["method", "successor.layers", "data.train_tokens"]):
        read = [column for column in settings if tokens or not column.startswith(TRAINING_ONLY)]
        by_key = settings_by_key(
            {column: value for column, value in run.items() if not (isinstance(value, float) and math.isnan(value))}
            for run in runs[read].to_dict("records")
        )  # a setting a run lacks is NaN in the frame: left out, it reads as null
        varied = [
            f"{column.removeprefix('settings.')} {', '.join(sorted(by_key[column].unique()))}"
            for column in by_key
            if by_key[column].nunique() > 1
        ]
        if varied:
            warnings.append(
                f"{method} ({layers} layers, {tokens} tokens) pools runs of different settings as its seeds: "
                f"{'; '.join(varied)}. Report each setting's runs apart."
            )
    return warnings


def perplexity_figure(table: pd.DataFrame) -> Any:
    """Held-out perplexity (log scale) against kept layers, a line per method with its min-max range as error bars,
    the predecessor as a dashed line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    figure, axes = plt.subplots(figsize=(6, 4))
    methods = table[table["method"] != PREDECESSOR]
    for method, points in methods.groupby("method", sort=False):
        points = points.sort_values("layers")
        spread = [points["median"] - points["min"], points["max"] - points["median"]]
        axes.errorbar(points["layers"], points["median"], yerr=spread, marker="o", capsize=3, label=method)
    predecessor = table[table["method"] == PREDECESSOR].iloc[0]
    axes.axhline(predecessor["median"], color="grey", linestyle="--",
                 label=f"predecessor ({predecessor['layers']} layers)")  # fmt: skip
    axes.set(yscale="log", xlabel="kept layers", ylabel="held-out perplexity",
             title="perplexity against kept layers")  # fmt: skip
    axes.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))  # whole layers: no 14.2, 14.4, ...
    axes.legend(fontsize=7)
    return figure


def tokens_figure(table: pd.DataFrame) -> Any | None:
    """Where a method that trains ran at more than one token budget, their score against the tokens trained on (log
    scales), a line per method (and depth, where there are several), the predecessor as a dashed line; None where there
    is one budget. The score is the other held-out text's perplexity where the runs scored one (what a successor keeps
    beyond the text it trained on, which in-domain perplexity rewards drifting from), else the held-out perplexity."""
    trained = table[table["tokens trained"] > 0]
    if not trained.groupby(["method", "layers"])["tokens trained"].nunique().max() >= 2:  # NaN where none trained
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    other = "other-text perplexity" in table and trained["other-text perplexity"].notna().any()
    score, axis_label = ("other-text perplexity", "other held-out text's perplexity") if other else (
        "median", "held-out perplexity")  # fmt: skip
    figure, axes = plt.subplots(figsize=(6, 4))
    depths = trained.loc[trained["method"] != ADAPTED, "layers"].nunique()  # the adapted teacher keeps every layer
    for (method, layers), points in trained.groupby(["method", "layers"], sort=False):
        points = points.sort_values("tokens trained")
        label = method if depths == 1 else f"{method} ({layers} layers)"
        axes.plot(points["tokens trained"], points[score], marker="o", label=label)
    predecessor = table[table["method"] == PREDECESSOR].iloc[0]
    axes.axhline(predecessor[score], color="grey", linestyle="--",
                 label=f"predecessor ({predecessor['layers']} layers)")  # fmt: skip
    axes.set(xscale="log", yscale="log", xlabel="tokens trained", ylabel=axis_label,
             title=f"{axis_label}\nagainst tokens trained (medians over seeds)")  # fmt: skip
    axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1))  # many methods: beside the lines
    return figure


def write_language_model_report(runs: list[LanguageModelResults], output: Path) -> tuple[list[Path], list[str]]:
    """``lm_table.md``/``.csv``, ``lm_runs.md``/``.csv``, ``perplexity_vs_layers.png`` and, where the methods ran
    at several token budgets, ``score_vs_tokens.png`` from the runs' records; the files written and the comparison's
    warnings."""
    import matplotlib.pyplot as plt

    frame = language_model_frame(runs)
    table = language_model_table(frame)
    runs = frame[["method", "successor.layers", "data.train_tokens", "seed", "successor.perplexity", "successor.kl",
                  "folder"]]  # fmt: skip
    written = write_markdown_and_csv(table, output, "lm_table") + write_markdown_and_csv(
        runs.rename(columns={"successor.layers": "layers", "data.train_tokens": "tokens trained",
                             "successor.perplexity": "perplexity", "successor.kl": "KL"})
        .sort_values(["method", "layers", "tokens trained", "seed"]),
        output, "lm_runs",
    )  # fmt: skip
    figures = {"perplexity_vs_layers.png": perplexity_figure(table), "score_vs_tokens.png": tokens_figure(table)}
    for name, figure in figures.items():
        if figure is not None:
            written.append(output / name)
            figure.savefig(written[-1], dpi=120, bbox_inches="tight")
            plt.close(figure)
    return written, language_model_warnings(frame)
