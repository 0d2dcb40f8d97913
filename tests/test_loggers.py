"""W&B works offline with no account, and a W&B that cannot start never costs the run; CSV always."""

import pytest
from lightning.pytorch.loggers import CSVLogger, WandbLogger

from theseus_pl import loggers
from theseus_pl.loggers import build_loggers, wandb_mode
from theseus_pl.run_identity import RunIdentity

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


def test_a_wandb_that_cannot_start_leaves_the_csv_log(monkeypatch, tmp_path, caplog):
    def unreachable(**kwargs):
        raise ConnectionError("api.wandb.ai unreachable")

    monkeypatch.setattr(loggers, "WandbLogger", unreachable)
    built = build_loggers(tmp_path, {"enabled": True, "mode": "online"}, {}, IDENTITY)
    assert [type(logger) for logger in built] == [CSVLogger]
    assert "Weights & Biases is unavailable (ConnectionError: api.wandb.ai unreachable)" in caplog.text


@pytest.mark.parametrize("settings", [{"enabled": False}, {"enabled": True, "mode": "disabled"}])
def test_wandb_can_be_switched_off(tmp_path, settings):
    assert [type(logger) for logger in build_loggers(tmp_path, settings, {}, IDENTITY)] == [CSVLogger]
