"""The fleet benchmark's arithmetic (scripts/fleet.sh), on what kubectl
and the API server's /metrics gave it:

    fleet_report.py requests BEFORE AFTER SECONDS NODES
        the hollow nodes' API requests per node per second over the window
        between two /metrics scrapes (counted as scripts/api_requests.py
        counts them: rows with system_client "" that name a resource,
        watches when they start; the controller manager's own requests
        carry system_client "kube-controller-manager" and are left out)
    fleet_report.py latency BEFORE AFTER
        the API server's request latency p99 between two scrapes, of every
        request but WATCH and CONNECT (long-running), from the histogram
        apiserver_request_duration_seconds: the upper bound of the bucket
        that holds the 99th percentile
    fleet_report.py snapshot NODES_JSON PODS_JSON
        one line per Node (its Ready condition's status and last
        transition) and per mirror pod (its UID), as JSON
    fleet_report.py compare BEFORE_SNAPSHOT AFTER_SNAPSHOT
        the Nodes whose Ready condition changed or is not True, and the
        mirror pods that went away or came back with another UID; exit 1
        when there is any

Exit 0 otherwise: the caller judges the figures against the goals.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import api_requests  # noqa: E402

DURATION = "apiserver_request_duration_seconds_bucket"
LONG_RUNNING = ("WATCH", "CONNECT")


def per_node(before, after, seconds, nodes):
    counts, apf = api_requests.window(before, after)
    total = sum(counts.values())
    return total / seconds / nodes, apf / seconds / nodes, counts


def buckets(metrics):
    """{le: cumulative count} summed over every row but the long-running."""
    out = {}
    for labels, value in metrics.get(DURATION, []):
        if labels.get("verb") in LONG_RUNNING:
            continue
        le = float(labels["le"])
        out[le] = out.get(le, 0.0) + value
    return out


def p99(before, after):
    """The upper bound of the bucket holding the 99th percentile of the
    requests between the scrapes (None: no request)."""
    b, a = buckets(before), buckets(after)
    delta = sorted((le, a.get(le, 0.0) - b.get(le, 0.0)) for le in set(a) | set(b))
    if not delta or delta[-1][1] <= 0:
        return None
    total = delta[-1][1]
    for le, cumulative in delta:
        if cumulative >= 0.99 * total:
            return le
    return float("inf")


def snapshot(nodes, pods):
    ready = {}
    for node in nodes.get("items", []):
        cond = next((c for c in node.get("status", {}).get("conditions", [])
                     if c.get("type") == "Ready"), {})
        ready[node["metadata"]["name"]] = [cond.get("status", ""), cond.get("lastTransitionTime", "")]
    uids = {f'{p["metadata"].get("namespace", "")}/{p["metadata"]["name"]}': p["metadata"]["uid"]
            for p in pods.get("items", [])}
    return {"nodes": ready, "pods": uids}


def compare(before, after):
    """Lines naming what changed: a Node whose Ready condition moved or is
    not True now, a mirror pod gone or recreated (another UID)."""
    out = []
    for name, (status, since) in sorted(before["nodes"].items()):
        now = after["nodes"].get(name)
        if now is None:
            out.append(f"node {name}: gone")
        elif now[0] != "True":
            out.append(f"node {name}: Ready={now[0]} since {now[1]}")
        elif now[1] != since:
            out.append(f"node {name}: Ready changed at {now[1]} (was True since {since})")
    for name, uid in sorted(before["pods"].items()):
        now = after["pods"].get(name)
        if now is None:
            out.append(f"mirror pod {name}: gone")
        elif now != uid:
            out.append(f"mirror pod {name}: recreated ({uid} -> {now})")
    return out


def _metrics(path):
    with open(path) as f:
        return api_requests.parse(f.read())


def _json(path):
    with open(path) as f:
        return json.load(f)


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "requests" and len(argv) == 6:
        rate, apf, counts = per_node(_metrics(argv[2]), _metrics(argv[3]), float(argv[4]), int(argv[5]))
        top = sorted(counts.items(), key=lambda kv: -kv[1])[:6]
        detail = ", ".join(f"{v} {r}{' [' + c + ']' if c else ''} {n:.0f}" for (v, r, c), n in top)
        print(f"{rate:.4f} {apf:.4f} {detail}")
        return 0
    if cmd == "latency" and len(argv) == 4:
        value = p99(_metrics(argv[2]), _metrics(argv[3]))
        print("none" if value is None else f"{value:g}")
        return 0
    if cmd == "snapshot" and len(argv) == 4:
        print(json.dumps(snapshot(_json(argv[2]), _json(argv[3]))))
        return 0
    if cmd == "compare" and len(argv) == 4:
        lines = compare(_json(argv[2]), _json(argv[3]))
        for line in lines:
            print(line)
        return 1 if lines else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
