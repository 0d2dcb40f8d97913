"""Where a deployed ONNX model spends its time: ONNX Runtime's own per-operator profile, on a deployed classifier run.

    python benchmarks/onnx_profile.py RUN_DIR [--glue-dir PATH] [--model onnx/model_int8.onnx] [--batch-size 32]
        [--threads 2] [--repeats 5] [--output onnx_profile.json]

Runs the model (by default the int8 one a deployment wrote) on the run's dev rows at their own lengths, as the
deployment times them (batch 1: single rows unpadded; larger: length-sorted batches), with ONNX Runtime's profiler on,
and prints each operator type's share of the time spent in operators: the profile that says which operators a missed
speed-up aim is spent in (docs/results/deployment.md), on whatever CPU runs it.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import onnxruntime as ort
import pandas as pd
import torch

from theseus_pl.app.kinds.task_model.shipping import run_dev_data
from theseus_pl.core.precision import this_cpu
from theseus_pl.deployment.onnx_deployment import own_length_batches
from theseus_pl.deployment.onnx_export import session_logits
from theseus_pl.deployment.stage import timing_rows


def operator_times(model: Path, batches: list[dict[str, torch.Tensor]], threads: int, repeats: int) -> pd.DataFrame:
    """Microseconds each operator type took over ``repeats`` passes of ``batches`` (after one pass not counted), from
    ONNX Runtime's profile, with its share of the operators' total."""
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.enable_profiling = True
    with tempfile.TemporaryDirectory() as folder:
        options.profile_file_prefix = str(Path(folder) / "profile")
        created = time.perf_counter()  # just before the profiler's clock starts: events' ts count from there
        session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        for batch in batches:  # the warm-up pass, not counted
            session_logits(session, batch)
        warm_us = (time.perf_counter() - created) * 1e6  # at or after the warm-up's last event on the profiler's clock
        for _ in range(repeats):
            for batch in batches:
                session_logits(session, batch)
        events = json.loads(Path(session.end_profiling()).read_text())
    nodes = pd.DataFrame(
        [
            {"operator": event["args"]["op_name"], "us": event["dur"], "ts": event["ts"]}
            for event in events
            if event.get("cat") == "Node" and event["name"].endswith("_kernel_time")
        ]
    )
    nodes = nodes[nodes["ts"] >= warm_us]
    table = nodes.groupby("operator")["us"].agg(["sum", "count"]).sort_values("sum", ascending=False)
    table["share"] = table["sum"] / table["sum"].sum()
    return table


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--glue-dir")
    parser.add_argument("--model", default="onnx/model_int8.onnx", help="inside the run's successor/")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--output", type=Path, default=Path("onnx_profile.json"))
    args = parser.parse_args(argv)
    successor_dir = args.run_dir / "successor"
    datamodule = run_dev_data(args.run_dir, args.glue_dir)
    tokenizer = datamodule.tokenizer
    rows = timing_rows(datamodule, tokenizer, 256)
    batches = own_length_batches(rows, tokenizer, args.batch_size)
    table = operator_times(successor_dir / args.model, batches, args.threads, args.repeats)
    cpu = this_cpu()
    report = {
        "cpu": cpu.model,
        "cpu_flags": sorted(cpu.relevant_flags),
        "threads": args.threads,
        "model": args.model,
        "batch_size": args.batch_size,
        "operators": table.to_dict(orient="index"),
    }
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(table.to_string(formatters={"share": "{:.1%}".format}))
    return report


if __name__ == "__main__":
    main()
