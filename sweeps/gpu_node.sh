#!/bin/bash
# The paper's grid on a GPU node that takes files only through a copy tool with a size limit per copy: what this
# project's sessions run there in one call, once the pieces of `python -m theseus_pl.offline pack` are on the node.
#
#   bash sweeps/gpu_node.sh "RUN ARGS" ["RUN ARGS" ...]
#
# Each quoted argument is one `python -m theseus_pl.offline run DEST` (without DEST), started side by side, e.g.
#   CALL_MINUTES=9.5 bash sweeps/gpu_node.sh \
#       "--output /dev/shm/runs/seed2 --tasks RTE STS-B CoLA --seeds 2 --grid first --jobs 15" \
#       "--output /dev/shm/runs/seed3 --tasks RTE --seeds 3 --grid first --jobs 5"
#
# It checks and joins the pieces (PIECES: pack.tar.*, pieces.sha256, unpack.sh, copied there one per call), installs
# the wheels into $ROOT/site, runs every multirun to the deadline with the resume checkpoint dropped and the best
# checkpoint's weights alone kept (a base-size Theseus checkpoint with its optimizer state is about 1 GB), samples the
# GPU's use every 10 s, and tars each run's results, Hydra folder, metrics, logs and report into $OUT/runs.tgz (a few
# hundred KB), again every minute while the runs go on: a call killed at its limit still brings back every job that
# finished. Outputs go to RUNS (default /dev/shm/runs: memory, not the node's disk); each run's --output must be a
# folder under it (else nothing of it would come back).
#
# The deadline: CALL_MINUTES (default 9.5) is the whole call's, from this script's start (set it under the call's
# limit and the device time left); the runs get what remains once the pack is installed, less a minute for the
# report and the tar (MINUTES sets the runs' minutes instead). A job stopped at the deadline counts for nothing.
#
# On a CPU (a rehearsal) set EXTRA="trainer=cpu data.max_train_samples=32 data.max_eval_samples=32
# trainer.val_check_interval=5", give the runs --steps-to-full 5 (the budget's steps: a job validates every
# val_check_interval steps) and a job or two a multirun (--jobs 2 to 4 a task): ten base-size jobs do not fit in 24 GB.
set -u
ROOT=${ROOT:-/root}
PIECES=${PIECES:-$ROOT/pieces}
CALL_MINUTES=${CALL_MINUTES:-9.5}
RUNS=${RUNS:-/dev/shm/runs}
OUT=${OUT:?set OUT, the folder whose files come back}
[ $# -ge 1 ] || { sed -n 5,9p "$0"; exit 2; }
for run in "$@"; do
    case " $run " in
        *" --output $RUNS/"*) ;;
        *) echo "each run's --output must be a folder under RUNS ($RUNS), which is tarred into \$OUT: $run"; exit 2 ;;
    esac
done
started=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null | head -3
PIP_TARGET=$ROOT/site bash "$PIECES/unpack.sh" "$ROOT/unpacked" > "$OUT/unpack.log" 2>&1 \
    || { tail -n 30 "$OUT/unpack.log"; exit 3; }
echo "unpacked in $(( $(date +%s) - started )) s"
export PYTHONPATH=$ROOT/site THESEUS_PL_CACHE=${THESEUS_PL_CACHE:-/dev/shm/cache} HF_HUB_OFFLINE=1
python3 -c "import torch, transformers, lightning; print(torch.__version__, transformers.__version__, lightning.__version__)"
MINUTES=${MINUTES:-$(python3 -c "print(round($CALL_MINUTES - ($(date +%s) - $started) / 60 - 1, 2))")}
echo "the runs stop after $MINUTES minutes"
python3 -c "import sys; sys.exit(float('$MINUTES') <= 0)" || { echo "no time left for the runs"; exit 4; }
save_runs() {  # what the table needs, into $OUT whole (a file a job is writing is taken as it stands)
    local staged="$OUT/.runs.$BASHPID.tgz"
    (cd "$RUNS" && find . \( -name results.json -o -name '*.log' -o -path '*/.hydra/*' -o -name metrics.csv \
        -o -path '*/report/*' \) -print0 | tar --null -czf "$staged" -T - 2> /dev/null)
    mv -f "$staged" "$OUT/runs.tgz"
}
dmon=
if command -v nvidia-smi > /dev/null; then nvidia-smi dmon -s u -d 10 > "$OUT/dmon.log" 2>&1 & dmon=$!; fi
mkdir -p "$RUNS"
pids=()
index=0
for run in "$@"; do
    # shellcheck disable=SC2086  # each run's arguments are meant to split into words
    python3 -m theseus_pl.offline run "$ROOT/unpacked" $run --minutes "$MINUTES" -- \
        '~callbacks.resume_checkpoint' +callbacks.model_checkpoint.save_weights_only=true ${EXTRA:-} \
        > "$OUT/run$index.log" 2>&1 &
    pids+=($!)
    index=$((index + 1))
done
(while sleep 60; do save_runs; done) > /dev/null 2>&1 &  # its sleep, left when it is stopped, holds no output open
saver=$!
wait "${pids[@]}"
kill "$saver" ${dmon:+"$dmon"} 2> /dev/null
echo "ran in $(( $(date +%s) - started )) s"
for log in "$OUT"/run*.log; do tail -n 25 "$log"; done
for table in "$RUNS"/*/report/table.md; do [ -f "$table" ] && { echo "== $table"; cat "$table"; }; done
save_runs && ls -la "$OUT"
