"""Arithmetic of perf/scaling_model.py against hand-computed values."""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "perf"))
import scaling_model as sm  # noqa: E402


class RingModel(unittest.TestCase):
    def test_one_rank_has_no_communication(self):
        self.assertEqual(sm.ring_allreduce_s(1, 1e9, sm.Link(1e9, 1e-3)), 0.0)

    def test_two_ranks_move_the_buffer_once(self):
        # 2 (N-1)/N = 1 at N=2: 100 MB over 1 GB/s is 0.1 s, plus 2 latencies
        self.assertAlmostEqual(sm.ring_allreduce_s(2, 100e6, sm.Link(1e9, 1e-3)), 0.1 + 0.002)

    def test_bandwidth_term_tends_to_twice_the_buffer(self):
        t = sm.ring_allreduce_s(4096, 100e6, sm.Link(1e9, 0.0))
        self.assertAlmostEqual(t, 2 * 4095 / 4096 * 0.1)

    def test_latency_paid_per_bucket(self):
        link = sm.Link(1e18, 5e-6)
        self.assertAlmostEqual(sm.ring_allreduce_s(8, 1.0, link, buckets=3), 2 * 7 * 5e-6 * 3, places=9)

    def test_overlap_hides_up_to_backward(self):
        work = sm.Workload(compute_s=0.3, backward_s=0.2, gradient_bytes=100e6)
        link = sm.Link(1e9, 0.0)  # all-reduce at N=2: 0.1 s
        hidden = sm.predict(2, work, link, overlap=1.0)
        self.assertEqual(hidden["exposed_s"], 0.0)
        self.assertEqual(hidden["efficiency"], 1.0)
        half = sm.predict(2, work, link, overlap=0.25)  # 0.05 s hidden
        self.assertAlmostEqual(half["exposed_s"], 0.05)
        self.assertAlmostEqual(half["efficiency"], 0.3 / 0.35)

    def test_first_below_threshold(self):
        work = sm.Workload(compute_s=0.1, backward_s=0.0, gradient_bytes=1e6)
        link = sm.Link(1e12, 1e-5)  # latency dominates: 2 (N-1) * 10 us
        points = [sm.predict(n, work, link) for n in sm.DEFAULT_RANKS]
        # efficiency 0.9 needs exposed <= 11.1 ms: 2 (N-1) 1e-5 + ~2e-6 > 0.0111 first at N=1024
        self.assertEqual(sm.first_below(points), 1024)
        self.assertGreaterEqual(points[5]["efficiency"], 0.9)  # 256

    def test_workload_from_metrics(self):
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
            f.write(json.dumps({"kind": "job", "params": 1000}) + "\n")
            f.write(json.dumps({"kind": "epoch", "steps": 10, "data_wait_s": 0.1, "forward_s": 0.3,
                                "backward_s": 0.5, "allreduce_s": 9.0, "optimizer_s": 0.1}) + "\n")
        try:
            work = sm.workload_from_metrics(f.name)
        finally:
            os.unlink(f.name)
        self.assertAlmostEqual(work.compute_s, 0.1)
        self.assertAlmostEqual(work.backward_s, 0.05)
        self.assertEqual(work.gradient_bytes, 4000)

    def test_presets(self):
        self.assertEqual(sm.LINKS["ib400"][0], 50e9)
        self.assertEqual(sm.LINKS["ib100"][0], 12.5e9)


if __name__ == "__main__":
    unittest.main()
