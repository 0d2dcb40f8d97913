"""No flag of deploy, submit, report, publish or dashboard is dropped in silence: each option its help lists, given on
its own with a value other than its default, changes what the dry run says it would do, or is refused (exit status 2).
A new option must be added to the command's table (:data:`DEPLOY_VALUES`, :data:`SUBMIT_VALUES`, :data:`REPORT_VALUES`,
:data:`PUBLISH_VALUES`, :data:`DASHBOARD_VALUES`) with a value to try: the test fails on an option it does not know."""

from __future__ import annotations

import re

import pytest
import torch
from conftest import tiny_model
from glue_files import make_glue_dir
from results_records import a_run, plant

from theseus_pl.dashboard import main as dashboard_main
from theseus_pl.deploy import main
from theseus_pl.publish import main as publish_main
from theseus_pl.report import main as report_main
from theseus_pl.submit import main as submit_main

pytestmark = pytest.mark.quick

TASK = ["--task", "RTE", "--glue-dir", "{glue}"]  # dev rows: what some options act on
# For each option, the command line it is tried on (a checkpoint folder's, with dev rows or without), and a value
# other than its default ({glue}, {predecessor}: folders; {threads}: one more than torch's).
DEPLOY_VALUES: dict[str, tuple[list[str], list[str]]] = {
    "--quantize": ([], ["none"]),
    "--openvino": (["--target", "onnx_int8"], []),  # by default none beside a named ONNX target
    "--no-openvino": ([], []),  # by default deployed where its extra is installed, as dev installs it
    "--calibration-rows": ([], ["7"]),
    "--task": ([], TASK),
    "--glue-dir": ([], ["{glue}"]),
    "--predecessor": ([], ["{predecessor}"]),
    "--sequence-length": ([], ["16"]),
    "--batch-sizes": ([], ["1", "3"]),
    "--no-own-lengths": (TASK, []),
    "--repeats": ([], ["3"]),
    "--threads": ([], ["{threads}"]),  # other than torch's own count, the default
    "--target": ([], ["onnx_int8"]),
    "--max-score-drop": (TASK, ["2.5"]),  # auto picks by dev score: without dev rows it is refused
    "--gguf": ([], ["f16"]),
    "--llama-cpp": ([], ["true"]),
}
DEFAULTS = {"--own-lengths"}  # the default spelled out (its --no- form is tried)
NOT_OPTIONS = {"--help", "--dry-run"}


def help_options(capsys: pytest.CaptureFixture[str], command=main) -> list[str]:
    with pytest.raises(SystemExit):
        command(["--help"])
    lines = [line.strip() for line in capsys.readouterr().out.splitlines() if line.startswith("  -")]
    names = {name for line in lines for name in re.findall(r"--[a-z][a-z-]*", line.split("  ")[0])}
    return sorted(names - NOT_OPTIONS)


def dry_run(arguments: list[str], capsys: pytest.CaptureFixture[str], command=main) -> tuple[int, str]:
    """The exit status (0 where it planned) and what it printed."""
    try:
        command([*arguments, "--dry-run"])
    except SystemExit as exited:
        return int(exited.code or 0), capsys.readouterr().err
    return 0, capsys.readouterr().out


def test_every_deploy_option_changes_the_plan_or_is_refused(tmp_path, tiny_tokenizer, glue_dir, capsys):
    options = help_options(capsys)
    assert options == sorted({*DEPLOY_VALUES, *DEFAULTS}), "an option the test does not know: add it with a value"
    folders = {}
    for name, layers in (("model", 2), ("predecessor", 3)):
        folders[name] = tmp_path / name
        tiny_model("bert", num_hidden_layers=layers, num_labels=2).save_pretrained(folders[name])
        tiny_tokenizer.save_pretrained(folders[name])
    unread = []
    for option, (context, values) in DEPLOY_VALUES.items():
        base = [str(folders["model"]), *(value.format(glue=glue_dir) for value in context)]
        status, plan = dry_run(base, capsys)
        assert status == 0, plan
        more = {"glue": glue_dir, "predecessor": folders["predecessor"], "threads": torch.get_num_threads() + 1}
        given = [value.format(**more) for value in values]
        status, printed = dry_run([*base, option, *given], capsys)
        if status == 0 and printed == plan:
            unread.append(option)
        assert status in (0, 2), printed  # planned, or refused in its words: no traceback
    assert unread == [], f"given alone, these change nothing and are not refused: {unread}"


def test_calibration_rows_are_refused_wherever_no_openvino_int8_model_is_calibrated(
    tmp_path, tiny_tokenizer, glue_dir, capsys
):
    model = tmp_path / "model"
    tiny_model("bert", num_hidden_layers=2, num_labels=2).save_pretrained(model)
    tiny_tokenizer.save_pretrained(model)
    task = [value.format(glue=glue_dir) for value in TASK]
    for context in ([], ["--openvino"], [*task, "--quantize", "none"], [*task, "--no-openvino"]):
        status, printed = dry_run([str(model), *context, "--calibration-rows", "7"], capsys)
        assert status == 2 and "--calibration-rows: read only where OpenVINO's int8 model is calibrated" in printed
    status, printed = dry_run([str(model), *task, "--calibration-rows", "7"], capsys)  # auto: the dev extra has it
    assert status == 0 and "OpenVINO's int8 calibrated on 7 training rows (a fixed draw" in printed, printed


# submit's options, each tried on a checkpoint of RTE with the task's files ({glue}, {folder}: folders).
SUBMIT_BASE = ["--task", "RTE", "--glue-dir", "{glue}"]
SUBMIT_VALUES: dict[str, tuple[list[str], list[str]]] = {
    "--task": (["--glue-dir", "{glue}"], ["QNLI"]),  # required: without it, no plan
    "--glue-dir": (["--task", "RTE"], ["{glue}"]),  # the hub otherwise (offline here: refused)
    "--output": (SUBMIT_BASE, ["{folder}/elsewhere"]),
    "--batch-size": (SUBMIT_BASE, ["3"]),
    "--cache-dir": (SUBMIT_BASE, ["{folder}/cache"]),
}


def test_every_submit_option_changes_the_plan_or_is_refused(tmp_path, tiny_tokenizer, capsys):
    options = help_options(capsys, submit_main)
    assert options == sorted(SUBMIT_VALUES), "an option the test does not know: add it with a value"
    model, glue = tmp_path / "model", make_glue_dir(tmp_path / "glue")
    tiny_model("bert", num_hidden_layers=2, num_labels=2).save_pretrained(model)
    tiny_tokenizer.save_pretrained(model)
    unread = []
    for option, (context, values) in SUBMIT_VALUES.items():
        base = [str(model), *(value.format(glue=glue) for value in context)]
        given = [value.format(glue=glue, folder=tmp_path) for value in values]
        status, plan = dry_run(base, capsys, submit_main)
        changed_status, printed = dry_run([*base, option, *given], capsys, submit_main)
        if changed_status == status and printed == plan:
            unread.append(option)
        assert changed_status in (0, 2), printed  # planned, or refused in its words: no traceback
    assert unread == [], f"given alone, these change nothing and are not refused: {unread}"


REPORT_VALUES: dict[str, tuple[list[str], list[str]]] = {
    "--rows": ([], ["seed"]),
    "--output": ([], ["{folder}/tables"]),
}


def test_every_report_option_changes_the_plan_or_is_refused(tmp_path, capsys):
    options = help_options(capsys, report_main)
    assert options == sorted(REPORT_VALUES), "an option the test does not know: add it with a value"
    for seed in (1, 2):
        plant(tmp_path / "runs" / str(seed), a_run(seed=seed))
    base = [str(tmp_path / "runs")]
    status, plan = dry_run(base, capsys, report_main)
    assert status == 0, plan
    for option, (_, values) in REPORT_VALUES.items():
        status, printed = dry_run([*base, option, *(value.format(folder=tmp_path) for value in values)], capsys,
                                  report_main)  # fmt: skip
        assert status == 2 or printed != plan, f"{option} alone changes nothing and is not refused"


# publish's options, each tried on a finished run's folder ({run}) published to ORG/NAME; dashboard's on a sweep folder
# of planted runs ({folder}), in entity e's project p. The first value of each table is the command's base.
PUBLISH_VALUES: dict[str, list[str]] = {"--repo-id": ["org/other"], "--private": [], "--token": ["hf_given"]}
DASHBOARD_VALUES: dict[str, list[str]] = {
    "--entity": ["other"],
    "--project": ["other"],
    "--group": ["a-group"],
    "--sweep": ["{folder}"],
    "--name": ["mine"],
    "--view-url": ["https://wandb.ai/e/p?nw=view1"],
    "--report": ["{folder}"],
}


def test_every_publish_option_changes_the_plan_or_is_refused(tmp_path, tiny_tokenizer, capsys, monkeypatch):
    """On a machine without a hub token, so that --token's own value is what the dry run reads."""
    from huggingface_hub import constants

    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    options = help_options(capsys, publish_main)
    assert options == sorted(PUBLISH_VALUES), "an option the test does not know: add it with a value"
    run = tmp_path / "run"
    plant(run, a_run(successor_dir=str(run / "successor")))
    tiny_model("bert", num_hidden_layers=2, num_labels=2).save_pretrained(run / "successor")
    tiny_tokenizer.save_pretrained(run / "successor")
    base = [str(run), "--repo-id", "org/name"]
    status, plan = dry_run(base, capsys, publish_main)
    assert status == 0, plan
    for option, values in PUBLISH_VALUES.items():
        status, printed = dry_run([*base, option, *values], capsys, publish_main)
        assert status == 2 or printed != plan, f"{option} alone changes nothing and is not refused"


def test_every_dashboard_option_changes_the_plan_or_is_refused(tmp_path, capsys):
    options = help_options(capsys, dashboard_main)
    assert options == sorted(DASHBOARD_VALUES), "an option the test does not know: add it with a value"
    for seed in (1, 2):
        plant(tmp_path / "sweep" / str(seed), a_run(seed=seed, settings={"seed": seed}))
    base = ["--entity", "e", "--project", "p"]
    status, plan = dry_run(base, capsys, dashboard_main)
    assert status == 0, plan
    for option, values in DASHBOARD_VALUES.items():
        given = [value.format(folder=tmp_path / "sweep") for value in values]
        status, printed = dry_run([*base, option, *given], capsys, dashboard_main)
        assert status in (0, 2), printed  # planned, or refused in its words: no traceback
        assert status == 2 or printed != plan, f"{option} alone changes nothing and is not refused"
