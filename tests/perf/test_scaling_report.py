"""perf/scaling_report.py: speedup, efficiency and per-step time split from run directories."""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "perf"))
import scaling_report as sr  # noqa: E402


def write_run(root, name, ranks, samples_per_s, steps=10, optimizer=None, accs=(0.5,), global_batch=None):
    run = os.path.join(root, name)
    os.makedirs(run)
    with open(os.path.join(run, "metrics.jsonl"), "w") as f:
        job = {"kind": "job", "params": 10}
        if optimizer:
            job["optimizer"] = optimizer
        f.write(json.dumps(job) + "\n")
        for epoch, acc in enumerate(accs, start=1):
            f.write(json.dumps({"kind": "epoch", "epoch": epoch, "ranks": ranks,
                                "global_batch": global_batch or 64 * ranks, "steps": steps,
                                "samples_per_s": samples_per_s, "epoch_train_s": 2.0, "data_wait_s": 0.1,
                                "forward_s": 0.5, "backward_s": 1.0, "allreduce_s": 0.3, "optimizer_s": 0.1,
                                "allreduce_total_s": 0.9, "test_acc": acc}) + "\n")
    return run


class Report(unittest.TestCase):
    def test_speedup_efficiency_and_split(self):
        with tempfile.TemporaryDirectory() as root:
            runs = [write_run(root, "r2", 2, 150.0), write_run(root, "r1", 1, 100.0), write_run(root, "r4", 4, 240.0)]
            points = [sr.load_point(r) for r in runs]
            base = sr.add_speedup(points)
            self.assertEqual(base["label"], "r1")                     # fewest ranks, wherever it is listed
            self.assertAlmostEqual(points[0]["speedup"], 1.5)
            self.assertAlmostEqual(points[0]["efficiency"], 0.75)
            self.assertAlmostEqual(points[2]["efficiency"], 0.6)
            self.assertAlmostEqual(points[0]["compute_ms"], 160.0)    # (0.5 + 1.0 + 0.1) s / 10 steps
            self.assertAlmostEqual(points[0]["allreduce_ms"], 30.0)
            self.assertAlmostEqual(points[0]["data_wait_ms"], 10.0)
            self.assertAlmostEqual(points[0]["step_ms"], 200.0)
            table = sr.markdown(points, base)
            # No optimizer recorded: sgd; no epoch or steady rate (an older ringtrain's records): the job's average.
            self.assertIn("| r4 | 4 | 256 | sgd | 240 | job average | 2.40 | 60 % |", table)

    def test_the_steady_rate_of_the_last_timed_epoch_and_its_own_steps(self):
        """Each point excludes the same warm-up (steady_samples_per_s); a run resumed at an epoch's end records that
        epoch untimed (steps_run 0, rates null), so the epoch before it speaks; a resumed epoch's times cover only
        the steps it ran; an unevaluated epoch's null test_acc is no accuracy."""
        with tempfile.TemporaryDirectory() as root:
            run = os.path.join(root, "resumed")
            os.makedirs(run)
            common = {"kind": "epoch", "ranks": 2, "global_batch": 128, "steps": 40, "samples_per_s": 500.0,
                      "data_wait_s": 0.1, "forward_s": 0.5, "backward_s": 1.0, "allreduce_s": 0.3, "optimizer_s": 0.1,
                      "allreduce_total_s": 0.9}
            with open(os.path.join(run, "metrics.jsonl"), "w") as f:
                f.write(json.dumps({"kind": "job"}) + "\n")
                f.write(json.dumps({**common, "epoch": 1, "steps_run": 8, "epoch_train_s": 2.0,
                                    "epoch_samples_per_s": 512.0, "steady_samples_per_s": 600.0, "test_acc": None}) + "\n")
                f.write(json.dumps({**common, "epoch": 2, "steps_run": 0, "epoch_train_s": 3e-7,
                                    "epoch_samples_per_s": None, "steady_samples_per_s": None, "test_acc": 0.7}) + "\n")
            p = sr.load_point(run)
            self.assertEqual((p["samples_per_s"], p["rate"]), (600.0, "steady"))
            self.assertAlmostEqual(p["step_ms"], 250.0)      # 2.0 s over the 8 steps run, not the 40 planned
            self.assertAlmostEqual(p["compute_ms"], 200.0)
            self.assertEqual(p["best_test_acc"], 0.7)
            self.assertEqual(p["test_acc"], 0.7)

    def test_unlike_rates_are_warned_of_and_a_torn_line_is_skipped(self):
        """A weak-scaling point whose epoch ends inside the warm-up has only its epoch rate: the report says the
        rates are unlike; a half-written last line (a killed job) is skipped, naming the file and line."""
        with tempfile.TemporaryDirectory() as root:
            steady = write_run(root, "n1", 1, 100.0)
            with open(os.path.join(steady, "metrics.jsonl"), "a") as f:
                f.write(json.dumps({"kind": "epoch", "epoch": 2, "ranks": 1, "global_batch": 64, "steps": 10,
                                    "samples_per_s": 90.0, "epoch_samples_per_s": 95.0, "steady_samples_per_s": 100.0,
                                    "epoch_train_s": 2.0, "data_wait_s": 0.1, "forward_s": 0.5, "backward_s": 1.0,
                                    "allreduce_s": 0.3, "optimizer_s": 0.1, "test_acc": 0.5}) + "\n")
                f.write('{"kind": "epoch", "epo')
            short = write_run(root, "n4", 4, 100.0)
            with open(os.path.join(short, "metrics.jsonl"), "a") as f:
                f.write(json.dumps({"kind": "epoch", "epoch": 2, "ranks": 4, "global_batch": 256, "steps": 3,
                                    "samples_per_s": 60.0, "epoch_samples_per_s": 50.0, "steady_samples_per_s": None,
                                    "epoch_train_s": 2.0, "data_wait_s": 0.1, "forward_s": 0.5, "backward_s": 1.0,
                                    "allreduce_s": 0.3, "optimizer_s": 0.1, "test_acc": 0.5}) + "\n")
            points = [sr.load_point(r) for r in (steady, short)]
            self.assertEqual([p["rate"] for p in points], ["steady", "epoch"])
            text = sr.markdown(points, sr.add_speedup(points))
            self.assertIn("**Warning: unlike rates.**", text)
            self.assertIn("n4 has another kind", text)
            alike = [sr.load_point(steady)]
            self.assertNotIn("Warning", sr.markdown(alike, sr.add_speedup(alike)))

    def test_accuracy_per_optimizer_and_batch_over_seeds(self):
        with tempfile.TemporaryDirectory() as root:
            runs = [write_run(root, "lars-s1", 2, 100.0, optimizer="lars", accs=(0.6, 0.8, 0.85), global_batch=4096),
                    write_run(root, "lars-s2", 2, 110.0, optimizer="lars", accs=(0.5, 0.7, 0.75), global_batch=4096),
                    write_run(root, "sgd-s1", 2, 120.0, optimizer="sgd", accs=(0.7, 0.9, 0.91), global_batch=128)]
            points = [sr.load_point(r) for r in runs]
            self.assertEqual(sr.epochs_to(points[0], 0.8), 2)
            self.assertIsNone(sr.epochs_to(points[1], 0.8))
            self.assertEqual(points[0]["best_test_acc"], 0.85)
            groups = sr.accuracy_groups(points, 0.8)
            self.assertEqual([(g["optimizer"], g["global_batch"], g["runs"]) for g in groups],
                             [("lars", 4096, 2), ("sgd", 128, 1)])
            lars = groups[0]
            self.assertAlmostEqual(lars["mean_acc"], 0.8)
            self.assertEqual((lars["min_acc"], lars["max_acc"], lars["reached"], lars["mean_epochs"]), (0.75, 0.85, 1, 2))
            table = sr.markdown(points, sr.add_speedup(points), 0.8)
            self.assertIn("| lars | 4096 | 2 | 0.8000 | 0.7500 | 0.8500 | 105 | 1 of 2 | 2.0 |", table)
            self.assertIn("| sgd | 128 | 1 | 0.9100 | 0.9100 | 0.9100 | 120 | 1 of 1 | 2.0 |", table)

    def test_run_without_epoch_is_an_error_naming_the_file(self):
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, "empty"))
            open(os.path.join(root, "empty", "metrics.jsonl"), "w").write(json.dumps({"kind": "job"}) + "\n")
            with self.assertRaises(SystemExit) as e:
                sr.load_point(os.path.join(root, "empty"))
            self.assertIn("no epoch record", str(e.exception))


if __name__ == "__main__":
    unittest.main()
