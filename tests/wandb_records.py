"""Read an offline W&B run's transaction log (``run-<id>.wandb``): what ``wandb sync`` would upload.

wandb 0.31 ships no Python reader for it. The file is a LevelDB-style log: a 7-byte header, then 32 KiB blocks
of chunks, each with a 7-byte header (CRC, length, type: 1 full, 2 first, 3 middle, 4 last) and a piece of a
serialised ``wandb.proto.wandb_internal_pb2.Record``. The CRC is zlib's CRC-32 of the type byte, then the piece
(wandb-core's ``CRCAlgoIEEE``).
"""

from __future__ import annotations

import json
import struct
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wandb.proto import wandb_internal_pb2

BLOCK, HEADER = 32 * 1024, 7


@dataclass
class OfflineRun:
    id: str = ""
    name: str = ""
    group: str = ""
    job_type: str = ""
    tags: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    exit_code: int | None = None
    files: list[str] = field(default_factory=list)
    artifacts: list[str] = field(default_factory=list)


def records(path: Path) -> list[wandb_internal_pb2.Record]:
    """The log's whole records, up to the first chunk not yet whole on disk.

    W&B's service appends to the log while a test reads it: the last chunk may be cut short or not yet hold its
    bytes, which its CRC tells (a parse of it failed once in CI). What follows it is left for the next read."""
    data, position, pieces, found = path.read_bytes(), HEADER, [], []
    while position + HEADER <= len(data):
        if BLOCK - position % BLOCK < HEADER:  # a block's tail too short for a header is padding
            position += BLOCK - position % BLOCK
            continue
        checksum, length, kind = struct.unpack("<IHB", data[position : position + HEADER])
        piece = data[position + HEADER : position + HEADER + length]
        if not _whole(checksum, kind, piece, length):  # so are the zeros past the written end
            break
        pieces.append(piece)
        position += HEADER + length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(b"".join(pieces))
            found.append(record)
            pieces = []
    return found


def _whole(checksum: int, kind: int, piece: bytes, length: int) -> bool:
    return len(piece) == length and zlib.crc32(piece, zlib.crc32(bytes([kind]))) == checksum


def read_offline_run(folder: Path, wait: float = 30.0) -> OfflineRun:
    """The run in an ``offline-run-*`` folder: identity, config, final summary, exit code, saved files.

    W&B's service process writes the log and may flush its last block a moment after ``run.finish()`` returns in
    the job (seen once on a loaded 2-core machine: an empty log read at once): the log is read again until it holds
    the run's exit record, for up to ``wait`` seconds."""
    deadline = time.monotonic() + wait
    run = _parsed(folder)
    while run.exit_code is None and time.monotonic() < deadline:
        time.sleep(0.2)
        run = _parsed(folder)
    return run


def _parsed(folder: Path) -> OfflineRun:
    (log,) = folder.glob("run-*.wandb")
    run = OfflineRun()
    for record in records(log):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run.id, run.name, run.group = record.run.run_id, record.run.display_name, record.run.run_group
            run.job_type, run.tags = record.run.job_type, list(record.run.tags)
            run.config.update({item.key: json.loads(item.value_json) for item in record.run.config.update})
        elif kind == "config":
            run.config.update({item.key: json.loads(item.value_json) for item in record.config.update})
        elif kind == "summary":
            for item in record.summary.update:
                run.summary[item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
        elif kind == "exit":
            run.exit_code = record.exit.exit_code
        elif kind == "files":
            run.files += [item.path for item in record.files.files]
        elif kind == "artifact":
            run.artifacts.append(f"{record.artifact.name}:{record.artifact.type}")
    return run
