"""Unit tests of slowest_tests.py (run by scripts/test.sh)."""

import unittest

import slowest_tests as s

OUT = """\
running 4 tests
test cri::pull_and_run ... ok <12.500s>
test agent_cases::restart ... FAILED <3.000s>
test cli::version ... ok <0.012s>
test mirror::quiet_watch has been running for over 60 seconds
test mirror::quiet_watch ... ok <61.250s>
test cri::not_timed ... ok
test result: FAILED. 3 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 61.30s
"""


class SlowestTests(unittest.TestCase):
    def test_orders_by_time_and_keeps_results(self):
        rows = s.slowest(OUT.splitlines(True), 3)
        self.assertEqual(
            rows,
            [
                (61.25, "mirror::quiet_watch", "ok"),
                (12.5, "cri::pull_and_run", "ok"),
                (3.0, "agent_cases::restart", "FAILED"),
            ],
        )

    def test_untimed_and_progress_lines_are_skipped(self):
        names = [name for _, name, _ in s.times(OUT.splitlines())]
        self.assertNotIn("cri::not_timed", names)
        self.assertEqual(len(names), 4)

    def test_report_says_when_nothing_was_timed(self):
        self.assertIn("no timed test results", s.report([], "pass"))
        text = s.report(s.slowest(OUT.splitlines(), 1), "pass")
        self.assertIn("61.25 s  mirror::quiet_watch  ok", text)


if __name__ == "__main__":
    unittest.main()
