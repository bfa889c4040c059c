#!/usr/bin/env python3
"""The churn-and-kill soak's driver; scripts/soak.sh starts the runtime and
runs this. Loops until --minutes are up:

  churn   for --churn-seconds: every --op-interval (200 ms) one manifest of
          a random half of the --pods names is added, edited or removed
          (written to a dot file, then renamed); crilet is killed with -9
          and restarted every 5-20 s; containerd is killed with -9 and
          restarted (scripts/runtime.sh up, same directory) every 60 s of
          churn;
  quiet   no churn, no kills for at least --quiet-seconds (10 s), then the
          invariants of soak_check.py are polled each second until they
          hold twice in a row or --converge-timeout passes; what is still
          wrong then is printed and counted.

Exits 1 on any violation. Kills only the processes it started, by PID.
"""

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import soak_check as sc  # noqa: E402


def log(msg):
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Manifests:
    """The manifest directory and what it holds (the driver's model)."""

    def __init__(self, path, count, rng):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.rng = rng
        self.names = [f"soak-{i:02d}" for i in range(count)]
        self.wants = {}  # file name -> sc.Want
        self.gen = 0
        self.touched = set()  # files changed since the last check
        self.ops = {"add": 0, "edit": 0, "remove": 0}

    def _want(self, name):
        i = int(name.split("-")[1])
        self.gen += 1
        return sc.Want(
            name=name,
            namespace="default" if i % 2 == 0 else "soak",
            generation=self.gen,
            # Every third pod pins its UID: an edit then restarts the
            # container in place instead of replacing the whole pod.
            uid=f"5e5e5e5e-0000-4000-8000-{i:012d}" if i % 3 == 0 else None,
        )

    def write(self, name):
        w = self._want(name)
        uid = f"\n  uid: {w.uid}" if w.uid else ""
        body = f"""apiVersion: v1
kind: Pod
metadata:
  name: {w.name}
  namespace: {w.namespace}{uid}
  annotations:
    {sc.GENERATION}: "{w.generation}"
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: {sc.container_name(w.generation)}
    image: docker.io/library/busybox:latest
    imagePullPolicy: Never
    command: ["sleep", "infinity"]
    env:
    - name: SOAK_GENERATION
      value: "{w.generation}"
"""
        file = f"{name}.yaml"
        tmp = self.path / f".{file}.tmp"
        tmp.write_text(body)
        os.rename(tmp, self.path / file)
        self.wants[file] = w
        self.touched.add(file)

    def remove(self, name):
        file = f"{name}.yaml"
        os.remove(self.path / file)
        del self.wants[file]
        self.touched.add(file)

    def churn_one(self, names):
        name = self.rng.choice(names)
        if f"{name}.yaml" not in self.wants:
            self.write(name)
            self.ops["add"] += 1
        elif self.rng.random() < 0.6:
            self.write(name)
            self.ops["edit"] += 1
        else:
            self.remove(name)
            self.ops["remove"] += 1

    def unchanged_full_names(self, node):
        return {
            sc.full_name(f"{w.name}-{node}", w.namespace)
            for f, w in self.wants.items() if f not in self.touched
        }


class Crilet:
    def __init__(self, a):
        self.a = a
        self.proc = None
        self.kills = 0

    def start(self):
        root = Path(self.a.dir) / "root"
        cmd = [
            self.a.crilet, "run",
            "--container-runtime-endpoint", f"unix://{self.a.socket}",
            "--pod-manifest-path", str(Path(self.a.dir) / "manifests"),
            "--file-check-frequency", "1s",
            "--hostname-override", self.a.node,
            "--root-dir", str(root),
            # Its own log directories, not the machine's /var/log.
            "--pod-logs-dir", str(Path(self.a.dir) / "pod-logs"),
            "--container-logs-dir", str(Path(self.a.dir) / "containers"),
            "--cgroup-root", f"/{self.a.cgroup_root}",
            "--node-ip", "127.0.0.1",
            "--socket", str(root / "crilet.sock"),
            "--port", "0",
        ]
        out = open(Path(self.a.dir) / "crilet.log", "ab")
        env = dict(os.environ, CRILET_LOG=os.environ.get("CRILET_LOG", "info"))
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env)
        out.close()
        (Path(self.a.dir) / "crilet.pid").write_text(str(self.proc.pid))

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def ensure_running(self):
        if self.proc is None or self.proc.poll() is not None:
            if self.proc is not None:
                log(f"crilet exited by itself with {self.proc.returncode}; restarting it")
            self.start()

    def rss_kib(self):
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        except (OSError, AttributeError):
            pass
        return None


class Containerd:
    """The private containerd of scripts/runtime.sh; its PID is in its
    state directory's containerd.pid."""

    def __init__(self, a):
        self.a = a
        self.kills = 0
        self.restarting = None

    def pid(self):
        try:
            p = int((Path(self.a.runtime_dir) / "containerd.pid").read_text())
        except (OSError, ValueError):
            return None
        try:
            if Path(f"/proc/{p}/comm").read_text().strip() == "containerd":
                return p
        except OSError:
            pass
        return None

    def kill_and_restart(self):
        p = self.pid()
        if p is None:
            log("containerd is not running; not killing it")
            return
        os.kill(p, signal.SIGKILL)
        # Its parent is gone (runtime.sh starts it with setsid), so init
        # reaps it: wait for that, or runtime.sh would take the zombie for
        # a running containerd.
        deadline = time.monotonic() + 30
        while Path(f"/proc/{p}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        if Path(f"/proc/{p}").exists():
            raise RuntimeError(f"killed containerd (pid {p}) was not reaped in 30 s")
        self.kills += 1
        out = open(Path(self.a.dir) / "runtime-restarts.log", "ab")
        self.restarting = subprocess.Popen(
            ["bash", self.a.runtime_script, "up", "containerd1", self.a.runtime_dir],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out,
        )
        out.close()

    def settle(self):
        """Waits for a restart still in progress."""
        if self.restarting is not None:
            rc = self.restarting.wait()
            self.restarting = None
            if rc != 0:
                raise RuntimeError(f"runtime.sh up failed ({rc}); see {self.a.dir}/runtime-restarts.log")

    def poll(self):
        if self.restarting is not None and self.restarting.poll() is not None:
            self.settle()


def crictl(a, *args):
    r = subprocess.run(
        [a.crictl, "--timeout", "10s", "-r", f"unix://{a.socket}", *args],
        capture_output=True, text=True, timeout=30,
    )
    if r.returncode != 0:
        raise RuntimeError(f"crictl {' '.join(args)}: {r.stderr.strip()}")
    return json.loads(r.stdout or "{}")


class ChurnSampler(threading.Thread):
    """Looks for duplicate ready sandboxes about once a second while the
    churn runs. The kubelet never runs two pods of one full name at once;
    what this sees is printed as a note, since the invariants proper are
    checked once crilet has converged."""

    def __init__(self, a):
        super().__init__(daemon=True)
        self.a = a
        self.stop = threading.Event()
        self.samples = 0
        self.seen = set()

    def run(self):
        while not self.stop.wait(1.0):
            try:
                sandboxes = crictl(self.a, "pods", "-o", "json").get("items") or []
            except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError):
                continue  # containerd is down for a moment
            self.samples += 1
            self.seen.update(sc.duplicates(sandboxes))


def host_dirs(a):
    """Pod cgroups, log and pod directories, as (path, uid) per invariant."""
    found = {"cgroup-leak": [], "log-leak": [], "pod-dir-leak": []}
    # One entry per pod cgroup, however many v1 hierarchies hold it.
    cgroups = {}
    hierarchies = [Path("/sys/fs/cgroup")] + sorted(p for p in Path("/sys/fs/cgroup").iterdir() if p.is_dir())
    for h in hierarchies:
        base = h / a.cgroup_root / "kubepods"
        for parent in (base, base / "burstable", base / "besteffort"):
            try:
                entries = list(parent.iterdir())
            except OSError:
                continue
            for d in entries:
                uid = sc.dir_uid("cgroup-leak", d.name)
                if d.is_dir() and uid:
                    rel = str(d.relative_to(h))
                    cgroups.setdefault(rel, [uid, 0])[1] += 1
    for rel, (uid, n) in sorted(cgroups.items()):
        found["cgroup-leak"].append((f"/sys/fs/cgroup/*/{rel} (in {n} hierarchies)", uid))
    for invariant, parent in (("log-leak", Path(a.dir) / "pod-logs"), ("pod-dir-leak", Path(a.dir) / "root" / "pods")):
        try:
            entries = list(parent.iterdir())
        except OSError:
            continue
        found[invariant] += [(str(d), sc.dir_uid(invariant, d.name)) for d in entries]
    return found


def log_links(a):
    """The container log symlinks, as (name, whether its log exists)."""
    try:
        return [(p.name, p.exists()) for p in (Path(a.dir) / "containers").iterdir()]
    except OSError:
        return []


def look(a, m, crilet, prev):
    try:
        sandboxes = crictl(a, "pods", "-o", "json").get("items") or []
        containers = crictl(a, "ps", "-a", "-o", "json").get("containers") or []
    except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError) as e:
        r = sc.Report()
        r.pending.append(f"runtime not answering: {e}")
        return r
    unchanged = m.unchanged_full_names(a.node)
    return sc.check(m.wants, a.node, sandboxes, containers, host_dirs(a), prev, unchanged, crilet.rss_kib(),
                    log_links(a))


def quiet_and_check(a, m, crilet, ctd, prev):
    """The quiet period: everything up again, at least --quiet-seconds, then
    until the invariants hold twice in a row or the bounded wait ends."""
    ctd.settle()
    crilet.ensure_running()
    t0 = time.monotonic()
    time.sleep(a.quiet_seconds)
    good, dup_seen = 0, set()
    while True:
        r = look(a, m, crilet, prev)
        for inv, detail in r.violations:
            if inv == "duplicate":
                dup_seen.add(detail)
        good = good + 1 if r.ok() else 0
        waited = time.monotonic() - t0
        if good >= 2 or waited >= a.converge_timeout:
            break
        time.sleep(1)
    if not r.ok():
        r.violations += [("converge", f"not converged after {waited:.0f} s: {p}") for p in r.pending]
    return r, waited, dup_seen


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=10)
    p.add_argument("--dir", required=True, help="crilet's manifests, root dir and log")
    p.add_argument("--socket", required=True, help="containerd's CRI socket")
    p.add_argument("--runtime-dir", required=True)
    p.add_argument("--runtime-script", required=True)
    p.add_argument("--crilet", required=True)
    p.add_argument("--crictl", required=True)
    p.add_argument("--cgroup-root", required=True)
    p.add_argument("--node", default="soak-node")
    p.add_argument("--pods", type=int, default=30)
    p.add_argument("--op-interval", type=float, default=0.2)
    p.add_argument("--churn-seconds", type=float, default=30)
    p.add_argument("--quiet-seconds", type=float, default=10)
    p.add_argument("--converge-timeout", type=float, default=120)
    p.add_argument("--containerd-every", type=float, default=60)
    p.add_argument("--seed", type=int, default=None)
    a = p.parse_args()
    seed = a.seed if a.seed is not None else random.randrange(1 << 32)
    rng = random.Random(seed)
    log(f"seed {seed}; {a.pods} manifests, churn {a.churn_seconds:.0f} s per loop, "
        f"quiet >= {a.quiet_seconds:.0f} s, convergence wait <= {a.converge_timeout:.0f} s, {a.minutes} min")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    m = Manifests(Path(a.dir) / "manifests", a.pods, rng)
    crilet, ctd = Crilet(a), Containerd(a)
    violations, checks, compared, max_rss, loops = [], 0, 0, 0, 0
    samples, churn_dups = 0, set()

    def report(found):
        """Prints and counts new violations; one still there from an
        earlier check (a leaked directory, say) counts once."""
        new = [v for v in found if v not in violations]
        for inv, detail in new:
            log(f"  VIOLATION {inv}: {detail}")
        if len(new) < len(found):
            log(f"  ({len(found) - len(new)} violation(s) of earlier checks still there)")
        log(f"  check {checks}: {len(new)} new violation(s)")
        violations.extend(new)
    try:
        for name in m.names:
            m.write(name)
        crilet.start()
        r, waited, _ = quiet_and_check(a, m, crilet, ctd, {})
        checks += 1
        log(f"start: {len(r.snapshot)} pods running after {waited:.0f} s")
        report(r.violations)
        prev = r.snapshot
        m.touched.clear()
        end = time.monotonic() + a.minutes * 60
        churn_clock = 0.0
        next_crilet = rng.uniform(5, 20)
        next_ctd = rng.uniform(a.containerd_every / 3, a.containerd_every)
        while time.monotonic() < end or loops == 0:
            loops += 1
            hot = rng.sample(m.names, len(m.names) // 2)
            ops0 = sum(m.ops.values())
            k0, c0 = crilet.kills, ctd.kills
            sampler = ChurnSampler(a)
            sampler.start()
            t_start = time.monotonic()
            while (elapsed := time.monotonic() - t_start) < a.churn_seconds:
                now = churn_clock + elapsed
                m.churn_one(hot)
                if now >= next_crilet:
                    crilet.kill()
                    crilet.kills += 1
                    crilet.start()
                    next_crilet = now + rng.uniform(5, 20)
                if now >= next_ctd and ctd.restarting is None:
                    ctd.kill_and_restart()
                    next_ctd = now + a.containerd_every
                ctd.poll()
                time.sleep(a.op_interval)
            churn_clock += a.churn_seconds
            sampler.stop.set()
            sampler.join()
            samples += sampler.samples
            churn_dups.update(sampler.seen)
            r, waited, dups = quiet_and_check(a, m, crilet, ctd, prev)
            checks += 1
            n = sc.unchanged_count(prev, r, m.unchanged_full_names(a.node))
            compared += n
            rss = crilet.rss_kib() or 0
            max_rss = max(max_rss, rss)
            state = f"converged in {waited:.0f} s" if r.ok() else f"NOT converged after {waited:.0f} s"
            log(f"loop {loops}: {sum(m.ops.values()) - ops0} ops on {len(hot)} names, "
                f"crilet killed {crilet.kills - k0}x, containerd killed {ctd.kills - c0}x; {state}; "
                f"{len(m.wants)} manifests, {len(r.snapshot)} pods running, "
                f"{n} unchanged pods compared, crilet RSS {rss // 1024} MiB")
            for d in sorted(sampler.seen):
                log(f"  note: seen under churn: duplicate {d}")
            for d in sorted(dups):
                log(f"  note: seen while converging: duplicate {d}")
            report(r.violations)
            prev = r.snapshot
            m.touched.clear()
    finally:
        crilet.kill()
        try:
            ctd.settle()
        except RuntimeError as e:
            log(str(e))
    by_inv = {}
    for inv, _ in violations:
        by_inv[inv] = by_inv.get(inv, 0) + 1
    log(f"SUMMARY: {loops} loops, {sum(m.ops.values())} manifest ops ({m.ops['add']} adds, "
        f"{m.ops['edit']} edits, {m.ops['remove']} removes), {crilet.kills} kills of crilet, "
        f"{ctd.kills} kills of containerd, {checks} invariant checks, {compared} unchanged pods compared, "
        f"max crilet RSS {max_rss // 1024} MiB, {len(violations)} violations"
        + (f" {by_inv}" if by_inv else ""))
    log(f"under churn: {samples} samples of the runtime's sandboxes, "
        f"{len(churn_dups)} duplicate ready sandbox pair(s) seen (notes, not violations)")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
