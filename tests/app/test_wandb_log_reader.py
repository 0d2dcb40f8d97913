"""The suite's reader of offline W&B logs reads a log that W&B's service is still writing without failing."""

from pathlib import Path

import pytest
import wandb
from wandb_records import read_offline_run, records

pytestmark = pytest.mark.quick


@pytest.fixture(scope="module")
def offline_log(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("wandb")
    run = wandb.init(project="reader", dir=folder, mode="offline", config={"lr": 2e-5})
    run.log({"dev_score": 0.5})
    run.finish()
    (log,) = folder.glob("wandb/offline-run-*/run-*.wandb")
    # W&B's service may flush the last block a moment after finish() returns (an empty log read at once, in CI)
    assert read_offline_run(log.parent).exit_code == 0
    return log


def test_a_log_cut_inside_its_last_record_reads_as_the_records_before_it(offline_log, tmp_path):
    whole = records(offline_log)
    assert len(whole) > 1  # the run's records and its exit
    data = offline_log.read_bytes()
    cut = tmp_path / "cut.wandb"
    cut.write_bytes(data[: len(data) - 3])  # the last chunk's last bytes not yet on disk
    assert [r.SerializeToString() for r in records(cut)] == [r.SerializeToString() for r in whole[:-1]]


def test_a_last_chunk_whose_bytes_are_not_yet_written_is_not_parsed(offline_log, tmp_path):
    whole = records(offline_log)
    data = bytearray(offline_log.read_bytes())
    last = len(whole[-1].SerializeToString())
    data[len(data) - last :] = bytes(last)  # its header on disk, its bytes still zeros
    torn = tmp_path / "torn.wandb"
    torn.write_bytes(bytes(data))
    assert len(records(torn)) == len(whole) - 1
