"""perf/gpu/gpu_summary.py: the GPU call's record format and its pass/fail checks, from fake run directories
(the GPU machine produces the real ones; this proves the summary before a GPU is lent)."""
import json
import os
import pathlib
import sys
import tempfile
import unittest
import unittest.mock

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "perf", "gpu"))
import gpu_summary as gs  # noqa: E402

ALLOCATIONS = "resnet50 fp32 batch 256: ringtrain's peak memory <= PyTorch's (allocations: theirs max_memory_allocated)"
TF32 = "resnet50 tf32 batch 256: ringtrain's peak memory <= PyTorch's (allocations: theirs max_memory_allocated)"
DEVICE = "resnet50 fp32 batch 256: ringtrain's device memory, all but the context <= PyTorch's max_memory_reserved"
FMNIST_RATE = "fashion_mnist fp32: ringtrain's steady samples/s >= 1.5 x PyTorch's best"
TF32_RATE = "resnet50 tf32: ringtrain's steady samples/s >= PyTorch's best"


def check_starting(rows, prefix):
    """The one check whose label starts with prefix (a check against PyTorch's best names its mode after it)."""
    found = [r for r in rows if r.get("check", "").startswith(prefix)]
    assert len(found) == 1, (prefix, [r.get("check") for r in rows])
    return found[0]


def write_run(out, name, batch, steady, peak, start, warmup=10, steps=60, allocated=None):
    run = out / f"ringtrain-{name}"
    run.mkdir()
    records = [{"kind": "job", "batch_per_rank": batch, "ranks": 1, "backend": "cuda, test"},
               {"kind": "epoch", "steps": steps, "steady_samples_per_s": steady, "timing_warmup_steps": warmup,
                "device_memory_peak_mb": peak, "device_memory_at_start_mb": start}]
    if allocated is not None:
        records[-1]["device_memory_allocated_peak_mb"] = allocated
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def torch_record(model, precision, batch, rate, peak, channels_last=False):
    return {"kind": "train", "model": model, "precision": precision, "batch": batch, "samples_per_s": rate,
            "peak_memory_mib": peak, "peak_reserved_mib": peak + 100, "channels_last": channels_last,
            "warmup_steps": 10, "timed_steps": 60, "device": "NVIDIA H100 80GB HBM3"}


class GpuSummary(unittest.TestCase):
    def run_summary(self, fm_rate, rn_peak, rn_allocated=None, tf32_allocated=None):
        with tempfile.TemporaryDirectory() as root:
            out = pathlib.Path(root)
            (out / "nvidia-smi-L.txt").write_text("GPU 0: NVIDIA H100 80GB HBM3 (UUID: x)\n")
            (out / "test_gpu.log").write_text("[==========] 20 tests ran.\n[  PASSED  ] 20 tests.\n")
            write_run(out, "fmnist", 64, fm_rate, 1500, 500)
            write_run(out, "resnet50", 256, 900, 500 + rn_peak, 500, allocated=rn_allocated)
            write_run(out, "resnet50-tf32", 256, 1600, 30000, 500, allocated=tf32_allocated)
            records = [torch_record("fmnist", "fp32", 64, 10000, 300), torch_record("resnet50", "fp32", 256, 1000, 21400),
                       torch_record("resnet50", "tf32", 256, 1800, 21300),
                       torch_record("resnet50", "bf16", 256, 3984, 12000, channels_last=True),
                       {"kind": "matmul", "precision": "bf16", "flops_per_s": 7e14}]
            (out / "pytorch.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
            sys.argv = ["gpu_summary.py", str(out), "--date", "2026-11-24"]
            gs.main()
            return [json.loads(line) for line in (out / "gpu-summary.jsonl").read_text().splitlines()]

    def test_observability_checks_read_the_fmnist_run(self):
        with tempfile.TemporaryDirectory() as root:
            out = pathlib.Path(root)
            write_run(out, "fmnist", 64, 1000, 1500, 500)
            (out / "ringtrain-fmnist" / "gpu.jsonl").write_text(json.dumps({"utilization": 90}) + "\n")
            events = [{"name": n, "ph": "X"} for n in ("forward", "backward", "optimizer", "allreduce", "allreduce")]
            (out / "ringtrain-fmnist" / "trace-rank0.json").write_text(json.dumps({"traceEvents": events}))
            checks = gs.observability_checks(out)
            self.assertTrue(all(c["passed"] for c in checks), checks)
            self.assertEqual(checks[1]["allreduce_spans"], 2)

    def test_rows_carry_the_record_format(self):
        rows = self.run_summary(fm_rate=16000, rn_peak=20000)
        measurements = [r for r in rows if "impl" in r and "measure" not in r]
        self.assertEqual(len(measurements), 7)
        for r in measurements:
            for key in ("date", "device", "impl", "model", "precision", "layout", "batch", "ranks", "samples_per_s",
                        "warmup_steps", "timed_steps", "peak_mem_mib", "mem_includes"):
                self.assertIn(key, r)
        ours = next(r for r in measurements if r["impl"] == "ringtrain" and r["model"] == "resnet50"
                    and r["precision"] == "fp32")
        self.assertEqual(ours["peak_mem_mib"], 20000)  # no allocator figure: peak less the memory in use at the start
        self.assertEqual(ours["device_peak_mib"], 20000)
        self.assertIn("cudaMemGetInfo", ours["mem_includes"])
        self.assertEqual(ours["timed_steps"], 50)
        self.assertEqual(ours["device"], "GPU 0: NVIDIA H100 80GB HBM3 (UUID: x)")
        self.assertTrue(any(r["layout"] == "nhwc" for r in measurements))

    def test_the_allocator_peak_is_compared_with_max_memory_allocated(self):
        rows = self.run_summary(fm_rate=16000, rn_peak=21450, rn_allocated=21000, tf32_allocated=21300)
        ours = next(r for r in rows if r.get("impl") == "ringtrain" and r["model"] == "resnet50"
                    and r["precision"] == "fp32")
        self.assertEqual((ours["peak_mem_mib"], ours["device_peak_mib"]), (21000, 21450))
        self.assertIn("cudaMalloc", ours["mem_includes"])
        checks = {r["check"]: r for r in rows if "check" in r}
        allocations = checks[ALLOCATIONS]
        self.assertTrue(allocations["passed"])
        self.assertEqual((allocations["ringtrain"], allocations["reference"]), (21000, 21400))
        self.assertTrue(checks[TF32]["passed"])  # 21300 <= 21300
        device = checks[DEVICE]
        self.assertTrue(device["passed"])  # 21450 <= the reserved 21500
        self.assertEqual((device["ringtrain"], device["reference"]), (21450, 21500))
        checks = {r["check"]: r["passed"] for r in self.run_summary(16000, rn_peak=21600, rn_allocated=21401)
                  if "check" in r}
        self.assertFalse(checks[ALLOCATIONS])
        self.assertFalse(checks[DEVICE])
        self.assertFalse(checks[TF32])  # no allocator figure: the device peak, 29500

    def test_a_test_log_passes_only_when_a_test_passed(self):
        logs = {"ran": "[==========] 3 tests ran.\n[  PASSED  ] 2 tests.\n[  SKIPPED ] 1 test, listed below:\n",
                "skipped": "[==========] 3 tests ran.\n[  PASSED  ] 0 tests.\n[  SKIPPED ] 3 tests, listed below:\n",
                "failed": "[  PASSED  ] 2 tests.\n[  FAILED  ] 1 test, listed below:\n",
                # A segfault or `timeout` ends the binary before GoogleTest's result lines.
                "crashed": "[==========] Running 20 tests from 3 test suites.\n[ RUN      ] Gpu.A\n[       OK ] Gpu.A (5 ms)\n"
                           "[ RUN      ] Gpu.B\n",
                "empty": ""}
        with tempfile.TemporaryDirectory() as root:
            out = pathlib.Path(root)
            for name, text in logs.items():
                (out / f"{name}.log").write_text(text)
            verdict = {name: gs.test_log_check(out, f"{name}.log", name) for name in logs}
            missing = gs.test_log_check(out, "not-run.log", "not run")
        self.assertIs(verdict["ran"]["passed"], True)
        self.assertIsNone(verdict["skipped"]["passed"])  # every test skipped: nothing proved, not a pass
        self.assertEqual((verdict["skipped"]["tests_passed"], verdict["skipped"]["tests_skipped"]), (0, 3))
        self.assertIs(verdict["failed"]["passed"], False)
        for name in ("crashed", "empty"):
            self.assertIs(verdict[name]["passed"], False, name)
            self.assertEqual(verdict[name]["reason"], "no result line: crashed or timed out")
        self.assertIsNone(missing["passed"])  # no log at all: the tests were not run
        self.assertEqual(gs.summary_lines([], [], [], [verdict["skipped"]]), ["SKIPPED skipped (0 passed, 3 skipped)"])
        self.assertEqual(gs.summary_lines([], [], [], [verdict["crashed"]]),
                         ["FAIL    crashed (0 passed, 0 skipped; no result line: crashed or timed out)"])
        self.assertEqual(gs.summary_lines([], [], [], [missing]), ["MISSING not run"])

    def test_checks_pass_and_fail_on_the_numbers(self):
        rows = self.run_summary(fm_rate=16000, rn_peak=20000)
        checks = {r["check"]: r["passed"] for r in rows if "check" in r}
        self.assertEqual(sum(v is True for v in checks.values()), 3)
        self.assertFalse(checks["NVML samples in gpu.jsonl (fashion_mnist, every 1 s)"])  # the run kept none
        self.assertIsNone(checks["trace: allreduce bucket spans and device-timed forward/backward/optimizer phases"])
        self.assertIsNone(checks["test_layers (CUDA cases) passes"])  # no log: missing, not passed
        # Only eager PyTorch ran: no verdict on the rates, whatever the numbers (eager is not PyTorch's best).
        for prefix, ours, reference in [(FMNIST_RATE, 16000, 15000), (TF32_RATE, 1600, 1800)]:
            rate = check_starting(rows, prefix)
            self.assertIsNone(rate["passed"], prefix)
            self.assertEqual((rate["ringtrain"], rate["reference"]), (ours, reference))
            self.assertEqual(rate["check"], prefix + " (eager, nchw; incomplete peer: no torch.compile mode ran)")
        checks = {r["check"]: r["passed"] for r in self.run_summary(fm_rate=14000, rn_peak=30000) if "check" in r}
        self.assertFalse(checks[ALLOCATIONS])


def mode_record(model, mode, rate=None, status="ok", reason=None, precision="bf16", peak=1000):
    """compare_pytorch.py's line for one mode (issue 38): a skipped or failed mode has a reason and no numbers."""
    record = {"kind": "train", "model": model, "precision": precision, "mode": mode, "status": status,
              "channels_last": True, "device": "NVIDIA H100 80GB HBM3", "torch": "2.11.0+cu130"}
    if status == "ok":
        record.update(batch=64 if model == "fmnist" else 256, samples_per_s=rate, peak_memory_mib=peak,
                      steady_peak_memory_mib=peak - 10, warmup_steps=10, timed_steps=30, sgd="fused",
                      train_flops_per_sample=24.5e9, compile_s=60.0 if mode.startswith("compile") else None)
    else:
        record["reason"] = reason
    return record


class PytorchModes(unittest.TestCase):
    """The PyTorch peer at its best: one row per mode, the best of those that ran, ringtrain / best."""

    def summary(self, records, fm_rate=None, rn_rate=None, cuda_graphs=None):
        with tempfile.TemporaryDirectory() as root:
            out = pathlib.Path(root)
            if fm_rate is not None:
                write_run(out, "fmnist", 64, fm_rate, 1500, 500)
                if cuda_graphs is not None:  # the job record's flag, once ringtrain captures its step
                    path = out / "ringtrain-fmnist" / "metrics.jsonl"
                    lines = path.read_text().splitlines()
                    lines[0] = json.dumps({**json.loads(lines[0]), "cuda_graphs": cuda_graphs})
                    path.write_text("\n".join(lines) + "\n")
            if rn_rate is not None:
                write_run(out, "resnet50-tf32", 256, rn_rate, 12000, 500, allocated=11000)
            (out / "pytorch.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
            sys.argv = ["gpu_summary.py", str(out), "--date", "2026-11-27"]
            gs.main()
            return [json.loads(line) for line in (out / "gpu-summary.jsonl").read_text().splitlines()]

    def test_every_mode_is_a_row_and_a_skipped_one_has_no_number(self):
        rows = self.summary([mode_record("resnet50", "eager", 4700), mode_record("resnet50", "compile", 5300),
                             mode_record("resnet50", "compile_max_autotune", status="skipped",
                                         reason="minutes of compile: only when --modes names it"),
                             mode_record("resnet50", "compile_reduce_overhead", status="failed",
                                         reason="RuntimeError: x")])
        torch_rows = {r["mode"]: r for r in rows if r.get("impl") == "pytorch" and "model" in r}
        self.assertEqual(set(torch_rows), {"eager", "compile", "compile_max_autotune", "compile_reduce_overhead"})
        skipped = torch_rows["compile_max_autotune"]
        self.assertEqual((skipped["status"], skipped["samples_per_s"]), ("skipped", None))
        self.assertIn("--modes", skipped["reason"])
        self.assertIsNone(torch_rows["compile_reduce_overhead"]["samples_per_s"])
        self.assertEqual(torch_rows["compile"]["compile_s"], 60.0)
        self.assertEqual(torch_rows["compile"]["torch"], "2.11.0+cu130")

    def test_the_best_is_the_fastest_mode_that_ran_and_the_ratio_is_ours_over_it(self):
        rows = self.summary([mode_record("resnet50", "eager", 4700, precision="tf32"),
                             mode_record("resnet50", "eager_benchmark", 4800, precision="tf32"),
                             mode_record("resnet50", "compile", 5000, precision="tf32"),
                             mode_record("resnet50", "compile_max_autotune", status="skipped", reason="budget",
                                         precision="tf32")], rn_rate=6000)
        versus = next(r for r in rows if r.get("comparison", "").startswith("resnet50 tf32"))
        self.assertEqual((versus["pytorch_best"], versus["pytorch_best_mode"]), (5000, "compile"))
        self.assertAlmostEqual(versus["ratio"], 1.2)
        self.assertEqual(versus["pytorch_modes_measured"], ["compile", "eager", "eager_benchmark"])

    def test_lines_before_issue_38_are_eager(self):
        rows = self.summary([torch_record("fmnist", "fp32", 64, 10000, 300)], fm_rate=16000)
        row = next(r for r in rows if r.get("impl") == "pytorch" and "model" in r)
        self.assertEqual((row["mode"], row["status"], row["sgd"]), ("eager", "ok", "default"))
        self.assertIsNone(check_starting(rows, FMNIST_RATE)["passed"])  # eager only: not PyTorch's best

    def test_fashion_mnist_against_one_and_a_half_times_the_best_mode_measured(self):
        records = [dict(mode_record("fmnist", mode, rate, status, reason, precision="fp32"), channels_last=False)
                   for mode, rate, status, reason in [("eager", 10000, "ok", None), ("eager_benchmark", 12000, "ok", None),
                                                      ("compile", 11000, "ok", None)]]
        check = check_starting(self.summary(records, fm_rate=16000), FMNIST_RATE)
        # 16000 is 1.5 x eager's 10000, not 1.5 x eager_benchmark's 12000.
        self.assertEqual((check["passed"], check["reference"]), (False, 18000))
        self.assertEqual((check["reference_mode"], check["reference_layout"]), ("eager_benchmark", "nchw"))
        self.assertEqual(check["check"], FMNIST_RATE + " (eager_benchmark, nchw)")
        self.assertTrue(check_starting(self.summary(records, fm_rate=18000), FMNIST_RATE)["passed"])

    def test_resnet50_tf32_against_pytorch_of_the_same_run(self):
        records = [mode_record("resnet50", "eager", 1800, precision="tf32"),
                   mode_record("resnet50", "eager_benchmark", 2000, precision="tf32"),
                   dict(mode_record("resnet50", "eager", 2500, precision="tf32"), channels_last=True),
                   mode_record("resnet50", "compile", 2400, precision="tf32")]
        records[0]["channels_last"] = records[1]["channels_last"] = False
        check = check_starting(self.summary(records, rn_rate=2200), TF32_RATE)
        self.assertEqual((check["passed"], check["reference"]), (False, 2500))  # the fastest mode and layout
        self.assertEqual(check["check"], TF32_RATE + " (eager, nhwc)")
        self.assertTrue(check_starting(self.summary(records, rn_rate=2600), TF32_RATE)["passed"])
        # No PyTorch tf32 row in the run: nothing to compare with, so no verdict (not a pass against a fixed number).
        check = check_starting(self.summary([mode_record("resnet50", "eager", 4000)], rn_rate=2200), TF32_RATE)
        self.assertIsNone(check["passed"])
        self.assertEqual(check["check"], TF32_RATE + " (none measured)")

    def test_a_peer_without_a_compiled_mode_gives_no_verdict_and_says_so(self):
        eager = [mode_record("resnet50", "eager", 1800, precision="tf32"),
                 mode_record("resnet50", "eager_benchmark", 2000, precision="tf32"),
                 mode_record("resnet50", "compile_reduce_overhead", status="failed", reason="budget", precision="tf32")]
        rows = self.summary(eager, rn_rate=2600)
        check = check_starting(rows, TF32_RATE)
        self.assertIsNone(check["passed"])  # 2600 beats 2000, but 2000 is eager
        self.assertEqual(check["pytorch_incomplete"], "no torch.compile mode ran")
        versus = next(r for r in rows if r.get("comparison", "").startswith("resnet50 tf32"))
        self.assertEqual(versus["pytorch_incomplete"], "no torch.compile mode ran")
        self.assertIn("(incomplete peer: no torch.compile mode ran; not PyTorch's best)",
                      gs.summary_lines([], [], [versus], [])[0])
        compiled = eager + [mode_record("resnet50", "compile", 2300, precision="tf32")]
        check = check_starting(self.summary(compiled, rn_rate=2600), TF32_RATE)
        self.assertTrue(check["passed"])
        self.assertIsNone(check["pytorch_incomplete"])

    def test_the_versus_line_names_the_modes_measured(self):
        records = [mode_record("resnet50", "eager", 1800, precision="tf32"),
                   mode_record("resnet50", "eager_benchmark", 2000, precision="tf32")]
        with tempfile.TemporaryDirectory() as root:
            out = pathlib.Path(root)
            write_run(out, "resnet50-tf32", 256, 2200, 12000, 500, allocated=11000)
            (out / "pytorch.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
            rows = gs.ringtrain_rows(out, "2026-11-27", "gpu") + gs.pytorch_rows(out, "2026-11-27", "gpu")[0]
        lines = gs.summary_lines([], [], gs.comparisons(rows), [])
        self.assertIn("2000 (eager_benchmark, nhwc; of the modes measured: eager, eager_benchmark) = 1.10x", lines[0])

    def test_fashion_mnist_against_three_times_reduce_overhead(self):
        check = "fashion_mnist bf16: ringtrain (CUDA graphs) >= 3 x PyTorch compile_reduce_overhead"
        records = [mode_record("fmnist", "eager", 20000, precision="bf16"),
                   mode_record("fmnist", "compile_reduce_overhead", 40000, precision="bf16")]
        with unittest.mock.patch.object(gs, "ringtrain_rows", lambda out, date, device: [
                {"impl": "ringtrain", "model": "fashion_mnist", "precision": "bf16", "layout": "nhwc",
                 "samples_per_s": 130000, "batch": 64, "timed_steps": 90, "warmup_steps": 10, "peak_mem_mib": 300,
                 "cuda_graphs": True}]):
            rows = self.summary(records)
        result = next(r for r in rows if r.get("check") == check)
        self.assertTrue(result["passed"])
        self.assertEqual((result["reference"], result["ringtrain_cuda_graphs"]), (120000, True))
        result = next(r for r in self.summary(records, fm_rate=110000) if r.get("check") == check)
        self.assertIsNone(result["passed"])  # the job ran fp32 only: no bf16 ringtrain row to compare
        records = [dict(r, precision="fp32") for r in records]
        result = next(r for r in self.summary(records, fm_rate=110000) if "check" in r and "(CUDA graphs)" in r["check"])
        self.assertFalse(result["passed"])
        self.assertIsNone(result["ringtrain_cuda_graphs"])  # a job record from before CUDA graphs

    def test_the_bf16_rows_carry_their_share_of_the_matmul_rate(self):
        rows = self.summary([mode_record("resnet50", "compile", 5000),
                             {"kind": "matmul", "precision": "bf16", "n": 8192, "flops_per_s": 7e14, "status": "ok"},
                             {"kind": "matmul", "precision": "tf32", "n": 8192, "status": "skipped", "reason": "cpu"}])
        row = next(r for r in rows if r.get("mode") == "compile")
        self.assertAlmostEqual(row["matmul_share"], 5000 * 24.5e9 / 7e14)
        self.assertEqual([r["precision"] for r in rows if r.get("measure") == "dense matmul rate"], ["bf16"])


if __name__ == "__main__":
    unittest.main()
