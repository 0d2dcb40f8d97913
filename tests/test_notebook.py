"""The analysis notebook is stored without outputs and runs on the results of a sweep."""

import json
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from results_records import a_run, an_embedding_run, plant

from theseus_pl.app.results.envelope import WandbLink

NOTEBOOK = Path(__file__).parents[1] / "notebooks" / "analysis.ipynb"

pytestmark = pytest.mark.slow


def test_notebook_is_stored_without_outputs():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    assert all(
        not cell.get("outputs") and not cell.get("execution_count")
        for cell in notebook.cells
        if cell.cell_type == "code"
    )


def test_notebook_executes_on_sweep_results(tmp_path, monkeypatch):
    for job, (method, score) in enumerate([("theseus_curriculum", 71.0), ("theseus_constant", 69.5), ("kd", 66.0)]):
        folder = tmp_path / "multirun" / str(job)
        (folder / "csv").mkdir(parents=True)
        link = WandbLink(id=f"x{job}", name=f"RTE {method} p=0.5", group=None, url=None, dir=str(folder / "wandb"))
        plant(folder, a_run("RTE", method, 75.0, score, speedup=2.0, schedule=f"S{job}", wandb=link,
                            settings={"replacement.p": 0.5, "seed": 1}))  # fmt: skip
        (folder / "csv" / "metrics.csv").write_text("step,train/p\n0,0.3\n1,0.6\n2,1.0\n")
    monkeypatch.setenv("THESEUS_RESULTS", str(tmp_path / "multirun"))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=300, resources={"metadata": {"path": str(tmp_path)}}).execute()
    text = json.dumps([cell.get("outputs", []) for cell in notebook.cells])
    assert "3 finished runs" in text
    assert "theseus_curriculum" in text and "71.0" in text
    assert "RTE kd p=0.5" in text  # each run's W&B name beside it
    assert "image/png" in text
    assert (tmp_path / "report_plots" / "p_over_steps.png").is_file()


def test_notebook_shows_every_kind_of_run(tmp_path, monkeypatch):
    """A folder of sentence-embedding runs alone: no task-model section fails for want of task runs, and the
    embedding table shows each run."""
    for seed, score in ((1, 78.5), (2, 79.25)):
        plant(tmp_path / "multirun" / str(seed), an_embedding_run(successor_sts=score, seed=seed))
    monkeypatch.setenv("THESEUS_RESULTS", str(tmp_path / "multirun"))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=300, resources={"metadata": {"path": str(tmp_path)}}).execute()
    text = json.dumps([cell.get("outputs", []) for cell in notebook.cells])
    assert "2 finished runs" in text and "2 embedding_model" in text
    assert "79.25" in text and "embedding_theseus" in text
