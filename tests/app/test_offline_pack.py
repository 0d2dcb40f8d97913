"""The paper's grid on a GPU node without network: the pack written here, its pieces checked, joined, unpacked and
installed by unpack.sh alone, and the grid run from the installed wheel, two multiruns side by side, into the
report. In miniature, on the CPU: a tiny model, tiny RTE, two replacing steps."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from command_runs import run_command, seed_machine_bf16
from conftest import make_tiny_rte_glue_dir, save_tiny_base
from safetensors.torch import load_file

from theseus_pl.app.run import paper_grid
from theseus_pl.app.run.paper_grid import MAX_STEPS, grid_named, multirun_commands
from theseus_pl.app.ship.offline_pack import cut_into_pieces, half_precision_copy
from theseus_pl.offline import main

pytestmark = pytest.mark.quick

PROJECT = Path(__file__).resolve().parents[2]


def test_the_weights_travel_in_half_precision(tiny_base: Path, tmp_path: Path) -> None:
    half_precision_copy(tiny_base, tmp_path / "half")
    original, halved = load_file(tiny_base / "model.safetensors"), load_file(tmp_path / "half" / "model.safetensors")
    assert halved.keys() == original.keys()
    assert {tensor.dtype for tensor in halved.values()} == {torch.float16}
    assert all(torch.allclose(halved[name].float(), original[name], atol=1e-3, rtol=1e-3) for name in original)
    assert (tmp_path / "half" / "tokenizer.json").read_text() == (tiny_base / "tokenizer.json").read_text()


def test_pieces_are_cut_to_size_and_a_damaged_one_stops_unpacking(tmp_path: Path) -> None:
    staging = tmp_path / "staging"
    (staging / "glue").mkdir(parents=True)
    (staging / "glue" / "data.bin").write_bytes(os.urandom(300_000))
    (staging / "wheels").mkdir()
    pieces = cut_into_pieces(staging, tmp_path, 100_000)
    assert len(pieces) == 4 and all(piece.stat().st_size <= 100_000 for piece in pieces)
    env = {**os.environ, "PIP_TARGET": str(tmp_path / "site")}
    unpack = ["bash", str(tmp_path / "unpack.sh"), str(tmp_path / "out")]
    damaged = bytearray(pieces[1].read_bytes())
    damaged[10] ^= 1
    pieces[1].write_bytes(bytes(damaged))
    done = subprocess.run(unpack, capture_output=True, text=True, env=env, check=False)
    assert done.returncode != 0 and "pack.tar.001: FAILED" in done.stdout + done.stderr
    assert not (tmp_path / "out").exists()


def test_each_task_gets_theseus_on_the_grid_and_four_baselines_sharing_the_jobs(tmp_path: Path) -> None:
    commands = multirun_commands(tmp_path / "model", tmp_path / "glue", tmp_path / "runs", ["RTE", "CoLA"], [1, 2, 3],
                                 grid_named("paper"), jobs=16)  # fmt: skip
    assert set(commands) == {str(tmp_path / "runs" / task / kind) for task in ("RTE", "CoLA")
                             for kind in ("theseus", "baselines")}  # fmt: skip
    theseus, baselines = commands[str(tmp_path / "runs/RTE/theseus")], commands[str(tmp_path / "runs/RTE/baselines")]
    assert {"optimizer.lr=1e-5,2e-5", "replacement.b=0.1,0.3", "schedule_steps=1000,5000,10000,30000",
            "seed=1,2,3", "method=theseus"} <= set(theseus)  # fmt: skip
    assert {"method=fine_tuning,kd", "theseus.init=bottom,every_other", "seed=1,2,3"} <= set(baselines)
    jobs = [int(arg.split("=")[1]) for command in commands.values() for arg in command if "n_jobs=" in arg]
    assert sum(jobs) == 16
    with pytest.raises(ValueError, match="No paper experiment for BoolQ: the tasks are CoLA, SST-2, MRPC, "):
        multirun_commands(tmp_path, tmp_path, tmp_path, ["BoolQ"], [1], grid_named("first"), jobs=2)


def test_jobs_at_once_are_a_limit_over_every_multirun_side_by_side(tmp_path: Path) -> None:
    """Three tasks' six multiruns: each multirun's launcher keeps its own count, so their shares must add up to at most
    the jobs asked (rounded up, 10 ran 12 at once), and fewer jobs than multiruns cannot be kept to."""

    def shares(jobs: int) -> dict[str, int]:
        commands = multirun_commands(tmp_path, tmp_path, tmp_path / "runs", ["RTE", "CoLA", "STS-B"], [1, 2, 3],
                                     grid_named("first"), jobs=jobs)  # fmt: skip
        return {folder.removeprefix(f"{tmp_path}/runs/"): int(arg.rpartition("=")[2])
                for folder, command in commands.items() for arg in command if "n_jobs=" in arg}  # fmt: skip

    # 3 Theseus runs and 12 baseline runs a task: 10 jobs, 2/3 and 2 2/3 a task, the first task's baselines the third
    assert shares(10) == {"RTE/theseus": 1, "RTE/baselines": 3, "CoLA/theseus": 1, "CoLA/baselines": 2,
                          "STS-B/theseus": 1, "STS-B/baselines": 2}  # fmt: skip
    assert sum(shares(6).values()) == 6 and sum(shares(45).values()) == sum(shares(90).values()) == 45  # its 45 runs
    with pytest.raises(ValueError, match=r"^--jobs 5 is fewer than the 6 multiruns run side by side .* --jobs 6 or"):
        shares(5)


def test_the_deadline_stops_every_multirun_and_kills_a_job_that_outlives_sigterm(tmp_path: Path, monkeypatch) -> None:
    """A job that outlived SIGTERM (stuck in a CUDA call) went on holding the node: waited on without a bound while
    its launcher lived, left running where the launcher died at SIGTERM."""
    monkeypatch.setattr(paper_grid, "STOP_GRACE_S", 0.5)
    stubborn, orphaned, plain = (str(tmp_path / name) for name in ("stubborn", "orphaned", "plain"))
    child = tmp_path / "child.pid"
    started = time.monotonic()
    statuses = paper_grid.run_side_by_side({
        stubborn: ["sh", "-c", "trap '' TERM; sleep 60"],
        orphaned: ["sh", "-c", f"(trap '' TERM; exec sleep 60) & echo $! > {child}; wait"],  # the launcher dies
        plain: ["sleep", "60"],
    }, deadline_s=0.5)  # fmt: skip
    assert statuses == {stubborn: None, orphaned: None, plain: None} and time.monotonic() - started < 20
    stat, state, waited = Path(f"/proc/{int(child.read_text())}/stat"), "", time.monotonic()
    while state not in ("gone", "Z") and time.monotonic() - waited < 5:  # SIGKILL takes effect soon, not at once
        try:  # gone, or a zombie left for its new parent to reap
            state = stat.read_text().rpartition(")")[2].split()[0]
        except FileNotFoundError:
            state = "gone"
    assert state in ("gone", "Z")


def test_the_baselines_can_start_from_one_layer_choice_or_none_and_theseus_gets_their_jobs(tmp_path: Path) -> None:
    grid = grid_named("first")
    bottom = multirun_commands(tmp_path, tmp_path, tmp_path / "runs", ["RTE"], [1], grid, jobs=3,
                               baseline_inits=["bottom"])  # fmt: skip
    assert "theseus.init=bottom" in bottom[str(tmp_path / "runs/RTE/baselines")]
    alone = multirun_commands(tmp_path, tmp_path, tmp_path / "runs", ["RTE"], [1], grid, jobs=3, baseline_inits=[])
    assert list(alone) == [str(tmp_path / "runs/RTE/theseus")]
    with pytest.raises(ValueError, match="No baseline start top: the baseline starts are bottom, every_other"):
        multirun_commands(tmp_path, tmp_path, tmp_path, ["RTE"], [1], grid, jobs=2, baseline_inits=["top"])
    # settings the grid sets after the user's overrides: Hydra kept the grid's, the user's were dropped in silence
    overrides = ["trainer.max_steps=10", "replacement.b=0.1", "++theseus.init=every_other"]
    refused = (r"^The grid sets replacement\.b \(choose it with --grid\); theseus\.init \(choose it with "
               r"--baseline-inits\): an override of it would be dropped, so it is refused\.$")  # fmt: skip
    with pytest.raises(ValueError, match=refused):
        multirun_commands(tmp_path, tmp_path, tmp_path, ["RTE"], [1], grid, jobs=2, overrides=overrides)
    kept = multirun_commands(tmp_path, tmp_path, tmp_path, ["RTE"], [1], grid, jobs=2, overrides=overrides[:1])
    assert all(command.count("trainer.max_steps=10") == 1 for command in kept.values())


def test_fine_tuning_alone_from_the_bottom_layers_at_a_longer_budget_is_one_call(tmp_path: Path) -> None:
    """Theseus at 5,000 replacing steps and 5,000 of fine-tuning against fine-tuning the bottom layers for the same
    10,000 steps: one Theseus job and one baseline job a task and seed, the jobs split evenly."""
    grid = replace(grid_named("first"), steps_to_full=("5000",))
    commands = multirun_commands(tmp_path, tmp_path, tmp_path / "runs", ["RTE"], [1], grid, jobs=2,
                                 baseline_inits=["bottom"], baseline_methods=["fine_tuning"])  # fmt: skip
    theseus, baselines = commands[str(tmp_path / "runs/RTE/theseus")], commands[str(tmp_path / "runs/RTE/baselines")]
    assert {"method=fine_tuning", "theseus.init=bottom", "schedule_steps=5000", "optimizer.lr=2e-5",
            "hydra.launcher.n_jobs=1"} <= set(baselines)  # fmt: skip
    assert {"method=theseus", "replacement.b=0.3", "schedule_steps=5000", "hydra.launcher.n_jobs=1"} <= set(theseus)
    assert MAX_STEPS in theseus and MAX_STEPS in baselines  # twice the replacing steps: 10,000
    with pytest.raises(ValueError, match="No baseline distillation: the baselines are fine_tuning, kd"):
        multirun_commands(tmp_path, tmp_path, tmp_path, ["RTE"], [1], grid, jobs=2, baseline_methods=["distillation"])
    with pytest.raises(ValueError, match="No baseline given: the baselines are fine_tuning, kd"):
        multirun_commands(tmp_path, tmp_path, tmp_path, ["RTE"], [1], grid, jobs=2, baseline_methods=[])


def test_run_refuses_a_folder_that_is_no_unpacked_pack(tmp_path: Path) -> None:
    done = run_command([sys.executable, "-m", "theseus_pl.offline", "run", str(tmp_path), "--output",
                        str(tmp_path / "runs")])  # fmt: skip
    assert done.returncode == 2 and "holds no readable pack.json" in done.stderr and "Traceback" not in done.stderr
    (tmp_path / "pack.json").write_text("{}")  # readable, but not what pack wrote: it was a KeyError's traceback
    with pytest.raises(SystemExit, match=r"pack.json: no tasks: not a theseus_pl pack.json, or a damaged one; unpack"):
        main(["run", str(tmp_path), "--output", str(tmp_path / "runs"), "--dry-run"])
    (tmp_path / "pack.json").write_text(json.dumps({"tasks": "RTE", "hub_id": 3}))  # read by type: the first named
    with pytest.raises(SystemExit, match=r"pack.json: tasks is 'RTE' \(text\), not a list; unpack the pack again"):
        main(["run", str(tmp_path), "--output", str(tmp_path / "runs"), "--dry-run"])


@pytest.mark.parametrize(
    ("arguments", "refusal"),
    [
        (["--jobs", "0"], "error: argument --jobs: '0' is no count of jobs: a whole number, at least 1"),
        (["--minutes", "-3"], "error: argument --minutes: '-3' is no deadline: a number of minutes above 0"),
        (["--steps-to-full", "abc"], "error: argument --steps-to-full: invalid int value: 'abc'"),
        (["--baselines", "distillation"], "error: argument --baselines: invalid choice: 'distillation' (choose from "),
        (["--seeds", "1", "-1"], "(seed=-1 method=fine_tuning theseus.init=bottom): seed=-1 must be a whole number"),
        (["--", "optimizer.lr=0"], "/RTE/baselines: all 5 jobs checked (one for each swept value): optimizer.lr=0 "),
        (["--", "foo=bar"], "/RTE/theseus: Could not override 'foo'."),
    ],
)
def test_run_refuses_what_would_fail_every_job_on_the_node_before_any_starts(tmp_path: Path, arguments, refusal,
                                                                              capsys) -> None:  # fmt: skip
    """Each job of the grid refused its bad seed or override only as it started, one after another, on the GPU
    lease's clock; --jobs 0 or --minutes 0 started nothing, or stopped every job at once."""
    (tmp_path / "pack.json").write_text(json.dumps({"tasks": ["RTE"], "hub_id": None}))
    with pytest.raises(SystemExit) as refused:
        main(["run", str(tmp_path), "--output", str(tmp_path / "runs"), "--grid", "first", *arguments])
    assert refused.value.code == 2
    assert refusal in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_the_guides_longer_budget_call_starts_one_theseus_and_one_fine_tuning_job_a_task(tmp_path, capsys) -> None:
    """The call docs/guide/paper-on-a-gpu-node.md shows for 5,000 replacing steps (one task a lease, RTE first), run
    dry on a stand-in pack."""
    guide = (PROJECT / "docs" / "guide" / "paper-on-a-gpu-node.md").read_text()
    run = "python -m theseus_pl.offline run"  # not the same call through sweeps/gpu_node.sh
    (shown,) = [block for block in guide.split("```bash\n")[1:] if "--steps-to-full 5000" in block and
                block.startswith(run)]  # fmt: skip
    arguments = shlex.split(shown.split("```")[0].replace("\\\n", " "))[3:]  # after python -m theseus_pl.offline
    assert arguments[:2] == ["run", "/data/theseus"]
    (tmp_path / "pack.json").write_text(json.dumps({"tasks": ["CoLA", "RTE", "STS-B"], "hub_id": None}))
    output = [arguments[0], str(tmp_path), "--output", str(tmp_path / "runs")]
    main([*output, *[a for a in arguments[2:] if a not in ("--output", "/data/runs-5000")], "--dry-run"])
    multiruns = [dict(argument.split("=", 1) for argument in line.split() if "=" in argument)
                 for line in capsys.readouterr().out.splitlines() if " -m theseus_pl -m " in line]  # fmt: skip
    assert sorted((multirun["+experiment"], multirun["method"]) for multirun in multiruns) == [
        ("rte_curriculum", "fine_tuning"),
        ("rte_curriculum", "theseus"),
    ]
    for multirun in multiruns:  # one job each
        assert (multirun["seed"], multirun["schedule_steps"], multirun["optimizer.lr"]) == ("1", "5000", "2e-5")
        assert multirun["hydra.launcher.n_jobs"] == "1"
        assert multirun.get("theseus.init", "bottom") == "bottom" and multirun.get("replacement.b", "0.3") == "0.3"


def test_pack_refuses_missing_glue_tasks_by_name_dry_run_too(tmp_path: Path) -> None:
    glue = make_tiny_rte_glue_dir(tmp_path / "glue")
    for dry_run in ([], ["--dry-run"]):
        done = run_command([sys.executable, "-m", "theseus_pl.offline", "pack", str(tmp_path / "pack"), *dry_run,
                            "--model", str(tmp_path), "--glue-dir", str(glue), "--tasks", "RTE", "SST-2"])  # fmt: skip
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert f"{glue} has no folder SST-2: give --glue-dir the GLUE folder." in done.stderr
        assert not (tmp_path / "pack").exists()


def test_a_pack_dry_run_refuses_a_folder_pack_would_refuse_and_names_only_what_it_packs(
    tmp_path: Path, capsys, tiny_tokenizer
) -> None:
    """The dry run said it would pack into a folder holding a file, which pack then refused; a model folder without a
    hub id showed "(None)", and ``--wheel`` alone an empty list of wheels. A model folder without its tokenizer or a
    task without its dev file was packed, and every job on the node failed (or trained on unknown tokens)."""
    glue = make_tiny_rte_glue_dir(tmp_path / "glue")
    model = save_tiny_base(tmp_path / "model", tiny_tokenizer)
    (tmp_path / "pack").mkdir()
    (tmp_path / "pack" / "notes.txt").write_text("mine")
    arguments = ["--model", str(model), "--glue-dir", str(glue), "--tasks", "RTE", "--wheel"]
    with pytest.raises(SystemExit, match=f"^{tmp_path}/pack is not empty: give pack a new folder.$"):
        main(["pack", str(tmp_path / "pack"), "--dry-run", *arguments])
    main(["pack", str(tmp_path / "new"), "--dry-run", *arguments])
    said = capsys.readouterr().out
    assert f"{model} in fp16, GLUE RTE from {glue}, wheels for Python 3.12: theseus_pl." in said, said
    assert not (tmp_path / "new").exists()
    (glue / "RTE" / "dev.tsv").unlink()
    missing_dev = rf"^Missing {glue}/RTE/dev\.tsv\. The classic GLUE layout for RTE is .*: give --glue-dir"
    with pytest.raises(SystemExit, match=missing_dev):
        main(["pack", str(tmp_path / "new"), "--dry-run", *arguments])
    make_tiny_rte_glue_dir(tmp_path / "glue")
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json"):
        (model / name).unlink(missing_ok=True)
    with pytest.raises(SystemExit, match=rf"^--model {model}: {model} holds no tokenizer \(tokenizer.json, "):
        main(["pack", str(tmp_path / "new"), "--dry-run", *arguments])


@pytest.mark.parametrize(
    ("arguments", "refusal"),
    [
        (["--tasks", "RTE", "FOO"], "error: --tasks: No paper experiment for FOO: the tasks are CoLA, SST-2, "),
        (["--piece-mb", "0"], "error: argument --piece-mb: '0' is no size of a piece: a number of MiB above 0"),
        (["--piece-mb", "inf"], "error: argument --piece-mb: 'inf' is no size of a piece"),
        (["--output-is-a-file"], "is a file: give pack a new folder."),
    ],
)
def test_pack_refuses_what_would_pack_nothing_or_fail_on_the_node(tmp_path: Path, arguments, refusal) -> None:
    """A piece of no size packed nothing and said it had; an unknown task failed only on the node."""
    output = tmp_path / "pack"
    if arguments == ["--output-is-a-file"]:
        output.write_text("a file")
        arguments = []
    glue = make_tiny_rte_glue_dir(tmp_path / "glue")
    done = run_command([sys.executable, "-m", "theseus_pl.offline", "pack", str(output), "--model", str(tmp_path),
                        "--glue-dir", str(glue), "--tasks", "RTE", *arguments])  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert refusal in done.stderr
    assert output.is_file() or not output.exists()


@pytest.mark.slow
def test_pack_unpack_install_and_run_the_grid_in_miniature(tmp_path: Path, tiny_tokenizer) -> None:
    base = save_tiny_base(tmp_path / "base", tiny_tokenizer)
    glue = make_tiny_rte_glue_dir(tmp_path / "glue")
    pack = tmp_path / "pack"
    done = run_command([sys.executable, "-m", "theseus_pl.offline", "pack", str(pack), "--model", str(base),
                        "--glue-dir", str(glue), "--tasks", "RTE", "--wheel", "--piece-mb", "0.05",
                        "--python", f"{sys.version_info.major}.{sys.version_info.minor}"], cwd=PROJECT)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert len(list(pack.glob("pack.tar.*"))) > 1
    node = tmp_path / "node"  # what the node holds: the pieces, their sums and unpack.sh, nothing else
    node.mkdir()
    for file in pack.iterdir():
        (node / file.name).write_bytes(file.read_bytes())
    cache = seed_machine_bf16(tmp_path / "cache")  # the runs' processes start knowing it
    env = {**os.environ, "PIP_TARGET": str(tmp_path / "site"), "THESEUS_PL_CACHE": str(cache)}
    done = subprocess.run(["bash", str(node / "unpack.sh"), str(tmp_path / "unpacked")], capture_output=True,
                          text=True, env=env, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "theseus_pl" / "conf" / "train.yaml").is_file()  # the wheel, configs and all
    env["PYTHONPATH"] = str(tmp_path / "site")  # the installed wheel, not the checkout
    runs = tmp_path / "runs"
    # One job at a time in each of the two multiruns (no joblib worker importing everything again: 30-33 s where two
    # took 36-38 s alone); how --jobs is shared is the tests' above.
    done = run_command([sys.executable, "-m", "theseus_pl.offline", "run", str(tmp_path / "unpacked"), "--output",
                        str(runs), "--seeds", "1", "--grid", "first", "--steps-to-full", "2", "--jobs", "2", "--",
                        "trainer=cpu", "finetune.epochs=1", "data.batch_size=4", "theseus.successor_layers=2",
                        "trainer.val_check_interval=2", "optimizer.lr=1e-3"], env=env, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr + (runs / "RTE" / "baselines.log").read_text()
    results = sorted(runs.glob("RTE/*/*/results.json"))
    assert len(results) == 5, done.stdout
    methods = {(record["method"], record["settings"]["theseus.init"]) for record in map(_read, results)}
    rows = {("theseus_curriculum", "bottom"), ("fine_tuning", "bottom"), ("fine_tuning", "every_other"),
            ("kd", "bottom"), ("kd", "every_other")}  # fmt: skip
    assert methods == rows
    table = (runs / "report" / "table.md").read_text()
    assert all(f"| {method} {init} " in table for method, init in rows) and "| predecessor " in table, table


def _read(path: Path) -> dict:
    return json.loads(path.read_text())
