"""Owns the Keras/TensorFlow side of the framework comparison: the Fashion-MNIST CNN of jobs/fashion_mnist.toml
trained by Keras 3 on TensorFlow with MirroredStrategy over --ranks logical CPU devices (one replica each,
--batch-per-rank samples per replica), TensorFlow's thread pools sized to ranks x threads-per-rank; --precision
bf16 trains under Keras's mixed_bfloat16 policy (bf16 compute, fp32 variables, fp32 logits). Prints one
JSON line (fmnist_common.report): samples/s over the batches after the warm-up, timed by a callback.

Run by perf/compare_frameworks_cpu.py with the comparison venv's python (.venv-compare, PyPI's tensorflow).
"""
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

import fmnist_common as common  # noqa: E402


class Timer(keras.callbacks.Callback):
    """Wall time from the end of the last warm-up batch to the end of the last timed batch."""

    def __init__(self, warmup):
        super().__init__()
        self.warmup, self.start, self.end = warmup, None, None

    def on_train_batch_end(self, batch, logs=None):
        if batch == self.warmup - 1:
            self.start = time.perf_counter()
        self.end = time.perf_counter()


def network():
    # Channels-last, TensorFlow's CPU layout; the same layers and parameter count as the other two.
    wd = keras.regularizers.L2(common.WEIGHT_DECAY / 2)  # L2(l) adds l * sum(w^2): gradient 2l w = wd * w
    return keras.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Conv2D(32, 5, padding="same", use_bias=False, kernel_regularizer=wd),
        keras.layers.BatchNormalization(momentum=0.9, epsilon=1e-5), keras.layers.ReLU(), keras.layers.MaxPooling2D(2),
        keras.layers.Conv2D(64, 5, padding="same", use_bias=False, kernel_regularizer=wd),
        keras.layers.BatchNormalization(momentum=0.9, epsilon=1e-5), keras.layers.ReLU(), keras.layers.MaxPooling2D(2),
        keras.layers.Flatten(), keras.layers.Dense(1024, activation="relu", kernel_regularizer=wd),
        keras.layers.Dense(common.CLASSES, kernel_regularizer=wd, dtype="float32")])  # fp32 logits under bf16


def main():
    args = common.arguments(__doc__, precisions=("fp32", "bf16"))
    if args.precision == "bf16":
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    threads = args.ranks * args.threads_per_rank
    tf.config.threading.set_intra_op_parallelism_threads(args.threads_per_rank)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * args.ranks)
    strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(args.ranks)])
    images, labels = common.training_set()
    images = images.transpose(0, 2, 3, 1)
    global_batch = args.batch_per_rank * args.ranks
    total = args.warmup + args.steps
    data = tf.data.Dataset.from_tensor_slices((images, labels)).repeat().batch(global_batch, drop_remainder=True)
    data = data.take(total).prefetch(4)
    with strategy.scope():
        model = network()
        model.compile(optimizer=keras.optimizers.SGD(learning_rate=common.LR, momentum=common.MOMENTUM),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    timer = Timer(args.warmup)
    history = model.fit(data, epochs=1, steps_per_epoch=total, callbacks=[timer], verbose=0)
    common.report("keras_tf_mirrored", args, timer.end - timer.start,
                  {"version": f"keras {keras.__version__}, tensorflow {tf.__version__}",
                   "replicas": strategy.num_replicas_in_sync, "jit_compile": bool(model.jit_compile),
                   "last_loss": float(history.history["loss"][-1])})


if __name__ == "__main__":
    main()
