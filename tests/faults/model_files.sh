#!/usr/bin/env bash
# What a user can do wrong with the files of a trained or imported model, and what is kept safe. Each case: the
# documented exit code, the message, and every file the user had left byte for byte as it was:
#   *_over_input     an output naming an input (export --onnx the checkpoint, evaluate --out the checkpoint or the
#                    job file, import --out/--checkpoint the ONNX model): exit 2, the input unchanged
#   import_real_split   import --data at a split with samples but a shard missing: exit 2, its shards unchanged
#   import_out_folder   import --out a folder: exit 2; the checkpoint already at --checkpoint unchanged
#   import_job_unwritable  the job file cannot be written: exit 3; that checkpoint unchanged, no data folder, no .tmp
#   import_into_new_folders  --out and --checkpoint in folders that do not exist yet: made, exit 0
#   import_onnx_folder  import --onnx a folder: exit 4 "it is a folder"
#   import_std_zero  import --std 0: exit 2
#   import_eval_resize_small  import --eval-resize under the samples' side: exit 2, nothing written
#   import_nan       an ONNX weight holding NaN: exit 3 naming the tensor; nothing written
#   import_negative_variance  a batch norm's running variance below 0: exit 3 naming the node; nothing written
#   predict_description  predict on import's split of no samples: exit 4
#   predict_precision    predict --precision bf17: exit 2 naming the option
#   *_tf32_on_cpu    a model trained in tf32 predicts and evaluates on the CPU (in fp32); training in tf32 is refused
#   latin1_class_name    a class name that is not UTF-8 (import --class-names): predict prints it with U+FFFD, exit 0
#   freeze_everything    train.freeze leaving no parameter to train: exit 3
#   evaluate_split_differs  2 ranks that read different data at data.test (MPMD): exit 4 on both, naming the split
# Usage: model_files.sh RINGTRAIN SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
onnx_python=$src/.venv-onnx/bin/python3
[ -x "$onnx_python" ] || { echo "FAIL: $onnx_python is missing: run scripts/install_deps.sh"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0 passed=0
job=$src/jobs/fashion_mnist.toml

. "$(dirname "$0")/command_checks.sh"
unchanged() {  # NAME FILE COPY: FILE must still equal COPY, byte for byte
  cmp -s "$2" "$3" || { echo "FAIL $1: '$2' was changed"; failures=$((failures + 1)); }
}

"$bin" prepare synthetic --shape 1,8,8 --classes 3 --samples 64 --test-samples 16 --shards 2 --out "$work/tiny" >/dev/null &&
  "$bin" prepare synthetic --shape 1,8,8 --classes 3 --samples 64 --test-samples 24 --shards 2 --out "$work/other" >/dev/null ||
  { echo "prepare failed"; exit 1; }
tiny=(--set data.train="$work/tiny/train" --set data.test="$work/tiny/test" --set train.batch_per_rank=4
      --set 'model.layers=[{type="conv2d",filters=4,kernel=3,padding=1},{type="batchnorm"},{type="relu"},{type="flatten"},{type="dense",units=3}]'
      --set run.progress_every_s=1000 --set train.epochs=1)
"$bin" train "$job" "${tiny[@]}" --set run.dir="$work/run" >"$work/train.log" 2>&1 ||
  { echo "training failed: $(tail -3 "$work/train.log")"; exit 1; }
ckpts=("$work/run/checkpoints"/ckpt-s*.h5)
ckpt=${ckpts[-1]}
cp "$ckpt" "$work/ckpt.copy"
# A classifier as torchvision exports one (Conv, BatchNormalization, Relu, Flatten, Gemm on 1x8x8 images, 3 classes),
# then the same model with one weight set to NaN, and with a running variance below 0.
"$onnx_python" - "$work/model.onnx" "$work/nan.onnx" "$work/negvar.onnx" <<'PY' || { echo "FAIL: could not write the ONNX models"; exit 1; }
import sys, numpy as np, onnx
from onnx import helper as h, numpy_helper as nh, TensorProto
rng = np.random.default_rng(0)
def save(path, conv_weight_nan=False, negative_variance=False):
    w = rng.standard_normal((4, 1, 3, 3)).astype(np.float32)
    var = np.ones(4, np.float32)
    if conv_weight_nan: w.flat[0] = np.nan
    if negative_variance: var[1] = -0.5
    inits = [nh.from_array(w, "w"), nh.from_array(np.zeros(4, np.float32), "b"),
             nh.from_array(np.ones(4, np.float32), "scale"), nh.from_array(np.zeros(4, np.float32), "shift"),
             nh.from_array(np.zeros(4, np.float32), "mean"), nh.from_array(var, "var"),
             nh.from_array(rng.standard_normal((3, 256)).astype(np.float32), "gw"),
             nh.from_array(np.zeros(3, np.float32), "gb")]
    nodes = [h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], kernel_shape=[3, 3], name="conv"),
             h.make_node("BatchNormalization", ["c", "scale", "shift", "mean", "var"], ["n"], name="bn"),
             h.make_node("Relu", ["n"], ["r"], name="act"),
             h.make_node("Flatten", ["r"], ["f"], axis=1, name="flat"),
             h.make_node("Gemm", ["f", "gw", "gb"], ["y"], transB=1, name="fc")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 8, 8])],
                         [h.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
save(sys.argv[1]); save(sys.argv[2], conv_weight_nan=True); save(sys.argv[3], negative_variance=True)
PY
cp "$work/model.onnx" "$work/model.copy"

check export_over_input 2 "--onnx '$ckpt' is the checkpoint this command reads" -- \
  "$bin" export --checkpoint "$ckpt" --onnx "$ckpt"
unchanged export_over_input "$ckpt" "$work/ckpt.copy"
check evaluate_out_over_checkpoint 2 "--out '$ckpt' is the checkpoint this command reads" -- \
  "$bin" evaluate "$job" "${tiny[@]}" --set run.dir="$work/run" --out "$ckpt"
unchanged evaluate_out_over_checkpoint "$ckpt" "$work/ckpt.copy"
shard=$(ls "$work"/tiny/test/shard-*.h5 | head -1)
cp "$shard" "$work/shard.copy"
check evaluate_out_over_shard 2 "--out '$shard' is a shard of the split evaluated this command reads" -- \
  "$bin" evaluate "$job" "${tiny[@]}" --set run.dir="$work/run" --out "$shard"
unchanged evaluate_out_over_shard "$shard" "$work/shard.copy"
train_shard=$(ls "$work"/tiny/train/shard-*.h5 | head -1)
cp "$train_shard" "$work/train_shard.copy"
check export_over_training_shard 2 "--onnx '$train_shard' is a shard of the training data this command reads" -- \
  "$bin" export --checkpoint "$ckpt" --onnx "$train_shard"
unchanged export_over_training_shard "$train_shard" "$work/train_shard.copy"
cp "$job" "$work/job.toml"
check evaluate_out_over_job 2 "--out '$work/job.toml' is the job file this command reads" -- \
  "$bin" evaluate "$work/job.toml" "${tiny[@]}" --set run.dir="$work/run" --out "$work/job.toml"
unchanged evaluate_out_over_job "$work/job.toml" "$job"
check import_out_over_input 2 "--out '$work/model.onnx' is the ONNX model this command reads" -- \
  "$bin" import --onnx "$work/model.onnx" --out "$work/model.onnx" --checkpoint "$work/i.h5" --mean 0.5 --std 0.25
check import_checkpoint_over_input 2 "--checkpoint '$work/model.onnx' is the ONNX model this command reads" -- \
  "$bin" import --onnx "$work/model.onnx" --out "$work/i.toml" --checkpoint "$work/model.onnx" --mean 0.5 --std 0.25
unchanged import_over_input "$work/model.onnx" "$work/model.copy"
absent import_over_input "$work/i.toml" "$work/i.h5" "$work/i-data"

cp -a "$work/tiny/train" "$work/real"
rm "$work/real/shard-00001-of-00002.h5"
cp "$work/real/shard-00000-of-00002.h5" "$work/shard.copy"
check import_real_split 2 "--data '$work/real' holds shards that do not open as an earlier import's description" -- \
  "$bin" import --onnx "$work/model.onnx" --out "$work/r.toml" --checkpoint "$work/r.h5" --data "$work/real" --mean 0.5 --std 0.25
unchanged import_real_split "$work/real/shard-00000-of-00002.h5" "$work/shard.copy"

cp "$ckpt" "$work/precious.h5"
mkdir -p "$work/outdir"
check import_out_folder 2 "--out '$work/outdir' is a folder" -- \
  "$bin" import --onnx "$work/model.onnx" --out "$work/outdir" --checkpoint "$work/precious.h5" --data "$work/d1" --mean 0.5 --std 0.25
unchanged import_out_folder "$work/precious.h5" "$work/ckpt.copy"
absent import_out_folder "$work/d1"
echo "a file, not a folder" >"$work/afile"
check import_job_unwritable 3 "cannot write the job file '$work/afile/a.toml." "pick a writable folder for --out" -- \
  "$bin" import --onnx "$work/model.onnx" --out "$work/afile/a.toml" --checkpoint "$work/precious.h5" --data "$work/d2" --mean 0.5 --std 0.25
unchanged import_job_unwritable "$work/precious.h5" "$work/ckpt.copy"
absent import_job_unwritable "$work/d2"
[ -z "$(ls "$work" | grep '\.tmp$')" ] || { echo "FAIL import_job_unwritable: left $(ls "$work" | grep '\.tmp$')"; failures=$((failures + 1)); }

check import_into_new_folders 0 "imported $work/model.onnx" -- \
  "$bin" import --onnx "$work/model.onnx" --out "$work/new/jobs/a.toml" --checkpoint "$work/new/ckpt/a.h5" --mean 0.5 --std 0.25
[ -f "$work/new/jobs/a.toml" ] && [ -f "$work/new/ckpt/a.h5" ] && [ -d "$work/new/jobs/a-data" ] ||
  { echo "FAIL import_into_new_folders: $(ls -R "$work/new" | tr '\n' ' ')"; failures=$((failures + 1)); }

check import_onnx_folder 4 "ONNX file '$work/outdir' cannot be read: it is a folder" -- \
  "$bin" import --onnx "$work/outdir" --out "$work/f.toml" --checkpoint "$work/f.h5" --mean 0.5 --std 0.25
check import_std_zero 2 "--std 0: each value must be a finite number above 0" -- \
  "$bin" import --onnx "$work/model.onnx" --out "$work/s.toml" --checkpoint "$work/s.h5" --mean 0.5 --std 0
absent import_std_zero "$work/s.toml" "$work/s.h5" "$work/s-data"
check import_eval_resize_small 2 "--eval-resize 4 is smaller than the samples' side" -- \
  "$bin" import --onnx "$work/model.onnx" --out "$work/e.toml" --checkpoint "$work/e.h5" --eval-resize 4
absent import_eval_resize_small "$work/e.toml" "$work/e.h5" "$work/e-data"

check import_nan 3 "holds 1 non-finite values (the first, nan, at index 0); the model's weights are damaged" -- \
  "$bin" import --onnx "$work/nan.onnx" --out "$work/n.toml" --checkpoint "$work/n.h5" --mean 0.5 --std 0.25
absent import_nan "$work/n.toml" "$work/n.h5" "$work/n-data"
check import_negative_variance 3 "its running variance holds -0.5 at channel 1" -- \
  "$bin" import --onnx "$work/negvar.onnx" --out "$work/v.toml" --checkpoint "$work/v.h5" --mean 0.5 --std 0.25
absent import_negative_variance "$work/v.toml" "$work/v.h5" "$work/v-data"

printf 'caf\xe9\nb\nc\n' >"$work/names.txt"
"$bin" import --onnx "$work/model.onnx" --out "$work/m.toml" --checkpoint "$work/m.h5" --mean 0.5 --std 0.25 \
  --class-names "$work/names.txt" >"$work/import.log" 2>&1 || { echo "FAIL: import: $(tail -2 "$work/import.log")"; failures=$((failures + 1)); }
check predict_description 4 "holds no samples (it describes a model's input only" -- \
  "$bin" predict --checkpoint "$work/m.h5" "$work/m-data"
# A later input that holds no samples is refused before the first input's lines are printed.
"$bin" predict --checkpoint "$work/m.h5" "$work/tiny/test" "$work/m-data" >"$work/later.out" 2>"$work/later.err"
rc=$?
if [ "$rc" = 4 ] && [ ! -s "$work/later.out" ] && grep -q "holds no samples" "$work/later.err"; then
  echo "ok   predict_later_description: exit 4 before any line: $(grep -m1 "holds no samples" "$work/later.err" | cut -c1-100)"
  passed=$((passed + 1))
else
  echo "FAIL predict_later_description: exit $rc, $(wc -l <"$work/later.out") line(s) printed first"
  failures=$((failures + 1))
fi
# The description another import's job file reads is not replaced by an import of another model (a copy of the file).
check import_over_other_description 2 "holds the description of another import's model ('$work/model.onnx')" -- \
  "$bin" import --onnx "$work/model.copy" --out "$work/m2.toml" --checkpoint "$work/m2.h5" --data "$work/m-data" \
  --mean 0.5 --std 0.25
absent import_over_other_description "$work/m2.toml" "$work/m2.h5"
# A re-import whose last output cannot be put in place (--out a bind mount, in a mount namespace of its own: the
# rename over it fails, EBUSY) puts the earlier checkpoint and description back: a failed import loses nothing of the
# earlier one. As root (unshare -m) or in a user namespace (unshare -rm); skipped, saying so, where neither exists.
cp "$work/m.h5" "$work/m.h5.copy"
cp "$work/m-data/shard-00000-of-00001.h5" "$work/m-data.copy"
touch "$work/mounted.toml"
namespace=""
for flags in -m -rm; do
  if unshare $flags --propagation private sh -c "mount --bind '$work/m.toml' '$work/mounted.toml'" 2>/dev/null; then
    namespace=$flags
    break
  fi
done
if [ -n "$namespace" ]; then
  check import_last_output_fails 3 "--out '$work/mounted.toml' cannot be written" -- \
    unshare $namespace --propagation private sh -c 'mount --bind "$1" "$2" && shift 2 && exec "$@"' sh \
    "$work/m.toml" "$work/mounted.toml" "$bin" import --onnx "$work/model.onnx" --out "$work/mounted.toml" \
    --checkpoint "$work/m.h5" --data "$work/m-data" --mean 0.25 --std 0.5
  unchanged import_last_output_fails "$work/m.h5" "$work/m.h5.copy"
  unchanged import_last_output_fails "$work/m-data/shard-00000-of-00001.h5" "$work/m-data.copy"
  leftovers=$(ls -a "$work" "$work/m-data" | grep -c -E '\.tmp|\.kept')
  [ "$leftovers" = 0 ] || { echo "FAIL import_last_output_fails: $leftovers temporaries left"; failures=$((failures + 1)); }
else
  echo "SKIP import_last_output_fails: no mount namespace here (unshare -m or -rm), so no rename can be made to fail"
fi
# --data is import's own folder: one that holds anything else, or a file, is refused and left as it was.
mkdir -p "$work/models"
echo keep >"$work/models/notes.txt"
check import_data_holds_other_files 2 "--data '$work/models' holds other things than an earlier import's description (e.g. 'notes.txt')" -- \
  "$bin" import --onnx "$work/model.onnx" --out "$work/o.toml" --checkpoint "$work/o.h5" --data "$work/models" \
  --mean 0.5 --std 0.25
[ "$(cat "$work/models/notes.txt" 2>/dev/null)" = keep ] || { echo "FAIL import_data_holds_other_files: notes.txt is gone"; failures=$((failures + 1)); }
check import_data_is_a_file 2 "--data '$work/model.copy' is not a folder" -- \
  "$bin" import --onnx "$work/model.onnx" --out "$work/o.toml" --checkpoint "$work/o.h5" --data "$work/model.copy" \
  --mean 0.5 --std 0.25
unchanged import_data_is_a_file "$work/model.copy" "$work/model.onnx"
absent import_data_refused "$work/o.toml" "$work/o.h5"
# Another model imported over the same --out replaces the description that --out's own job file read.
"$bin" import --onnx "$work/model.onnx" --out "$work/r.toml" --checkpoint "$work/r.h5" --mean 0.5 --std 0.25 \
  >"$work/r1.log" 2>&1 || { echo "FAIL: import r: $(tail -2 "$work/r1.log")"; failures=$((failures + 1)); }
check reimport_other_model 0 "input description $work/r-data" -- \
  "$bin" import --onnx "$work/model.copy" --out "$work/r.toml" --checkpoint "$work/r.h5" --mean 0.5 --std 0.25
check predict_precision 2 "--precision: bf17 not in" -- \
  "$bin" predict --checkpoint "$work/m.h5" --precision bf17 "$work/tiny/test"
# An 8x8 grey PNG (the import's names are the model's; a split's own names would be the split's).
python3 - "$work/grey.png" <<'PY'
import struct, sys, zlib
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
rows = b"".join(b"\0" + bytes(range(16 * y, 16 * y + 8)) for y in range(8))
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 8, 8, 0, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
open(sys.argv[1], "wb").write(png)
PY
check latin1_class_name 0 "\"name\":\"caf$(printf '\xef\xbf\xbd')\"" -- \
  "$bin" predict --checkpoint "$work/m.h5" --top 3 "$work/grey.png"

# A checkpoint as a GPU run writes it, trained in tf32: the CPU predicts with it in fp32.
cp "$ckpt" "$work/tf32.h5"
"$onnx_python" - "$work/tf32.h5" <<'PY' || { echo "FAIL: could not rewrite the checkpoint's job"; exit 1; }
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r+") as f:
    job = f.attrs["job_toml"]
    job = job.decode() if isinstance(job, bytes) else job
    assert "precision = 'fp32'" in job, job
    # The same fixed-length string type as ringtrain writes it.
    f.attrs["job_toml"] = np.bytes_(job.replace("precision = 'fp32'", "precision = 'tf32'").encode())
PY
check predict_tf32_on_cpu 0 '"top":[{"class":' -- "$bin" predict --checkpoint "$work/tf32.h5" "$work/tiny/test"
check evaluate_tf32_on_cpu 0 "accuracy" -- "$bin" evaluate "$job" "${tiny[@]}" --set run.dir="$work/run" \
  --set train.precision=tf32 --checkpoint "$work/tf32.h5"
check train_tf32_on_cpu 3 'train.precision = "tf32" needs the CUDA backend' -- \
  "$bin" train "$job" "${tiny[@]}" --set run.dir="$work/tf32run" --set train.precision=tf32

check freeze_everything 3 "train.freeze = \"head\" keeps every parameter fixed" -- \
  "$bin" train "$job" "${tiny[@]}" --set run.dir="$work/frozen" --set 'train.freeze="head"' \
  --set 'model.layers=[{type="flatten"},{type="dense",units=3,name="head"},{type="relu"}]'

# One job on both ranks, its data.test a relative path that each rank's working directory (mpirun's -wdir) makes
# another split: a stale node-local copy, as two nodes would see it.
mkdir -p "$work/node0" "$work/node1"
ln -s "$work/tiny/test" "$work/node0/test"
ln -s "$work/other/test" "$work/node1/test"
check evaluate_split_differs 4 "differs between ranks: rank 1 sees 24 samples" "rank 0 sees 16 samples" \
  "(found by rank 1/2 on " -- \
  mpirun -np 1 --oversubscribe -wdir "$work/node0" "$bin" evaluate "$job" "${tiny[@]}" --set run.dir="$work/run" \
  --set data.test=test : -np 1 -wdir "$work/node1" "$bin" evaluate "$job" "${tiny[@]}" --set run.dir="$work/run" \
  --set data.test=test

echo "$passed passed, $failures failed"
[ "$failures" -eq 0 ] && [ "$passed" -gt 0 ]
