import unittest

import fleet_report
from api_requests import parse


def scrape(lease=0, bucket=None, kcm=0):
    lines = [
        f'apiserver_request_total{{code="200",resource="leases",system_client="",verb="PUT"}} {lease}',
        f'apiserver_request_total{{code="200",resource="leases",system_client="kube-controller-manager",verb="GET"}} {kcm}',
    ]
    for (verb, le), n in (bucket or {}).items():
        lines.append(f'apiserver_request_duration_seconds_bucket{{verb="{verb}",resource="pods",le="{le}"}} {n}')
    return parse("\n".join(lines))


class Requests(unittest.TestCase):
    def test_per_node_per_second_leaves_the_controller_manager_out(self):
        rate, _, counts = fleet_report.per_node(scrape(100), scrape(1100, kcm=5000), 100.0, 100)
        self.assertAlmostEqual(rate, 0.1)
        self.assertEqual(counts, {("PUT", "leases", ""): 1000})


class Latency(unittest.TestCase):
    def test_p99_is_the_bucket_bound_holding_it_and_skips_watches(self):
        before = scrape(bucket={("GET", "0.1"): 0, ("GET", "1"): 0, ("GET", "+Inf"): 0})
        after = scrape(bucket={("GET", "0.1"): 980, ("GET", "1"): 1000, ("GET", "+Inf"): 1000,
                               ("WATCH", "0.1"): 0, ("WATCH", "1"): 0, ("WATCH", "+Inf"): 500})
        self.assertEqual(fleet_report.p99(before, after), 1.0)
        after = scrape(bucket={("GET", "0.1"): 995, ("GET", "1"): 1000, ("GET", "+Inf"): 1000})
        self.assertEqual(fleet_report.p99(before, after), 0.1)
        self.assertIsNone(fleet_report.p99(before, before))


def node(name, status, since):
    return {"metadata": {"name": name},
            "status": {"conditions": [{"type": "MemoryPressure", "status": "False"},
                                      {"type": "Ready", "status": status, "lastTransitionTime": since}]}}


def pod(name, uid):
    return {"metadata": {"name": name, "namespace": "default", "uid": uid}}


class Compare(unittest.TestCase):
    def test_a_steady_fleet_has_nothing_to_report(self):
        snap = fleet_report.snapshot({"items": [node("h-0", "True", "t0")]}, {"items": [pod("p", "u1")]})
        self.assertEqual(fleet_report.compare(snap, snap), [])

    def test_a_flap_a_not_ready_node_and_a_recreated_or_lost_pod_are_named(self):
        before = fleet_report.snapshot(
            {"items": [node("h-0", "True", "t0"), node("h-1", "True", "t0"), node("h-2", "True", "t0")]},
            {"items": [pod("a", "u1"), pod("b", "u2")]})
        after = fleet_report.snapshot(
            {"items": [node("h-0", "True", "t9"), node("h-1", "Unknown", "t5"), node("h-2", "True", "t0")]},
            {"items": [pod("a", "u3")]})
        self.assertEqual(fleet_report.compare(before, after), [
            "node h-0: Ready changed at t9 (was True since t0)",
            "node h-1: Ready=Unknown since t5",
            "mirror pod default/a: recreated (u1 -> u3)",
            "mirror pod default/b: gone",
        ])


if __name__ == "__main__":
    unittest.main()
