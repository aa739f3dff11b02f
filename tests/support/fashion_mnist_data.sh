# Sourced by tests that need Fashion-MNIST as shards: prepare_fashion_mnist BIN DATA_DIR prepares
# DATA_DIR/fmnist once (under a lock, so tests running at once share it), or exits 77 (CTest's skip) without
# Debian's dataset-fashion-mnist.
prepare_fashion_mnist() {
  local bin=$1 data=$2
  if [ ! -d /usr/share/datasets/fashion-mnist ]; then
    echo "SKIP: /usr/share/datasets/fashion-mnist is missing (apt-get install dataset-fashion-mnist)"; exit 77
  fi
  mkdir -p "$data"
  ( flock 9
    [ -f "$data/fmnist/.complete" ] || { "$bin" prepare fashion-mnist --out "$data/fmnist" --shards 8 --overwrite && touch "$data/fmnist/.complete"; }
  ) 9>"$data/.fmnist.lock"
}
