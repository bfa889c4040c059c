"""The churn-and-kill soak's invariants (scripts/soak.sh), as pure functions.

Nothing here reads a clock, a file or the runtime: soak.py gathers what the
runtime and the host show (crictl's JSON, directory names, crilet's RSS) and
hands it to `check`, which says what is wrong and what has not settled yet.
soak_check_test.py tests every rule with made-up inputs.

Invariants, once crilet has converged after a quiet period:
  duplicate    at most one ready sandbox per pod full name (name_namespace);
  unwanted     no ready kubelet-labelled sandbox that no current manifest
               wants (another name, or an older generation of the manifest);
  leftover     no sandbox or container at all of a pod no manifest wants
               (crilet removes a terminated pod's runtime objects);
  container-id a pod whose manifest did not change since the last check
               keeps its sandbox and container IDs;
  cgroup-leak, log-leak, pod-dir-leak
               no pod cgroup, log directory or pod directory of a UID that
               no wanted pod has;
  symlink-leak no container log symlink (<pod>_<ns>_<container>-<id>.log)
               of a container the runtime no longer has, or whose log is
               gone (crilet removes it with its container);
  symlink-missing
               every wanted pod's running container has its symlink (made
               at start, or by the next crilet when one was killed first);
  rss          crilet's resident set below the limit (64 MiB).
`pending` lists what has not converged yet: a wanted pod without a ready
sandbox running its current container. After the bounded wait it counts as
a violation too ("converge").
"""

from dataclasses import dataclass, field

POD_NAME = "io.kubernetes.pod.name"
POD_NAMESPACE = "io.kubernetes.pod.namespace"
POD_UID = "io.kubernetes.pod.uid"
GENERATION = "soak.crilet.dev/generation"
READY = "SANDBOX_READY"
RUNNING = "CONTAINER_RUNNING"
RSS_LIMIT_KIB = 64 * 1024


@dataclass(frozen=True)
class Want:
    """What one manifest on disk asks for."""

    name: str  # metadata.name (the pod's name is name-<node>)
    namespace: str
    generation: int  # bumped at every edit; the container is named c<gen>
    uid: str | None = None  # metadata.uid when the manifest pins one


@dataclass(frozen=True)
class Seen:
    """A wanted pod as a check found it."""

    generation: int
    sandbox_id: str
    container_id: str


@dataclass
class Report:
    violations: list = field(default_factory=list)  # (invariant, detail)
    pending: list = field(default_factory=list)  # details
    snapshot: dict = field(default_factory=dict)  # full name -> Seen
    wanted_uids: set = field(default_factory=set)

    def ok(self):
        return not self.violations and not self.pending


def full_name(name, namespace):
    return f"{name}_{namespace}"


def container_name(generation):
    return f"c{generation}"


def kubelet_labelled(obj):
    labels = obj.get("labels") or {}
    return all(labels.get(k) for k in (POD_NAME, POD_NAMESPACE, POD_UID))


def _labels(obj):
    labels = obj.get("labels") or {}
    return labels[POD_NAME], labels[POD_NAMESPACE], labels[POD_UID]


def _matches(want, sandbox):
    """Is this sandbox the one the manifest's current content asks for?"""
    uid = _labels(sandbox)[2]
    if want.uid is not None:
        return uid == want.uid
    gen = (sandbox.get("annotations") or {}).get(GENERATION)
    return gen == str(want.generation)


def dir_uid(invariant, basename):
    """The pod UID a host directory is named after: pod<uid> for a pod
    cgroup, <namespace>_<name>_<uid> for a log directory, <uid> for a pod
    directory. None when the name is not one of those."""
    if invariant == "cgroup-leak":
        return basename[3:] if basename.startswith("pod") and len(basename) > 3 else None
    if invariant == "log-leak":
        parts = basename.split("_")
        return parts[2] if len(parts) == 3 and all(parts) else None
    if invariant == "pod-dir-leak":
        return basename or None
    raise ValueError(f"unknown directory invariant {invariant!r}")


def link_container_id(name):
    """The container ID (or the prefix of it a long name kept) a container
    log symlink's name ends with, after its last "-" and before ".log";
    None for another name."""
    if not name.endswith(".log"):
        return None
    return name[: -len(".log")].rsplit("-", 1)[-1] or None


def _norm(uid):
    return uid.replace("-", "").replace("_", "")


def ready_by_full_name(sandboxes):
    ready = {}
    for s in sandboxes:
        if kubelet_labelled(s) and s.get("state") == READY:
            name, ns, _ = _labels(s)
            ready.setdefault(full_name(name, ns), []).append(s)
    return ready


def duplicates(sandboxes):
    """One line per full name with more than one ready sandbox."""
    found = []
    for fn, ss in sorted(ready_by_full_name(sandboxes).items()):
        if len(ss) > 1:
            detail = ", ".join(f"{s['id'][:13]} uid={_labels(s)[2]}" for s in ss)
            found.append(f"{fn}: {len(ss)} ready sandboxes: {detail}")
    return found


def check(wants, node, sandboxes, containers, dirs, prev, unchanged, rss_kib, links=None):
    """One look at the node.

    wants: {file: Want}; sandboxes / containers: crictl pods / ps -a
    items; dirs: {"cgroup-leak"|"log-leak"|"pod-dir-leak": [(path, uid)]};
    prev: {full name: Seen} from the last check; unchanged: full names whose
    manifest was not touched since then; rss_kib: crilet's VmRSS or None;
    links: the container log symlinks as [(name, whether its log exists)],
    or None when not looked at.
    """
    r = Report()
    sandboxes = [s for s in sandboxes if kubelet_labelled(s)]
    containers = [c for c in containers if kubelet_labelled(c)]
    by_full = {}
    for w in wants.values():
        by_full[full_name(f"{w.name}-{node}", w.namespace)] = w

    ready = ready_by_full_name(sandboxes)
    r.violations += [("duplicate", d) for d in duplicates(sandboxes)]

    # Which sandboxes are wanted: the manifest's name and current content.
    wanted_sandbox_ids = set()
    for s in sandboxes:
        name, ns, uid = _labels(s)
        w = by_full.get(full_name(name, ns))
        if w is not None and _matches(w, s):
            wanted_sandbox_ids.add(s["id"])
            r.wanted_uids.add(_norm(uid))
    for w in by_full.values():
        if w.uid is not None:
            r.wanted_uids.add(_norm(w.uid))

    for s in sandboxes:
        if s["id"] in wanted_sandbox_ids:
            continue
        name, ns, uid = _labels(s)
        fn = full_name(name, ns)
        why = "no manifest has this name" if fn not in by_full else "an older version of its manifest"
        gen = (s.get("annotations") or {}).get(GENERATION, "?")
        what = f"{fn}: sandbox {s['id'][:13]} uid={uid} generation={gen} state={s.get('state')} ({why})"
        r.violations.append(("unwanted" if s.get("state") == READY else "leftover", what))
    for c in containers:
        if c.get("podSandboxId") in wanted_sandbox_ids:
            continue
        name, ns, uid = _labels(c)
        if _norm(uid) in r.wanted_uids:
            continue  # e.g. the exited container of an edited pinned-UID pod
        r.violations.append((
            "leftover",
            f"{full_name(name, ns)}: container {c['id'][:13]} ({c['metadata']['name']}, {c.get('state')}) "
            f"of uid={uid}, which no manifest wants",
        ))

    # Every wanted pod: one ready sandbox running its current container.
    for fn, w in sorted(by_full.items()):
        mine = [s for s in ready.get(fn, []) if s["id"] in wanted_sandbox_ids]
        if not mine:
            r.pending.append(f"{fn}: no ready sandbox of generation {w.generation}")
            continue
        s = mine[0]
        running = [
            c for c in containers
            if c.get("podSandboxId") == s["id"]
            and c.get("state") == RUNNING
            and c["metadata"]["name"] == container_name(w.generation)
        ]
        if len(running) != 1:
            r.pending.append(
                f"{fn}: sandbox {s['id'][:13]} runs {len(running)} container(s) "
                f"named {container_name(w.generation)}"
            )
            continue
        r.snapshot[fn] = Seen(w.generation, s["id"], running[0]["id"])

    for fn in sorted(unchanged):
        before, now = prev.get(fn), r.snapshot.get(fn)
        if before is None or now is None or before.generation != now.generation:
            continue
        if (before.sandbox_id, before.container_id) != (now.sandbox_id, now.container_id):
            r.violations.append((
                "container-id",
                f"{fn}: manifest unchanged (generation {now.generation}) but sandbox "
                f"{before.sandbox_id[:13]} -> {now.sandbox_id[:13]}, container "
                f"{before.container_id[:13]} -> {now.container_id[:13]}",
            ))

    for invariant, found in sorted(dirs.items()):
        for path, uid in found:
            if uid is not None and _norm(uid) not in r.wanted_uids:
                r.violations.append((invariant, f"{path}: uid {uid} belongs to no wanted pod"))

    if links is not None:
        ids = [c["id"] for c in containers]
        linked = set()
        for name, alive in sorted(links):
            cid = link_container_id(name)
            owners = [i for i in ids if cid is not None and i.startswith(cid)]
            linked.update(owners)
            if not owners:
                r.violations.append(("symlink-leak", f"{name}: no such container"))
            elif not alive:
                r.violations.append(("symlink-leak", f"{name}: its log is gone"))
        for fn, seen in sorted(r.snapshot.items()):
            if seen.container_id not in linked:
                r.violations.append(("symlink-missing", f"{fn}: container {seen.container_id[:13]} has no log symlink"))

    if rss_kib is not None and rss_kib >= RSS_LIMIT_KIB:
        r.violations.append(("rss", f"crilet VmRSS {rss_kib} KiB >= {RSS_LIMIT_KIB} KiB"))
    return r


def unchanged_count(prev, report, unchanged):
    """How many pods the container-id invariant compared."""
    return sum(
        1 for fn in unchanged
        if fn in prev and fn in report.snapshot
        and prev[fn].generation == report.snapshot[fn].generation
    )
