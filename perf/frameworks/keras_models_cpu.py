"""Owns the Keras side of the model comparison (perf/compare_models_cpu.py): keras.applications.MobileNetV2
(alpha 1.0, no pretrained weights) or a ViT-S/16 built here from Keras layers (patch convolution, class token,
learned position embedding, 12 pre-norm blocks of 6-head MultiHeadAttention and a GELU MLP, final LayerNorm on the
class token), trained with SGD (momentum 0.9) on synthetic batches with --threads intra-op threads. Variants:
"default" (fit's compiled graph) and "xla" (jit_compile=True). --precision bf16 sets the mixed_bfloat16 policy (bf16
compute, fp32 variables; the ViT's logits fp32, as Keras's mixed-precision guide does). Prints one JSON line (models_common.report):
samples/s over the steps after the warm-up, timed by a callback from the end of the last warm-up batch.

Run with .venv-compare's python3 (scripts/install_deps.sh --comparison).
"""
import os
import time

import models_common as common

args = common.arguments(__doc__)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402  (thread settings must precede any TensorFlow work)
import keras  # noqa: E402
from keras import layers  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(args.threads)
tf.config.threading.set_inter_op_parallelism_threads(1)
if args.precision == "bf16":
    keras.mixed_precision.set_global_policy("mixed_bfloat16")


class ClassTokenAndPositions(layers.Layer):
    """Prepends a learned class token and adds learned position embeddings."""

    def build(self, shape):
        self.token = self.add_weight(shape=(1, 1, shape[-1]), initializer="zeros", name="class_token")
        self.positions = self.add_weight(shape=(1, shape[1] + 1, shape[-1]),
                                         initializer=keras.initializers.RandomNormal(stddev=0.02), name="positions")

    def call(self, x):
        token = tf.repeat(self.token, tf.shape(x)[0], axis=0)
        return tf.concat([token, x], axis=1) + self.positions


def vit_s16(size):
    width, heads, mlp = 384, 6, 1536
    inputs = keras.Input((size, size, 3))
    x = layers.Conv2D(width, 16, strides=16)(inputs)
    x = layers.Reshape(((size // 16) ** 2, width))(x)
    x = ClassTokenAndPositions()(x)
    for _ in range(12):
        y = layers.LayerNormalization(epsilon=1e-6)(x)
        x = x + layers.MultiHeadAttention(heads, width // heads)(y, y)
        y = layers.LayerNormalization(epsilon=1e-6)(x)
        y = layers.Dense(mlp, activation="gelu")(y)
        x = x + layers.Dense(width)(y)
    x = layers.LayerNormalization(epsilon=1e-6)(x[:, 0])
    return keras.Model(inputs, layers.Dense(common.CLASSES, dtype="float32")(x))


def network():
    if args.model == "mobilenet_v2":
        return keras.applications.MobileNetV2(input_shape=(args.size, args.size, 3), weights=None,
                                              classes=common.CLASSES, classifier_activation=None)
    return vit_s16(args.size)


class Timer(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if batch == args.warmup - 1:
            self.start = time.perf_counter()
        if batch == args.warmup + args.steps - 1:
            self.seconds = time.perf_counter() - self.start


def main():
    keras.utils.set_random_seed(1)
    model = network()
    model.compile(optimizer=keras.optimizers.SGD(0.01, momentum=0.9),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile=args.variant == "xla")
    data = common.batches(args, channels_last=True)
    images = tf.data.Dataset.from_tensor_slices(([x for x, _ in data], [y for _, y in data])).repeat()
    timer = Timer()
    history = model.fit(images, epochs=1, steps_per_epoch=args.warmup + args.steps, callbacks=[timer], verbose=0)
    common.report("keras", args, timer.seconds, {"version": keras.__version__, "tensorflow": tf.__version__,
                                                 "last_loss": float(history.history["loss"][-1])})


if __name__ == "__main__":
    main()
