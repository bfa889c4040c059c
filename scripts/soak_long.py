#!/usr/bin/env python3
"""The long-lived soak's driver (scripts/soak.sh --long starts the runtime
and runs this): does a crilet that is never killed grow?

One crilet runs --pods host-network busybox pods for --minutes, with no
kills:
  probes  every pod serves httpd on its own loopback port, probed by an
          httpGet readiness probe every second and an exec liveness probe
          (`true`) every 10 s;
  flap    pod 1's readiness path appears and vanishes every 7 s;
  crash   pod 0 exits 1 five seconds after each start (CrashLoopBackOff);
  churn   every --churn-seconds (60), a tenth of the manifests are edited
          (a new annotation: a new UID, so the pod is replaced).

Every --sample-seconds (10) it samples crilet's RSS, open file
descriptors and threads (/proc) and its live async tasks
(`crilet_tokio_alive_tasks` on its /metrics), and prints them. After the
--warmup-minutes (5) it compares the first --window-seconds (60) after the
warm-up with the last ones: the smallest reading of the last window may
exceed the largest of the first by at most 1 MiB of RSS and by nothing in
descriptors or tasks; a leak grows steadily, so it shows whatever the churn
did at either end. Exits 1 on growth, or if crilet died or pods are not
running at the end. Kills only the processes it started, by PID.
"""

import argparse
import collections
import json
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def log(msg):
    print(f"[soak-long {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def manifest(i, port, generation):
    name = f"long-{i:03d}"
    head = (
        f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n"
        f"  annotations:\n    soak/generation: \"{generation}\"\n"
        "spec:\n  hostNetwork: true\n  terminationGracePeriodSeconds: 1\n"
        "  containers:\n  - name: main\n    image: docker.io/library/busybox:latest\n"
        "    imagePullPolicy: IfNotPresent\n"
    )
    if i == 0:
        return head + "    command: [sh, -c, 'sleep 5; exit 1']\n"
    if i == 1:
        serve = (
            "mkdir -p /w; (while true; do touch /w/ok; sleep 7; rm -f /w/ok; sleep 7; done) & "
            f"exec httpd -f -p 127.0.0.1:{port} -h /w"
        )
        path = "/ok"
        # A JSON string is a YAML double-quoted scalar.
        command = f"    command: [sh, -c, {json.dumps(serve)}]\n"
    else:
        path = "/hostname"
        command = f"    command: [httpd, -f, -p, '127.0.0.1:{port}', -h, /etc]\n"
    return head + command + (
        f"    readinessProbe:\n      httpGet:\n        port: {port}\n        path: {path}\n"
        "      periodSeconds: 1\n"
        "    livenessProbe:\n      exec:\n        command: [\"true\"]\n      periodSeconds: 10\n"
    )


def write(dir_, i, body):
    tmp = dir_ / f".long-{i:03d}.tmp"
    tmp.write_text(body)
    os.rename(tmp, dir_ / f"long-{i:03d}.yaml")


def sample(pid, metrics_url):
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    rss_kib = int(fields["VmRSS"].split()[0])
    threads = int(fields["Threads"])
    kinds = fd_kinds(pid)
    fds = sum(kinds.values())
    tasks = None
    try:
        with urllib.request.urlopen(metrics_url, timeout=5) as r:
            for line in r.read().decode().splitlines():
                if line.startswith("crilet_tokio_alive_tasks "):
                    tasks = int(float(line.split()[1]))
    except OSError as e:
        log(f"no /metrics: {e}")
    return {"rss_kib": rss_kib, "fds": fds, "threads": threads, "tasks": tasks, "fd_kinds": kinds}


def fd_kinds(pid):
    """What the process's descriptors are, counted: a socket, pipe or
    anonymous inode by its kind, a file by its path."""
    kinds = collections.Counter()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue  # closed between the listing and the read
        kinds[target.split(":[", 1)[0] if target.startswith(("socket:", "pipe:")) else target] += 1
    return kinds


def fds_added(samples, warmup, window, end):
    """The descriptors the last window's fewest-descriptor sample holds
    beyond the first window's most-descriptor one: what a growth of fds is
    made of ({kind: how many more})."""
    first, last = windows(samples, warmup, window, end)
    if not first or not last:
        return {}
    a = max(first, key=lambda s: s["fds"])["fd_kinds"]
    b = min(last, key=lambda s: s["fds"])["fd_kinds"]
    return {k: n - a.get(k, 0) for k, n in sorted(b.items()) if n > a.get(k, 0)}


def windows(samples, warmup, window, end):
    """The readings of the first window after the warm-up and of the last
    one before `end`, from (t, reading) samples."""
    first = [s for t, s in samples if warmup <= t < warmup + window]
    last = [s for t, s in samples if t >= end - window]
    return first, last


def growth(samples, warmup, window, end):
    """(first window, last window) of (t, reading) samples: the largest
    reading of the first and the smallest of the last, per figure."""
    first, last = windows(samples, warmup, window, end)
    out = {}
    for key in ("rss_kib", "fds", "tasks", "threads"):
        a = [s[key] for s in first if s[key] is not None]
        b = [s[key] for s in last if s[key] is not None]
        if a and b:
            out[key] = (max(a), min(b))
    return out


def running_pods(crictl, socket):
    out = subprocess.run(
        [crictl, "-r", f"unix://{socket}", "ps", "-q", "--state", "running"],
        capture_output=True, text=True, check=False,
    ).stdout
    return len(out.split())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--minutes", type=float, default=30)
    p.add_argument("--warmup-minutes", type=float, default=5)
    p.add_argument("--window-seconds", type=float, default=60)
    p.add_argument("--sample-seconds", type=float, default=10)
    p.add_argument("--churn-seconds", type=float, default=60)
    p.add_argument("--pods", type=int, default=100)
    p.add_argument("--first-port", type=int, default=23100)
    p.add_argument("--metrics-port", type=int, default=23099)
    p.add_argument("--dir", required=True)
    p.add_argument("--socket", required=True)
    p.add_argument("--crilet", required=True)
    p.add_argument("--crictl", required=True)
    p.add_argument("--cgroup-root", required=True)
    p.add_argument("--seed", type=int, default=None)
    a = p.parse_args()
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    total = a.minutes * 60
    warmup = a.warmup_minutes * 60
    window = min(a.window_seconds, max((total - warmup) / 2, a.sample_seconds))
    log(f"{a.pods} pods for {a.minutes} min, warm-up {warmup:.0f} s, windows of {window:.0f} s, seed {seed}")

    d = Path(a.dir)
    manifests = d / "manifests"
    manifests.mkdir(parents=True, exist_ok=True)
    gen = {i: 0 for i in range(a.pods)}
    for i in range(a.pods):
        write(manifests, i, manifest(i, a.first_port + i, 0))
    metrics = f"127.0.0.1:{a.metrics_port}"
    log_file = open(d / "crilet.log", "w")
    env = dict(os.environ, CRILET_LOG=os.environ.get("CRILET_LOG", "info"))
    crilet = subprocess.Popen(
        [a.crilet, "run", "--port", "0", "--container-runtime-endpoint", f"unix://{a.socket}",
         "--pod-manifest-path", str(manifests), "--hostname-override", "soak-long",
         "--node-ip", "127.0.0.1", "--cgroup-root", f"/{a.cgroup_root}",
         "--root-dir", str(d / "root"), "--pod-logs-dir", str(d / "pod-logs"),
         "--container-logs-dir", str(d / "containers"), "--socket", str(d / "crilet.sock"),
         "--http-address", metrics],
        stdout=subprocess.DEVNULL, stderr=log_file, env=env,
    )
    (d / "crilet.pid").write_text(str(crilet.pid))
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    samples = []
    failures = []
    t0 = time.monotonic()
    next_sample, next_churn = 0.0, a.churn_seconds
    try:
        while not stop["now"]:
            t = time.monotonic() - t0
            if t >= total:
                break
            if crilet.poll() is not None:
                failures.append(f"crilet exited ({crilet.returncode}) after {t:.0f} s")
                break
            if t >= next_churn:
                edited = rng.sample(range(2, a.pods), max(1, (a.pods - 2) // 10)) if a.pods > 2 else []
                for i in edited:
                    gen[i] += 1
                    write(manifests, i, manifest(i, a.first_port + i, gen[i]))
                log(f"churn: edited {len(edited)} manifests")
                next_churn += a.churn_seconds
            if t >= next_sample:
                s = sample(crilet.pid, f"http://{metrics}/metrics")
                samples.append((t, s))
                log(f"t={t:5.0f}s rss={s['rss_kib'] / 1024:.1f}MiB fds={s['fds']} threads={s['threads']} tasks={s['tasks']}")
                next_sample += a.sample_seconds
            time.sleep(0.2)
        end = time.monotonic() - t0
        running = running_pods(a.crictl, a.socket)
        # Pod 0 crash-loops: it may be between attempts.
        if running < a.pods - 1 and not stop["now"]:
            failures.append(f"{running} containers running at the end, want at least {a.pods - 1}")
        g = growth(samples, warmup, window, end)
        limits = {"rss_kib": 1024, "fds": 0, "tasks": 0}
        for key, (first, last) in g.items():
            unit = " KiB" if key == "rss_kib" else ""
            grew = last - first
            verdict = ""
            if key in limits:
                verdict = "ok" if grew <= limits[key] else f"GREW (limit {limits[key]}{unit})"
                if grew > limits[key]:
                    failures.append(f"{key} grew by {grew}{unit}: {first} -> {last}")
            log(f"growth {key}: first window max {first}{unit}, last window min {last}{unit}: {grew:+}{unit} {verdict}")
            if key == "fds" and grew > limits[key]:
                log(f"descriptors added: {fds_added(samples, warmup, window, end)}")
        for key in ("rss_kib", "fds", "tasks"):
            if key not in g:
                failures.append(f"no {key} readings in both windows")
        print(
            f"soak-long: {a.pods} pods, {end / 60:.1f} min: RSS "
            + (f"{g['rss_kib'][0] / 1024:.1f} -> {g['rss_kib'][1] / 1024:.1f} MiB" if "rss_kib" in g else "n/a")
            + (f", fds {g['fds'][0]} -> {g['fds'][1]}" if "fds" in g else "")
            + (f", tasks {g['tasks'][0]} -> {g['tasks'][1]}" if "tasks" in g else "")
            + (f", threads {g['threads'][0]} -> {g['threads'][1]}" if "threads" in g else "")
            + (": no growth" if not failures else ": " + "; ".join(failures)),
            flush=True,
        )
    finally:
        if crilet.poll() is None:
            crilet.terminate()
            try:
                crilet.wait(timeout=30)
            except subprocess.TimeoutExpired:
                crilet.kill()
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
