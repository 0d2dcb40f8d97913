"""The W&B dashboard as code: the workspace and the sweep report are built offline from planted runs, and saved only
where W&B is online."""

from dataclasses import replace

import pytest
import wandb_workspaces.reports.v2 as wr
import wandb_workspaces.workspaces as ws
from results_records import V2_LANGUAGE_MODEL, a_run, an_embedding_run, plant, plant_new_kind

from theseus_pl import dashboard
from theseus_pl.app.config.kinds import EMBEDDING_MODEL, LANGUAGE_MODEL, TASK_MODEL
from theseus_pl.app.kinds.task_model.report import find_runs
from theseus_pl.app.results.envelope import UnknownKind, WandbLink, write_results
from theseus_pl.app.results.reading import read_run
from theseus_pl.app.tracking.dashboard import sweep_report, workspace

pytestmark = pytest.mark.quick


def panels_of(section):
    return {
        (type(panel).__name__, getattr(panel, "title", None) or panel.table_name): panel for panel in section.panels
    }


def planted_sweep(folder, group="sweep_2026", methods=("theseus_curriculum", "kd")):
    """Two methods x two learning rates x two seeds, each run logged to W&B in ``group``."""
    for method in methods:
        for lr in (1e-4, 2e-4):
            for seed in (1, 2):
                link = WandbLink(id=f"{method}{lr}{seed}", name=method, group=group, url=None, dir="wandb")
                settings = {"optimizer.lr": lr, "seed": seed, "replacement.kind": "curriculum"}
                record = a_run("SST-2", method, 84.0, 80.0 + seed + 1e4 * lr, settings=settings, wandb=link)
                plant(folder / f"{method}-{lr}-{seed}", record)
    return folder


def test_the_workspace_has_the_training_replacing_tradeoff_and_card_sections():
    view = workspace("team", "proj", group="sweep_2026", swept=["optimizer.lr", "seed"])
    sections = {section.name: panels_of(section) for section in view.sections}
    assert list(sections) == ["Dev score during training", "Replacing", "Score against speed-up", "Compression card"]

    score = sections["Dev score during training"][("LinePlot", "Dev score by method")]
    assert (score.x, score.y, score.groupby) == ("trainer/global_step", ["val/score"], "JobType")
    replacing = {panel.y[0] for panel in sections["Replacing"].values()}
    assert replacing == {"train/p", "train/replaced_modules", "train/phase"}  # the rate and the phase switch
    tradeoff = sections["Score against speed-up"]
    scatter = tradeoff[("ScatterPlot", "Successor score against speed-up")]
    assert (scatter.x.name, scatter.y.name) == ("final/speedup", "final/successor_score")
    assert tradeoff[("BarPlot", "Successor score by method")].groupby == "JobType"
    shape = tradeoff[("ParallelCoordinatesPlot", "Shape, speed-up and score")]
    assert [column.metric.name for column in shape.columns][:3] == [
        "theseus.successor_layers", "theseus.successor.hidden_size", "theseus.successor.intermediate_size",
    ]  # fmt: skip
    assert ("WeavePanelSummaryTable", "score_vs_speedup") in tradeoff
    assert ("WeavePanelSummaryTable", "compression_card") in sections["Compression card"]

    runs = view.runset_settings
    assert "sweep_2026" in str(runs.filters)
    assert runs.pinned_columns[-2:] == ["config:optimizer.value.lr", "config:seed.value"]  # the swept values
    assert {"run:jobType", "summary:final/successor_score", "summary:final/speedup"} <= set(runs.pinned_columns)


def test_the_workspace_serialises_for_w_and_b_without_a_network():
    saved_form = workspace("team", "proj")._to_model().model_dump_json()
    assert "trainer/global_step" in saved_form and "score_vs_speedup" in saved_form


def test_the_sweep_report_holds_the_best_settings_table_and_the_groups_plots(tmp_path):
    sweep = planted_sweep(tmp_path / "sweep_2026")
    report = sweep_report("team", "proj", sweep, find_runs([sweep])[0])
    markdown = [block.text for block in report.blocks if isinstance(block, wr.MarkdownBlock)]
    table, best = markdown
    assert table.splitlines()[0] == "| method | SST-2 | macro |"
    assert "| kd | 83.50 | 83.50 |" in table  # lr 2e-4: 81 + 2 and 82 + 2 over the seeds, median 83.5
    assert best.splitlines()[0] == "| task | method | median | min | max | seeds | grid point |"
    assert "optimizer.lr=0.0002" in best
    grids = [block for block in report.blocks if isinstance(block, wr.PanelGrid)]
    assert grids and all("sweep_2026" in str(grid.runsets[0].filters) for grid in grids)
    titles = {panel.title for grid in grids for panel in grid.panels}
    assert {"Dev score by method", "Replacing rate p", "Successor score against speed-up"} <= titles


def test_a_sweep_without_w_and_b_runs_gets_a_report_of_tables_only(tmp_path):
    sweep = tmp_path / "csv_only"
    plant(sweep / "0", a_run("RTE", "kd", 80.0, 70.0))
    report = dashboard.main(["--entity", "team", "--project", "proj", "--report", str(sweep), "--dry-run"])
    assert not [block for block in report.blocks if isinstance(block, wr.PanelGrid)]


def test_the_sweep_report_says_what_the_local_report_warns_of_beside_its_tables(tmp_path):
    """It carried the tables alone: rows the local report warns are no fair comparison read as one in W&B."""
    sweep = tmp_path / "sweep"
    plant(sweep / "0", a_run("RTE", "kd", 80.0, 70.0, settings={"seed": 1, "trainer.max_steps": 600}))
    plant(sweep / "1", a_run("RTE", "theseus_curriculum", 80.0, 72.0, settings={"seed": 1, "trainer.max_steps": 750}))
    report = sweep_report("team", "proj", sweep, find_runs([sweep])[0])
    (warned,) = [block.text for block in report.blocks if isinstance(block, wr.MarkdownBlock)][2:]
    assert warned == (
        "- RTE: the methods had different step budgets (trainer.max_steps, trainer.max_epochs): kd 600; "
        "theseus_curriculum 750."
    )


@pytest.mark.parametrize(
    ("given", "named"),
    [
        (["--sweep", "{sweep}"], "--sweep"),
        (["--group", "other"], "--group"),
        (["--name", "mine"], "--name"),
        (["--name", "theseus_pl", "--group", "sweep_2026"], "--group, --name"),  # the default's value spelled out too
    ],
)
def test_the_options_that_pick_a_workspace_view_are_refused_with_report(given, named, tmp_path, capsys):
    """--report plots the runs' own groups under its title: these were read for a workspace view only, and dropped."""
    sweep = planted_sweep(tmp_path / "sweep_2026")
    given = [value.format(sweep=sweep) for value in given]
    with pytest.raises(SystemExit) as stopped:
        dashboard.main(["--entity", "team", "--project", "proj", "--report", str(sweep), *given, "--dry-run"])
    assert stopped.value.code == 2
    assert f"error: {named}: for a workspace view; --report writes a report of the runs under its SWEEP_DIR" in (
        capsys.readouterr().err
    )


def test_offline_the_command_says_what_it_would_create_and_saves_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setattr(dashboard, "save", lambda *_: pytest.fail("saved while offline"))
    sweep = planted_sweep(tmp_path / "sweep_2026")
    view = dashboard.main(["--entity", "team", "--project", "proj", "--sweep", str(sweep)])
    out = capsys.readouterr().out
    assert out.startswith("Not saved (W&B is not online here")
    assert "Workspace view 'theseus_pl' in team/proj" in out and "section 'Replacing'" in out
    assert "config:optimizer.value.lr" in out and "config:seed.value" in out
    assert "config:replacement.value.kind" not in view.runset_settings.pinned_columns  # not varied
    assert "sweep_2026" in str(view.runset_settings.filters)  # the group from the runs' results


def test_online_the_workspace_is_saved_or_the_given_view_updated(monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "online")
    saved = []
    monkeypatch.setattr(dashboard, "save", lambda item, url: saved.append((item, url)))
    dashboard.main(["--entity", "team", "--project", "proj", "--view-url", "https://wandb.ai/team/proj?nw=abc"])
    ((item, url),) = saved
    assert isinstance(item, ws.Workspace) and url == "https://wandb.ai/team/proj?nw=abc"


def test_what_w_and_b_refuses_while_saving_is_said_in_one_line(monkeypatch, capsys):
    monkeypatch.setenv("WANDB_MODE", "online")

    def refused(item, url):
        raise ValueError("no view nw=abc in team/proj")

    monkeypatch.setattr(dashboard, "save", refused)
    with pytest.raises(SystemExit) as stopped:
        dashboard.main(["--entity", "team", "--project", "proj", "--view-url", "https://wandb.ai/team/proj?nw=abc"])
    assert stopped.value.code == 2
    assert (
        capsys.readouterr()
        .err.splitlines()[-1]
        .endswith("error: W&B did not save it: ValueError: no view nw=abc in team/proj")
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--project", "p"], "the following arguments are required: --entity"),
        (["--entity", "e"], "the following arguments are required: --project"),
        (["--entity", "e", "--project", "p", "--report", "{empty}"], "No results.json under"),
        # W&B's own parser raised on these, after the workspace was built
        (["--entity", "e", "--project", "p", "--view-url", "abc"], "--view-url abc is no saved workspace view: give"),
        (["--entity", "e", "--project", "p", "--view-url", "https://wandb.ai/e/p/workspace?nw=x"],
         "no saved workspace"),
        (["--entity", "e", "--project", "p", "--view-url", "https://wandb.ai/e/q?nw=x"],
         "--view-url https://wandb.ai/e/q?nw=x is a view of e/q, not of --entity e --project p."),
        (["--entity", "e", "--project", "p", "--view-url", "https://wandb.ai/e/p?nw=x", "--report", "{empty}"],
         "--view-url updates a saved workspace view; --report writes a report. Give one of them."),
    ],
)  # fmt: skip
def test_bad_input_is_refused_with_the_reason(arguments, message, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    arguments = [argument.format(empty=tmp_path / "empty") for argument in arguments]
    with pytest.raises(SystemExit) as stopped:
        dashboard.main(arguments)
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err


def test_a_sweep_over_several_groups_needs_one_named(tmp_path, capsys):
    planted_sweep(tmp_path / "both" / "a", group="first", methods=["kd"])
    planted_sweep(tmp_path / "both" / "b", group="second", methods=["kd"])
    with pytest.raises(SystemExit):
        dashboard.main(["--entity", "e", "--project", "p", "--sweep", str(tmp_path / "both"), "--dry-run"])
    assert "several W&B groups (first, second): pick one with --group" in capsys.readouterr().err


def planted_lm_sweep(folder, group="lm_2026"):
    """Two decoder methods x two seeds, each logged to W&B in ``group``."""
    lm_run = read_run(V2_LANGUAGE_MODEL)
    for method, perplexity in (("lm_theseus_curriculum", 38.0), ("shortgpt_healed", 33.0)):
        for seed in (1, 2):
            link = WandbLink(id=f"{method}{seed}", name=method, group=group, url=None, dir="wandb")
            successor = replace(lm_run.successor, perplexity=perplexity + seed)
            record = replace(lm_run, method=method, seed=seed, successor=successor, wandb=link,
                             settings={"seed": seed, "method": method})  # fmt: skip
            (folder / f"{method}-{seed}").mkdir(parents=True)
            write_results(folder / f"{method}-{seed}" / "results.json", record)
    return folder


def test_the_workspace_of_decoder_lm_runs_shows_perplexity_speed_and_the_sample(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    sweep = planted_lm_sweep(tmp_path / "lm_2026")
    view = dashboard.main(["--entity", "team", "--project", "proj", "--sweep", str(sweep), "--dry-run"])
    sections = {section.name: panels_of(section) for section in view.sections}
    assert list(sections) == ["Decoder LMs: held-out perplexity during training", "Replacing",
                              "Decoder LMs: perplexity against decode speed-up",
                              "Decoder LMs: shipped as GGUF for llama.cpp"]  # fmt: skip
    perplexity = sections["Decoder LMs: held-out perplexity during training"][
        ("LinePlot", "Held-out perplexity by method")
    ]
    assert (perplexity.x, perplexity.y, perplexity.groupby) == ("trainer/global_step", ["val/perplexity"], "JobType")
    assert {panel.y[0] for panel in sections["Replacing"].values()} >= {"train/p"}
    tradeoff = sections["Decoder LMs: perplexity against decode speed-up"]
    scatter = tradeoff[("ScatterPlot", "Successor perplexity against decode speed-up")]
    assert (scatter.x.name, scatter.y.name) == ("final/decode_speedup", "final/successor_perplexity")
    assert ("WeavePanelSummaryTable", "generation_sample") in tradeoff
    gguf = sections["Decoder LMs: shipped as GGUF for llama.cpp"]
    speedups = gguf[("BarPlot", "llama.cpp decode speed-up by GGUF type")]
    # the keys the run's summary writes for the types a run ships by default
    assert {"final/gguf_f16_llama_cpp_decode_speedup", "final/gguf_q8_0_llama_cpp_decode_speedup"} <= set(
        speedups.metrics
    )
    assert (
        "final/gguf_q8_0_llama_cpp_successor_perplexity"
        in gguf[("BarPlot", "Perplexity in llama.cpp by GGUF type")].metrics
    )
    assert "summary:final/successor_perplexity" in view.runset_settings.pinned_columns
    assert "lm_2026" in str(view.runset_settings.filters)
    both = workspace("team", "proj", kinds=("task_model", LANGUAGE_MODEL))
    assert [section.name for section in both.sections][:2] == ["Dev score during training", "Replacing"]
    assert len(both.sections) == 7  # the encoders' four, the decoders' three: one Replacing section serves both


def test_the_sweep_report_of_decoder_lm_runs_holds_the_lm_table_and_their_plots(tmp_path):
    sweep = planted_lm_sweep(tmp_path / "lm_2026")
    report = dashboard.main(["--entity", "team", "--project", "proj", "--report", str(sweep), "--dry-run"])
    (table,) = [block.text for block in report.blocks if isinstance(block, wr.MarkdownBlock)]
    assert table.splitlines()[0].startswith("| method | layers |")
    assert "shortgpt_healed" in table and "lm_theseus_curriculum" in table
    titles = {panel.title for block in report.blocks if isinstance(block, wr.PanelGrid) for panel in block.panels}
    assert {"Held-out perplexity by method", "Successor perplexity against decode speed-up"} <= titles


def planted_embedding_sweep(folder, group="emb_2026"):
    """Two sentence-embedding methods x two seeds, each logged to W&B in ``group``."""
    for method, sts in (("embedding_theseus", 78.0), ("embedding_truncation", 70.0)):
        for seed in (1, 2):
            link = WandbLink(id=f"{method}{seed}", name=method, group=group, url=None, dir="wandb")
            record = an_embedding_run(method, sts + seed, seed=seed, wandb=link, settings={"seed": seed})
            plant(folder / f"{method}-{seed}", record)
    return folder


def test_sentence_embedding_runs_get_workspace_sections_and_a_report_table_of_their_own(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    sweep = planted_embedding_sweep(tmp_path / "emb_2026")
    view = dashboard.main(["--entity", "team", "--project", "proj", "--sweep", str(sweep), "--dry-run"])
    sections = {section.name: panels_of(section) for section in view.sections}
    assert list(sections) == ["Sentence embeddings: held-out cosine to the teacher during training", "Replacing",
                              "Sentence embeddings: STS-B against speed-up"]  # fmt: skip
    cosine = sections["Sentence embeddings: held-out cosine to the teacher during training"][
        ("LinePlot", "Held-out cosine to the teacher by method")
    ]
    assert (cosine.x, cosine.y, cosine.groupby) == ("trainer/global_step", ["val/cosine"], "JobType")
    scatter = sections["Sentence embeddings: STS-B against speed-up"][
        ("ScatterPlot", "Successor STS-B against batch-1 speed-up")
    ]
    summary = an_embedding_run().summary()  # the keys the run's summary writes
    assert scatter.x.name in summary and scatter.y.name in summary
    pinned = view.runset_settings.pinned_columns
    assert {column.removeprefix("summary:") for column in pinned if column.startswith("summary:")} <= set(summary)
    (order,) = view.runset_settings.order
    assert (order.item.name, order.ascending) == ("final/successor_sts", False)  # the best STS-B first
    report = dashboard.main(["--entity", "team", "--project", "proj", "--report", str(sweep), "--dry-run"])
    (table,) = [block.text for block in report.blocks if isinstance(block, wr.MarkdownBlock)]
    header = "| method | seed | steps | layers | kept | STS-B predecessor | STS-B successor |"
    assert table.splitlines()[0].startswith(header)
    assert "| embedding_truncation | 2 | 500 | 3 | 3 4 5 | 82.00 | 72.00 |" in table
    titles = {panel.title for block in report.blocks if isinstance(block, wr.PanelGrid) for panel in block.panels}
    assert {"Held-out cosine to the teacher by method", "Successor STS-B by method"} <= titles
    every = workspace("team", "proj", kinds=(TASK_MODEL, LANGUAGE_MODEL, EMBEDDING_MODEL))
    assert [section.name for section in every.sections].count("Replacing") == 1  # one serves every kind


def test_a_kind_the_workspace_has_no_sections_for_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    refusal = (
        "The dashboard has no sections for runs of kind 'sentence_embedding'; it knows runs of kind 'task_model', "
        "'language_model', 'embedding_model' only."
    )
    with pytest.raises(UnknownKind, match="^" + refusal + "$"):
        workspace("team", "proj", kinds=(TASK_MODEL, "sentence_embedding"))
    plant_new_kind(tmp_path / "runs" / "new", monkeypatch)  # a kind the reader of files knows and no reader of records
    with pytest.raises(SystemExit) as stopped:
        dashboard.main(["--entity", "e", "--project", "p", "--sweep", str(tmp_path / "runs"), "--dry-run"])
    assert stopped.value.code == 2 and capsys.readouterr().err.splitlines()[-1].endswith(refusal)
