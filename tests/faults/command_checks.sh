# Sourced by the fault scripts that run one command per case: `check` runs a command and wants its exit code and
# texts, `absent` wants no output file left. Both count into the caller's `passed` and `failures`, and write logs
# under its `work` folder.

# check NAME EXIT_CODE TEXT... -- COMMAND...: the command must exit EXIT_CODE with every TEXT in its output.
check() {
  local name=$1 code=$2 texts=()
  shift 2
  while [ "$1" != "--" ]; do texts+=("$1"); shift; done
  shift
  timeout 120 "$@" >"$work/$name.log" 2>&1
  local rc=$? why=()
  [ "$rc" = "$code" ] || why+=("exit $rc, want $code")
  for text in "${texts[@]}"; do grep -qF -- "$text" "$work/$name.log" || why+=("no '$text'"); done
  if [ ${#why[@]} -eq 0 ]; then
    echo "ok   $name: exit $rc: $(grep -F -- "${texts[0]}" "$work/$name.log" | head -1 | sed 's/^ *//' | cut -c1-150)"
    passed=$((passed + 1))
  else
    echo "FAIL $name: ${why[*]}"
    sed 's/^/  | /' "$work/$name.log" | head -20
    failures=$((failures + 1))
  fi
}

# absent NAME PATH...: none may exist (a refused command leaves no output behind).
absent() {
  local name=$1 path
  shift
  for path in "$@"; do [ ! -e "$path" ] || { echo "FAIL $name: '$path' was left behind"; failures=$((failures + 1)); }; done
}
