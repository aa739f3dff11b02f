"""Owns how the CPU framework comparisons (compare_frameworks_cpu.py, compare_models_cpu.py) run their peers and
report: each repeat runs every entry once, in an order rotated from repeat to repeat (no entry always first), so
load changes hit every framework alike; each run's record (one JSON object) goes to stderr as it lands and, with
--out, to a JSON-lines file; the table gives each entry's median and range and ringtrain's ratio to it, of the
medians and paired per repeat (which a machine whose speed drifts between repeats moves less).
"""
import json
import os
import statistics
import subprocess
import sys


class RunFailed(Exception):
    """A run that exited non-zero or printed no result. str(): the command and the end of its output; .reason: the
    output's last line (a Python error's message)."""

    def __init__(self, message, output):
        super().__init__(message)
        lines = [line for line in output.splitlines() if line.strip()]
        self.reason = lines[-1].strip() if lines else message


def run_json_line(command, cwd, env=None):
    """Runs a command and returns the last line of its stdout that parses as JSON; raises RunFailed with its stderr
    if it fails."""
    done = subprocess.run(command, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise RunFailed(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}", done.stderr)
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RunFailed(f"{' '.join(command)} printed no result:\n{done.stdout[-2000:]}", done.stdout)


def run_interleaved(entries, repeats, out_path=None):
    """entries: callables returning a record (a dict with "samples_per_s"). Returns every record, each with its
    repeat and the load average before it."""
    records = []
    if out_path:  # each record is appended as it lands: a run that fails later loses none of the earlier ones
        open(out_path, "w").close()
    for repeat in range(repeats):
        shift = repeat % len(entries)
        for run in entries[shift:] + entries[:shift]:
            load = os.getloadavg()[0]
            record = run()
            record.update({"repeat": repeat + 1, "load_average_before": load})
            print(json.dumps(record), file=sys.stderr, flush=True)
            records.append(record)
            if out_path:
                with open(out_path, "a") as f:
                    f.write(json.dumps(record) + "\n")
    return records


def table(records, name_of, ours):
    """Markdown: one row per name_of(record), ringtrain's (the row named `ours`) ratio to each. A peer's best
    variant is the row with its highest median among rows whose record has the same "framework" (ringtrain's own
    other rows are not marked); where that best row ran at another precision than ringtrain's row, the mark says so,
    since the ratio is then not like for like. A run recorded as failed (a "failed" field: the reason) gets a row
    saying so; a row with fewer runs than the others shows it in its "runs" column."""
    failed = {name_of(r): r["failed"] for r in records if "failed" in r}
    records = [r for r in records if "failed" not in r]
    by, framework_of, precision_of = {}, {}, {}
    for r in records:
        name = name_of(r)
        by.setdefault(name, {})[r["repeat"]] = r["samples_per_s"]
        framework_of[name] = r["framework"]
        precision_of[name] = r.get("precision")
    medians = {name: statistics.median(rates.values()) for name, rates in by.items()}
    best = {}
    for name, median in medians.items():
        # ringtrain's other rows (another precision) are no peer: only other frameworks get a best.
        if framework_of[name] != framework_of[ours] and median > medians.get(best.get(framework_of[name]), 0):
            best[framework_of[name]] = name
    ours_by_repeat = by[ours]
    lines = ["| run | samples/s, median | range | runs | ringtrain / this | paired, per repeat: median (range) |",
             "|---|---|---|---|---|---|"]
    for name, by_repeat in by.items():
        rates = list(by_repeat.values())
        paired = [ours_by_repeat[k] / v for k, v in by_repeat.items() if k in ours_by_repeat]
        mark = " **(best)**" if best.get(framework_of[name]) == name and name != ours else ""
        if mark and None not in (precision_of[name], precision_of[ours]) and precision_of[name] != precision_of[ours]:
            mark = f" **(best; {precision_of[name]} against ringtrain's {precision_of[ours]}: not like for like)**"
        lines.append(f"| {name}{mark} | {medians[name]:,.1f} | {min(rates):,.1f} – {max(rates):,.1f} | {len(rates)} | "
                     f"{medians[ours] / medians[name]:.2f}x | {statistics.median(paired):.2f}x "
                     f"({min(paired):.2f} – {max(paired):.2f}) |")
    lines += [f"| {name} | failed: {reason} | | | | |" for name, reason in failed.items() if name not in by]
    return "\n".join(lines)
