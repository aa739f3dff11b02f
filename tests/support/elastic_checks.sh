# shellcheck shell=bash
# Sourced by the elastic-restart tests (tests/slurm/elastic_on_slurm.sh, tests/multihost/elastic_netns.sh): what
# both check of a run that lost a node and went on. Needs fail/ok defined by the caller.

# elastic_job_args DATA: the small job both tests train (synthetic 1x28x28 data, a few dozen steps, a step
# checkpoint every 8 steps, every checkpoint kept so the one resumed from is still there for the comparison).
elastic_job_args() {
  echo --set data.train="$1/train" --set data.test="$1/test" --set train.epochs=2 --set train.max_steps_per_epoch=32 \
       --set train.batch_per_rank=32 --set run.checkpoint_every_steps=8 --set run.keep_checkpoints=100 \
       --set run.progress_every_s=1000 --set run.threads=1 --set 'dist.reducer="nonblocking"' \
       --set 'dist.on_shrink="keep_global_batch"'
}

# elastic_check_membership RUN OLD_RANKS NEW_RANKS FAILED_NODE: metrics.jsonl holds one membership record with
# these, the step of the checkpoint the relaunch resumed from (the newest one when it was relaunched), the global
# batch kept, and the run's last epoch. Prints the step resumed from on success.
elastic_check_membership() {
  /usr/bin/python3 - "$@" <<'PY'
import json, os, re, sys
run, old, new, node = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
recs = [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl"))]
members = [r for r in recs if r["kind"] == "membership"]
assert len(members) == 1, members
m = members[0]
assert (m["old_ranks"], m["new_ranks"], m["failed_node"]) == (old, new, node), m
assert m["on_shrink"] == "keep_global_batch" and m["old_global_batch"] == m["new_global_batch"], m
assert m["accumulate_steps"] == old // new and m["seconds_lost"] is not None and m["seconds_lost"] >= 0, m
starts = [r for r in recs if r["kind"] == "job"]
step = int(re.search(r"ckpt-s(\d+)\.h5$", starts[-1]["resumed_from"]).group(1))
assert step == m["resumed_from_step"] > 0, (step, m)
assert [e["epoch"] for e in recs if e["kind"] == "epoch"][-1] == 2, "the run did not reach its last epoch"
print(step)
PY
}

# elastic_reference RUN COPY STEP LAUNCH...: COPY is RUN as it was at checkpoint STEP (later checkpoints removed;
# --resume trims metrics.jsonl itself), resumed by LAUNCH (the smaller world's launcher and ringtrain train ...,
# given --set run.dir=COPY --resume by this function). Succeeds when COPY ends on RUN's parameters.
elastic_reference() {
  local run=$1 copy=$2 step=$3 f
  shift 3
  rm -rf "$copy" && cp -a "$run" "$copy"
  for f in "$copy"/checkpoints/ckpt-s*.h5; do
    [ "$((10#$(basename "$f" .h5 | sed 's/ckpt-s//')))" -gt "$step" ] && rm -f "$f"
  done
  "$@" --set run.dir="$copy" --resume >"$copy.log" 2>&1 || { echo "reference run failed: $(tail -3 "$copy.log")"; return 1; }
  local a b
  a=$(grep -o '"param_checksum":"[0-9a-f]*"' "$run/metrics.jsonl" | tail -1)
  b=$(grep -o '"param_checksum":"[0-9a-f]*"' "$copy/metrics.jsonl" | tail -1)
  echo "continued run $a, run started on the smaller world from checkpoint $step: $b"
  [ -n "$a" ] && [ "$a" = "$b" ]
}
