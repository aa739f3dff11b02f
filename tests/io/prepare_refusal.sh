# Sourced by the prepare round-trip tests: refuse KIND EXPECTED_TEXT ARGS... runs `$bin prepare KIND ARGS --out
# bad` in the current folder; it must fail, say EXPECTED_TEXT (a grep pattern), and leave no output folder.
refuse() {
  local kind=$1 want=$2; shift 2
  if "$bin" prepare "$kind" "$@" --out bad >out.txt 2>&1; then echo "FAIL: accepted: prepare $kind $*"; exit 1; fi
  grep -q -- "$want" out.txt || { echo "FAIL: 'prepare $kind $*' did not say '$want':"; cat out.txt; exit 1; }
  [[ ! -e bad ]] || { echo "FAIL: 'prepare $kind $*' left an output folder"; exit 1; }
  echo "ok   refused: $want"
}
