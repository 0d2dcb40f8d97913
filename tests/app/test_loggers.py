"""W&B works offline with no account, and a W&B that cannot start never costs the run; CSV always."""

import time

import pytest
from lightning.pytorch.loggers import CSVLogger, WandbLogger
from wandb.errors import term

from theseus_pl.app.tracking import loggers
from theseus_pl.app.tracking.loggers import build_loggers, wandb_mode
from theseus_pl.app.tracking.run_identity import RunIdentity

pytestmark = pytest.mark.quick

IDENTITY = RunIdentity(name="RTE theseus_curriculum", group=None, job_type="theseus_curriculum", tags=["RTE"])


def test_auto_mode_is_offline_without_an_account(monkeypatch, tmp_path):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "none"))
    monkeypatch.setenv("HOME", str(tmp_path))
    assert wandb_mode("auto") == "offline"
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    assert wandb_mode("auto") == "online"
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert wandb_mode("auto") == "disabled"
    assert wandb_mode("offline") == "offline"


def test_offline_wandb_run_writes_locally(monkeypatch, tmp_path):
    monkeypatch.setenv("WANDB_MODE", "offline")
    built = build_loggers(tmp_path, {"enabled": True, "project": "t", "mode": "auto"}, {"seed": 1}, IDENTITY)
    assert [type(logger) for logger in built] == [CSVLogger, WandbLogger]
    built[1].log_metrics({"train/p": 0.5}, step=0)
    built[1].experiment.finish()
    assert list((tmp_path / "wandb").glob("offline-run-*"))


def test_a_wandb_run_starts_without_the_anonymous_setting_warning(monkeypatch, tmp_path, capfd):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setattr(term, "_printed_messages", set())  # wandb prints the warning once a process
    built = build_loggers(tmp_path, {"enabled": True, "project": "t", "mode": "auto"}, {}, IDENTITY)
    assert [type(logger) for logger in built] == [CSVLogger, WandbLogger]
    built[1].experiment.finish()
    assert "anonymous" not in capfd.readouterr().err


@pytest.mark.parametrize("message", ["api.wandb.ai unreachable", ""])
def test_a_wandb_that_cannot_start_leaves_the_csv_log(monkeypatch, tmp_path, caplog, message):
    def unreachable(**kwargs):
        raise ConnectionError(message)

    monkeypatch.setattr(loggers, "WandbLogger", unreachable)
    built = build_loggers(tmp_path, {"enabled": True, "mode": "online"}, {}, IDENTITY)
    assert [type(logger) for logger in built] == [CSVLogger]
    assert f"Weights & Biases is unavailable (ConnectionError: {message}); logging to CSV only." in caplog.text


@pytest.mark.parametrize("settings", [{"enabled": False}, {"enabled": True, "mode": "disabled"}])
def test_wandb_can_be_switched_off(tmp_path, settings):
    assert [type(logger) for logger in build_loggers(tmp_path, settings, {}, IDENTITY)] == [CSVLogger]


def test_an_unreachable_wandb_costs_its_timeout_once_then_the_process_logs_offline(monkeypatch, tmp_path, caplog):
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")  # a closed port: connection refused
    monkeypatch.setenv("WANDB_API_KEY", "a" * 40)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    settings = {"enabled": True, "mode": "online", "init_timeout": 3}
    jobs = {}
    for job in ("first", "second"):  # two jobs of one process, each finishing its run as the pipeline does
        started = time.perf_counter()
        built = build_loggers(tmp_path / job, settings, {}, IDENTITY)
        jobs[job] = time.perf_counter() - started
        assert [type(logger) for logger in built] == [CSVLogger, WandbLogger]
        assert built[1].experiment.offline
        built[1].experiment.finish()
        assert list((tmp_path / job / "wandb").glob("offline-run-*"))
    first_seconds = jobs["first"]
    assert first_seconds < 3 + 8, f"{first_seconds:.1f} s"  # the timeout, then an offline start
    assert caplog.text.count("could not start online within logger.wandb.init_timeout=3 s") == 1
    assert jobs["second"] < first_seconds - 2, jobs  # no second wait
