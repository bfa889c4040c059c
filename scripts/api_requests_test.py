"""Tests of the API request counter of bench.sh's api_requests bench
(api_requests.py), on made-up scrapes. Run: python3 -B -m unittest discover
-s scripts -p 'api_requests_test.py' (bench.sh does, before the bench)."""

import unittest

import api_requests as ar


def req(verb, resource, n, client="", code="200", sub="", group="", scope="resource"):
    return (f'apiserver_request_total{{code="{code}",component="apiserver",dry_run="",'
            f'group="{group}",resource="{resource}",scope="{scope}",subresource="{sub}",'
            f'system_client="{client}",verb="{verb}",version="v1"}} {n}')


def watching(resource, n, scope="cluster"):
    return (f'apiserver_longrunning_requests{{component="apiserver",group="",resource="{resource}",'
            f'scope="{scope}",subresource="",verb="WATCH",version="v1"}} {n}')


def apf(schema, n, level="system"):
    return f'apiserver_flowcontrol_dispatched_requests_total{{flow_schema="{schema}",priority_level="{level}"}} {n}'


HEAD = "# HELP apiserver_request_total [STABLE] Counter.\n# TYPE apiserver_request_total counter\n"


def scrape(*lines):
    return ar.parse(HEAD + "\n".join(lines) + "\n")


class Parse(unittest.TestCase):
    def test_labels_values_and_escapes(self):
        m = ar.parse('a_total{x="1",y="q\\"uote\\\\"} 3\nb 2.5e+01 1700000000\n# c 1\n')
        self.assertEqual(m["a_total"], [({"x": "1", "y": 'q"uote\\'}, 3.0)])
        self.assertEqual(m["b"], [({}, 25.0)])
        self.assertNotIn("c", m)

    def test_a_line_that_is_no_sample_is_an_error(self):
        with self.assertRaises(ValueError):
            ar.parse("not a sample\n")


class Window(unittest.TestCase):
    def test_counts_crilets_rows_not_the_servers_own_nor_non_resource_ones(self):
        before = scrape(req("GET", "leases", 10, group="coordination.k8s.io"),
                        req("PUT", "leases", 50, client="kube-apiserver", group="coordination.k8s.io"),
                        'apiserver_request_total{code="200",component="",dry_run="",group="",resource="",'
                        'scope="",subresource="/metrics",system_client="",verb="GET",version=""} 1')
        after = scrape(req("GET", "leases", 40, group="coordination.k8s.io"),
                       req("PUT", "leases", 80, client="kube-apiserver", group="coordination.k8s.io"),
                       'apiserver_request_total{code="200",component="",dry_run="",group="",resource="",'
                       'scope="",subresource="/metrics",system_client="",verb="GET",version=""} 2')
        counts, _ = ar.window(before, after)
        self.assertEqual(counts, {("GET", "leases", ""): 30.0})

    def test_a_row_new_in_the_window_counts_from_zero(self):
        counts, _ = ar.window(scrape(), scrape(req("PATCH", "nodes", 3, sub="status")))
        self.assertEqual(counts, {("PATCH", "nodes/status", ""): 3.0})

    def test_codes_other_than_2xx_are_their_own_rows(self):
        counts, _ = ar.window(scrape(), scrape(req("PUT", "leases", 2), req("PUT", "leases", 1, code="409"),
                                               req("POST", "pods", 1, code="201")))
        self.assertEqual(counts, {("PUT", "leases", ""): 2.0, ("PUT", "leases", "409"): 1.0,
                                  ("POST", "pods", ""): 1.0})

    def test_watches_count_as_started_ended_plus_opened(self):
        # Two of crilet's watches ended in the window and three started: the
        # last is still open at the end. The server's own watch stays open.
        before = scrape(req("WATCH", "pods", 5, scope="cluster"), watching("pods", 2))
        after = scrape(req("WATCH", "pods", 7, scope="cluster"), watching("pods", 3))
        counts, _ = ar.window(before, after)
        self.assertEqual(counts, {("WATCH", "pods", ""): 3.0})

    def test_a_watch_open_at_both_ends_and_none_ended_counts_nothing(self):
        s = scrape(req("WATCH", "pods", 5, scope="cluster"), watching("pods", 2))
        counts, _ = ar.window(s, s)
        self.assertEqual(counts, {})

    def test_the_cross_check_sums_the_node_flow_schemas_only(self):
        before = scrape(apf("system-node-high", 10, "node-high"), apf("system-nodes", 4), apf("exempt", 100, "exempt"))
        after = scrape(apf("system-node-high", 40, "node-high"), apf("system-nodes", 9), apf("exempt", 300, "exempt"))
        _, dispatched = ar.window(before, after)
        self.assertEqual(dispatched, 35.0)

    def test_a_counter_that_goes_down_is_an_error(self):
        with self.assertRaises(ValueError):
            ar.window(scrape(req("GET", "nodes", 5)), scrape(req("GET", "nodes", 4)))


class Report(unittest.TestCase):
    def test_rates_total_goal_and_cross_check(self):
        text = ar.report({("GET", "leases", ""): 30.0, ("PUT", "leases", ""): 30.0,
                          ("WATCH", "pods", ""): 10.0}, 70.0, 300.0, "0.11")
        lines = text.splitlines()
        self.assertRegex(lines[0], r"^   GET +leases +30  0\.100/s$")
        self.assertRegex(lines[2], r"^   WATCH +pods +10  0\.033/s$")
        self.assertRegex(lines[3], r"^   total +70  0\.233/s  \(goal <= 0\.11\)$")
        self.assertIn("dispatched 70 (0.233/s)", lines[4])


if __name__ == "__main__":
    unittest.main()
