"""crilet's API requests over a window, from two scrapes of the
kube-apiserver's /metrics (bench.sh's api_requests bench).

    api_requests.py BEFORE AFTER SECONDS [GOAL]

BEFORE and AFTER are the Prometheus text of `kubectl get --raw /metrics`
at the start and the end of the window; SECONDS is the time between them.

What is counted, and why it is crilet's traffic alone:

* apiserver_request_total (STABLE): one count per request, by verb, group,
  resource, subresource, scope and code. It has no user label, but 1.32
  has `system_client`, taken from the User-Agent: "kube-apiserver" for the
  server's requests to itself (its identity lease in kube-system, the Node
  authorizer's pod and node informers, ...), "kube-controller-manager" and
  "kube-scheduler" (neither runs in the lab), and "" for every other
  client. Rows with system_client="" and a resource are counted: on the
  bench's private server the only other client is the bench's own kubectl,
  which makes no resource request in the window (its two /metrics scrapes
  are non-resource requests, resource="").
* A WATCH is counted there when it ends, not when it starts. Watches
  started in the window are the ones that ended in it plus the change in
  the open ones: apiserver_longrunning_requests{verb="WATCH"} (a gauge,
  without system_client) at the end minus at the start. The server's own
  informer watches are open at both scrapes (they reopen within
  milliseconds), so the gauge's change is crilet's.
* Cross-check: apiserver_flowcontrol_dispatched_requests_total of the flow
  schemas that take node identities (system-node-high: Node and Lease;
  system-nodes: the rest of group system:nodes). Priority and fairness
  counts a request, a watch too, when it is dispatched, and by who sent
  it, so it counts crilet alone by identity; the two totals should agree
  within a request or two in flight at a scrape.

Prints one line per verb and resource (subresource after a slash, a code
other than 2xx in brackets), the total in requests per second against
GOAL, and the cross-check. Exit 0 even when the goal is missed: a bench
reports, it does not judge.
"""

import re
import sys
from collections import defaultdict

REQUESTS = "apiserver_request_total"
LONGRUNNING = "apiserver_longrunning_requests"
DISPATCHED = "apiserver_flowcontrol_dispatched_requests_total"
NODE_FLOW_SCHEMAS = ("system-node-high", "system-nodes")

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?')


def _unescape(v):
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), v)


def parse(text):
    """Prometheus text -> {name: [(labels dict, value)]}; comments skipped."""
    out = defaultdict(list)
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            raise ValueError(f"not a sample line: {line!r}")
        name, body, value = m.groups()
        labels = {}
        pos = 0
        body = body or ""
        while pos < len(body):
            lm = _LABEL.match(body, pos)
            if not lm:
                raise ValueError(f"bad labels in: {line!r}")
            labels[lm.group(1)] = _unescape(lm.group(2))
            pos = lm.end()
        out[name].append((labels, float(value)))
    return out


def _resource(labels):
    r = labels.get("resource", "")
    sub = labels.get("subresource", "")
    return f"{r}/{sub}" if sub else r


def crilet_requests(metrics):
    """{(verb, resource, code class or code): count} of the rows that are
    not the server's own (system_client "") and name a resource."""
    rows = defaultdict(float)
    for labels, value in metrics.get(REQUESTS, []):
        if labels.get("system_client", "") != "" or not labels.get("resource"):
            continue
        code = labels.get("code", "")
        rows[(labels.get("verb", ""), _resource(labels), "" if code.startswith("2") else code)] += value
    return rows


def open_watches(metrics):
    """{resource: open WATCH requests}, all clients (the gauge has no
    system_client)."""
    rows = defaultdict(float)
    for labels, value in metrics.get(LONGRUNNING, []):
        if labels.get("verb") == "WATCH" and labels.get("resource"):
            rows[_resource(labels)] += value
    return rows


def node_dispatched(metrics):
    return sum(v for labels, v in metrics.get(DISPATCHED, [])
               if labels.get("flow_schema") in NODE_FLOW_SCHEMAS)


def window(before, after):
    """The window's counts: {(verb, resource, code): n}, WATCH as started
    (ended + change of the open ones), and the APF cross-check count."""
    b, a = crilet_requests(before), crilet_requests(after)
    counts = {}
    for key in set(a) | set(b):
        d = a.get(key, 0.0) - b.get(key, 0.0)
        if d < 0:
            raise ValueError(f"counter {key} went down ({b[key]} -> {a.get(key, 0.0)}): was the server restarted?")
        if d:
            counts[key] = d
    ob, oa = open_watches(before), open_watches(after)
    for res in set(ob) | set(oa):
        d = oa.get(res, 0.0) - ob.get(res, 0.0)
        if d:
            key = ("WATCH", res, "")
            counts[key] = counts.get(key, 0.0) + d
            if counts[key] == 0:
                del counts[key]
    return counts, node_dispatched(after) - node_dispatched(before)


def report(counts, apf, seconds, goal=None):
    lines = []
    total = sum(counts.values())
    for (verb, res, code), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        what = f"{res} [{code}]" if code else res
        lines.append(f"   {verb:<7} {what:<24} {n:6.0f}  {n / seconds:.3f}/s")
    goal_s = f"  (goal <= {goal})" if goal is not None else ""
    lines.append(f"   {'total':<32} {total:6.0f}  {total / seconds:.3f}/s{goal_s}")
    lines.append(f"   cross-check: APF flow schemas {' + '.join(NODE_FLOW_SCHEMAS)} "
                 f"dispatched {apf:.0f} ({apf / seconds:.3f}/s)")
    return "\n".join(lines)


def main(argv):
    if len(argv) not in (4, 5):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        before = parse(f.read())
    with open(argv[2]) as f:
        after = parse(f.read())
    seconds = float(argv[3])
    goal = argv[4] if len(argv) == 5 else None
    counts, apf = window(before, after)
    print(report(counts, apf, seconds, goal))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
