"""Tests of soak_long.py's pure parts: the growth verdict's windows and the
manifests (no I/O)."""

import unittest

import soak_long as sl


def readings(rss, fds=10, tasks=50):
    return {"rss_kib": rss, "fds": fds, "threads": 8, "tasks": tasks}


class Growth(unittest.TestCase):
    def test_the_first_windows_max_against_the_last_windows_min(self):
        samples = [(t, readings(20000 + (500 if t % 60 == 0 else 0))) for t in range(0, 600, 10)]
        g = sl.growth(samples, warmup=300, window=60, end=600)
        # A churn spike at either end is no growth.
        self.assertEqual(g["rss_kib"], (20500, 20000))

    def test_a_steady_leak_shows(self):
        samples = [(t, readings(20000 + 10 * t, fds=10 + t // 100)) for t in range(0, 1800, 10)]
        g = sl.growth(samples, warmup=300, window=60, end=1800)
        first, last = g["rss_kib"]
        self.assertGreater(last - first, 1024)
        self.assertGreater(g["fds"][1] - g["fds"][0], 0)

    def test_missing_task_readings_are_left_out(self):
        samples = [(t, readings(1, tasks=None)) for t in range(0, 120, 10)]
        g = sl.growth(samples, warmup=30, window=30, end=120)
        self.assertNotIn("tasks", g)
        self.assertIn("fds", g)


class FdsAdded(unittest.TestCase):
    def test_what_the_last_window_holds_beyond_the_first(self):
        def at(fds, kinds):
            return dict(readings(1, fds=fds), fd_kinds=kinds)

        samples = [
            (0, at(3, {"/dev/null": 3})),
            (40, at(4, {"socket": 2, "/dev/null": 2})),
            (50, at(5, {"socket": 3, "/dev/null": 2})),
            (100, at(7, {"socket": 4, "pipe": 1, "/dev/null": 2})),
            (110, at(6, {"socket": 3, "pipe": 1, "/dev/null": 2})),
        ]
        # First window (30-60): its most, 5; last (90-120): its fewest, 6.
        self.assertEqual(sl.fds_added(samples, warmup=30, window=30, end=120), {"pipe": 1})
        self.assertEqual(sl.fds_added(samples[:2], warmup=30, window=30, end=120), {})


class Manifests(unittest.TestCase):
    def test_probed_flapping_and_crashing_pods(self):
        crash = sl.manifest(0, 23100, 0)
        self.assertIn("exit 1", crash)
        self.assertNotIn("readinessProbe", crash)
        flap = sl.manifest(1, 23101, 0)
        self.assertIn("path: /ok", flap)
        self.assertIn("127.0.0.1:23101", flap)
        plain = sl.manifest(7, 23107, 3)
        self.assertIn("path: /hostname", plain)
        self.assertIn('soak/generation: "3"', plain)
        self.assertIn("periodSeconds: 10", plain)


if __name__ == "__main__":
    unittest.main()
