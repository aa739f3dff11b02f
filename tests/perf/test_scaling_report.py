"""perf/scaling_report.py: speedup, efficiency and per-step time split from run directories."""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "perf"))
import scaling_report as sr  # noqa: E402


def write_run(root, name, ranks, samples_per_s, steps=10):
    run = os.path.join(root, name)
    os.makedirs(run)
    with open(os.path.join(run, "metrics.jsonl"), "w") as f:
        f.write(json.dumps({"kind": "job", "params": 10}) + "\n")
        f.write(json.dumps({"kind": "epoch", "epoch": 1, "ranks": ranks, "global_batch": 64 * ranks, "steps": steps,
                            "samples_per_s": samples_per_s, "epoch_train_s": 2.0, "data_wait_s": 0.1,
                            "forward_s": 0.5, "backward_s": 1.0, "allreduce_s": 0.3, "optimizer_s": 0.1,
                            "allreduce_total_s": 0.9}) + "\n")
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
            self.assertIn("| r4 | 4 | 256 | 240 | 2.40 | 60 % |", table)

    def test_run_without_epoch_is_an_error_naming_the_file(self):
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, "empty"))
            open(os.path.join(root, "empty", "metrics.jsonl"), "w").write(json.dumps({"kind": "job"}) + "\n")
            with self.assertRaises(SystemExit) as e:
                sr.load_point(os.path.join(root, "empty"))
            self.assertIn("no epoch record", str(e.exception))


if __name__ == "__main__":
    unittest.main()
