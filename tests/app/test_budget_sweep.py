"""The budget sweep (when does Theseus pay off?): every method gets the same optimizer steps at each budget point,
Theseus replaces for the same share of them, and validation comes every sixth of the run."""

import pytest
from app_runs import compose_config
from hydra import compose, initialize_config_module
from results_records import a_run, plant

from theseus_pl.app.kinds.task_model.report import budget_figure, budget_table, find_runs
from theseus_pl.report import main

pytestmark = pytest.mark.quick

# Each protocol and the method it trains.
PROTOCOLS = {"fine_tuning": "fine_tuning", "kd": "kd", "theseus_constant": "theseus",
             "theseus_curriculum": "theseus", "theseus_kd": "theseus_kd"}  # fmt: skip


@pytest.mark.parametrize("experiment", ["sst2_quick", "stsb_quick"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_each_budget_point_gives_every_method_the_stated_steps_share_and_validations(experiment, protocol):
    for steps in (600, 1800, 5400):
        cfg = compose_config(f"+experiment={experiment}", "+sweep=budget", f"protocol={protocol}",
                             f"budget=steps{steps}")  # fmt: skip
        assert cfg.trainer.max_steps == cfg.budget.steps == steps
        assert cfg.schedule_steps == steps // 2  # replacing for half the run, as the quick experiments' 300 of 600
        assert cfg.trainer.val_check_interval * 6 == steps
        assert cfg.method.name == PROTOCOLS[protocol]


@pytest.mark.parametrize("protocol", ["fine_tuning", "kd", "theseus_constant", "theseus_curriculum"])
def test_point_d_is_the_grids_top_learning_rate_one_step_higher(protocol):
    """Where a method's best point sat at the top of its grid (lr 2e-4), point d doubles it and keeps the rest."""
    top, above = (compose_config("+experiment=stsb_quick", "+sweep=budget", f"protocol={protocol}",
                                 f"protocol.point={point}") for point in ("c", "d"))  # fmt: skip
    assert top.optimizer.lr == 2e-4 and above.optimizer.lr == 4e-4
    assert top.replacement == above.replacement
    with initialize_config_module("theseus_pl.conf", version_base="1.3"):
        protocol_sweep = compose(
            "train", overrides=["+experiment=stsb_quick", "+sweep=protocol"], return_hydra_config=True
        )
    assert protocol_sweep.hydra.sweeper.params["protocol.point"] == "a,b,c"  # the 45-job protocol keeps its grid


def test_the_sweep_varies_the_budget_and_the_seed_for_the_method_named():
    with initialize_config_module("theseus_pl.conf", version_base="1.3"):
        cfg = compose("train", overrides=["+experiment=sst2_quick", "+sweep=budget", "protocol=kd",
                                          "paths.output_dir=x"], return_hydra_config=True)  # fmt: skip
    assert dict(cfg.hydra.sweeper.params) == {"budget": "steps600,steps1800,steps5400", "seed": "1,2,3"}
    assert cfg.method.name == "kd" and cfg.threads == 1


def plant_budget_sweep(root, budgets=(600, 1800, 5400), lacking=()):
    """SST-2 runs of two methods at each budget and seeds 1-3 (scores rising with the budget); ``lacking``: (method,
    budget) pairs that did not run."""
    for method, base in (("fine_tuning", 80.0), ("theseus_curriculum", 78.0)):
        for steps in budgets:
            if (method, steps) in lacking:
                continue
            for seed in (1, 2, 3):
                score = base + steps / 600 + seed  # median over seeds: base + steps / 600 + 2
                settings = {"optimizer.lr": 1e-4, "trainer.max_steps": steps, "seed": seed}
                plant(root / f"{method}_{steps}_{seed}", a_run("SST-2", method, 84.0, score, settings=settings))


def test_the_report_tables_and_draws_each_methods_score_against_the_budget(tmp_path):
    plant_budget_sweep(tmp_path / "runs")
    runs, _ = find_runs([tmp_path / "runs"])
    budgets = budget_table(runs)
    fine_tuning = budgets[budgets["row"] == "fine_tuning"]
    assert list(fine_tuning["steps"]) == [600, 1800, 5400]
    assert list(fine_tuning["median"]) == [83.0, 85.0, 91.0]
    assert list(fine_tuning["min"]) == [82.0, 84.0, 90.0] and list(fine_tuning["max"]) == [84.0, 86.0, 92.0]
    figure = budget_figure("SST-2", budgets)
    assert [line.get_label() for line in figure.axes[0].lines] == ["fine_tuning", "theseus_curriculum"]
    assert list(figure.axes[0].lines[1].get_ydata()) == [81.0, 83.0, 89.0]
    assert [tick.get_text() for tick in figure.axes[0].get_xticklabels()] == ["600", "1800", "5400"]
    assert figure.axes[0].get_xticklabels(minor=True) == []  # nothing overprints the budgets

    report = main([str(tmp_path / "runs"), "--output", str(tmp_path / "out")])
    assert tmp_path / "out" / "budget_SST-2.png" in report["written"]
    assert (tmp_path / "out" / "budget.md").read_text().splitlines()[2] == (
        "| SST-2 | fine_tuning | 600 | 83.00 | 82.00 | 84.00 | 1 2 3 |  |"
    )
    assert report["warnings"] == []  # every method ran every budget


def test_a_budget_sweep_where_a_method_lacks_a_budget_is_warned_about(tmp_path):
    plant_budget_sweep(tmp_path / "runs", lacking={("theseus_curriculum", 5400)})
    report = main([str(tmp_path / "runs"), "--output", str(tmp_path / "out")])
    assert report["warnings"] == [  # the budgets of the points the table compares
        "SST-2: the methods had different step budgets (trainer.max_steps, trainer.max_epochs): fine_tuning 5400; "
        "theseus_curriculum 1800."
    ]


def test_methods_that_ran_every_budget_are_warned_about_where_the_table_compares_two(tmp_path):
    """Both ran 600 and 1,800 steps; Theseus is best at 1,800, fine-tuning at 600 (it overfits): the table compares a
    point of each budget, which checking each cell's set of budgets (the same for both) never said."""
    for method, best in (("theseus_curriculum", 1800), ("fine_tuning", 600)):
        for steps in (600, 1800):
            for seed in (1, 2, 3):
                settings = {"optimizer.lr": 1e-4, "trainer.max_steps": steps, "seed": seed}
                score = 80.0 + seed + (5 if steps == best else 0)
                plant(tmp_path / f"{method}_{steps}_{seed}", a_run("SST-2", method, 84.0, score, settings=settings))
    report = main([str(tmp_path), "--output", str(tmp_path / "out")])
    assert report["warnings"] == [
        "SST-2: the methods had different step budgets (trainer.max_steps, trainer.max_epochs): fine_tuning 600; "
        "theseus_curriculum 1800."
    ]


def test_runs_at_one_budget_write_no_budget_curves(tmp_path):
    plant_budget_sweep(tmp_path / "runs", budgets=(600,))
    report = main([str(tmp_path / "runs"), "--output", str(tmp_path / "out")])
    assert not any(path.name.startswith("budget") for path in report["written"])
