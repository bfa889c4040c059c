"""Tests of the soak's invariants (soak_check.py), one per rule, each with a
node that keeps it and one that breaks it. Run: python3 -m unittest
discover -s scripts -p 'soak_check_test.py' (scripts/test.sh does)."""

import unittest

import soak_check as sc

NODE = "n1"
PINNED = "5e5e5e5e-0000-4000-8000-000000000003"


def sandbox(sid, name, uid, gen=None, ns="default", state=sc.READY):
    ann = {} if gen is None else {sc.GENERATION: str(gen)}
    return {
        "id": sid,
        "state": state,
        "labels": {sc.POD_NAME: f"{name}-{NODE}", sc.POD_NAMESPACE: ns, sc.POD_UID: uid},
        "annotations": ann,
    }


def container(cid, sid, name, uid, gen, ns="default", state=sc.RUNNING):
    return {
        "id": cid,
        "podSandboxId": sid,
        "state": state,
        "metadata": {"name": sc.container_name(gen)},
        "labels": {sc.POD_NAME: f"{name}-{NODE}", sc.POD_NAMESPACE: ns, sc.POD_UID: uid},
    }


FN_A = sc.full_name(f"soak-00-{NODE}", "default")
FN_B = sc.full_name(f"soak-03-{NODE}", "default")


def base():
    """Two wanted pods, converged: soak-00 (hashed UID, generation 4) and
    soak-03 (pinned UID, generation 7)."""
    wants = {
        "soak-00.yaml": sc.Want("soak-00", "default", 4),
        "soak-03.yaml": sc.Want("soak-03", "default", 7, PINNED),
    }
    sandboxes = [sandbox("sa", "soak-00", "u-a", 4), sandbox("sb", "soak-03", PINNED, 2)]
    containers = [container("ca", "sa", "soak-00", "u-a", 4), container("cb", "sb", "soak-03", PINNED, 7)]
    dirs = {
        "cgroup-leak": [("/cg/kubepods/besteffort/podu-a", "u-a")],
        "log-leak": [(f"/r/logs/default_soak-03-{NODE}_{PINNED}", PINNED)],
        "pod-dir-leak": [("/r/pods/u-a", "u-a")],
    }
    return wants, sandboxes, containers, dirs


def run(wants, sandboxes, containers, dirs, prev=None, unchanged=(), rss=1000, links=None):
    return sc.check(wants, NODE, sandboxes, containers, dirs, prev or {}, set(unchanged), rss, links)


def kinds(report):
    return sorted({inv for inv, _ in report.violations})


class Converged(unittest.TestCase):
    def test_a_converged_node_is_ok_and_snapshotted(self):
        r = run(*base())
        self.assertTrue(r.ok(), (r.violations, r.pending))
        self.assertEqual(r.snapshot[FN_A], sc.Seen(4, "sa", "ca"))
        self.assertEqual(r.snapshot[FN_B], sc.Seen(7, "sb", "cb"))
        self.assertEqual(r.wanted_uids, {"ua", sc._norm(PINNED)})

    def test_objects_without_kubelet_labels_are_not_ours(self):
        wants, s, c, d = base()
        s.append({"id": "x", "state": sc.READY, "labels": {"app": "other"}})
        c.append({"id": "y", "podSandboxId": "x", "state": sc.RUNNING, "metadata": {"name": "z"}, "labels": {}})
        self.assertTrue(run(wants, s, c, d).ok())


class Duplicate(unittest.TestCase):
    def test_two_ready_sandboxes_of_one_full_name(self):
        wants, s, c, d = base()
        s.append(sandbox("sa2", "soak-00", "u-old", 3))
        r = run(wants, s, c, d)
        self.assertIn("duplicate", kinds(r))
        self.assertIn("2 ready sandboxes", [v for i, v in r.violations if i == "duplicate"][0])

    def test_duplicates_alone_as_the_churn_sampler_sees_them(self):
        _, s, _, _ = base()
        self.assertEqual(sc.duplicates(s), [])
        s.append(sandbox("sa2", "soak-00", "u-old", 3))
        self.assertEqual(
            sc.duplicates(s),
            [f"{FN_A}: 2 ready sandboxes: sa uid=u-a, sa2 uid=u-old"],
        )

    def test_a_not_ready_sandbox_beside_the_ready_one_is_no_duplicate(self):
        wants, s, c, d = base()
        s.append(sandbox("sb0", "soak-03", PINNED, 1, state="SANDBOX_NOTREADY"))
        self.assertTrue(run(wants, s, c, d).ok())

    def test_same_name_in_another_namespace_is_another_pod(self):
        wants, s, c, d = base()
        wants["soak-00-b.yaml"] = sc.Want("soak-00", "other", 9)
        s.append(sandbox("so", "soak-00", "u-o", 9, ns="other"))
        c.append(container("co", "so", "soak-00", "u-o", 9, ns="other"))
        r = run(wants, s, c, d)
        self.assertTrue(r.ok(), r.violations)


class Unwanted(unittest.TestCase):
    def test_a_ready_pod_no_manifest_names(self):
        wants, s, c, d = base()
        del wants["soak-00.yaml"]
        r = run(wants, s, c, d)
        # Its running container, and its cgroup and pod directory, too.
        self.assertEqual(kinds(r), ["cgroup-leak", "leftover", "pod-dir-leak", "unwanted"])
        self.assertIn("no manifest has this name", dict(r.violations)["unwanted"])

    def test_a_ready_pod_of_an_older_generation(self):
        wants, s, c, d = base()
        wants["soak-00.yaml"] = sc.Want("soak-00", "default", 5)
        r = run(wants, s, c, d)
        self.assertIn("unwanted", kinds(r))
        self.assertIn("older version", r.violations[0][1])
        self.assertEqual(r.pending, [f"{FN_A}: no ready sandbox of generation 5"])

    def test_a_pinned_uid_pod_keeps_its_sandbox_across_edits(self):
        # Generation 2 on the sandbox, 7 in the manifest: same UID, same pod.
        self.assertTrue(run(*base()).ok())

    def test_a_pinned_uid_pod_with_another_uid_is_unwanted(self):
        wants, s, c, d = base()
        s[1] = sandbox("sb", "soak-03", "u-other", 7)
        c[1] = container("cb", "sb", "soak-03", "u-other", 7)
        r = run(wants, s, c, d)
        self.assertIn("unwanted", kinds(r))


class Leftover(unittest.TestCase):
    def test_a_stopped_sandbox_of_a_removed_pod(self):
        wants, s, c, d = base()
        s.append(sandbox("old", "soak-09", "u-9", 1, state="SANDBOX_NOTREADY"))
        r = run(wants, s, c, d)
        self.assertEqual(kinds(r), ["leftover"])

    def test_an_exited_container_of_a_removed_pod(self):
        wants, s, c, d = base()
        c.append(container("old", "gone", "soak-09", "u-9", 1, state="CONTAINER_EXITED"))
        r = run(wants, s, c, d)
        self.assertEqual(kinds(r), ["leftover"])

    def test_the_exited_old_container_of_an_edited_pinned_pod_is_kept(self):
        wants, s, c, d = base()
        c.append(container("cb-old", "sb", "soak-03", PINNED, 6, state="CONTAINER_EXITED"))
        self.assertTrue(run(wants, s, c, d).ok())


class Pending(unittest.TestCase):
    def test_no_sandbox_yet(self):
        wants, s, c, d = base()
        wants["soak-06.yaml"] = sc.Want("soak-06", "default", 1)
        r = run(wants, s, c, d)
        self.assertEqual(r.violations, [])
        self.assertEqual(r.pending, [f"soak-06-{NODE}_default: no ready sandbox of generation 1"])
        self.assertFalse(r.ok())

    def test_sandbox_without_the_current_container(self):
        wants, s, c, d = base()
        c[1] = container("cb", "sb", "soak-03", PINNED, 6)
        r = run(wants, s, c, d)
        self.assertIn("runs 0 container(s) named c7", r.pending[0])
        self.assertNotIn(FN_B, r.snapshot)


class ContainerId(unittest.TestCase):
    def test_unchanged_pods_keep_their_ids(self):
        prev = run(*base()).snapshot
        r = run(*base(), prev=prev, unchanged={FN_A, FN_B})
        self.assertTrue(r.ok())
        self.assertEqual(sc.unchanged_count(prev, r, {FN_A, FN_B}), 2)

    def test_a_new_container_in_an_unchanged_pod(self):
        prev = run(*base()).snapshot
        wants, s, c, d = base()
        c[0] = container("ca2", "sa", "soak-00", "u-a", 4)
        r = run(wants, s, c, d, prev=prev, unchanged={FN_A})
        self.assertEqual(kinds(r), ["container-id"])
        self.assertIn("ca -> ca2", r.violations[0][1])

    def test_a_changed_manifest_may_change_ids(self):
        prev = run(*base()).snapshot
        wants, s, c, d = base()
        c[0] = container("ca2", "sa", "soak-00", "u-a", 4)
        self.assertTrue(run(wants, s, c, d, prev=prev, unchanged={FN_B}).ok())

    def test_a_pod_absent_from_the_last_check_is_not_compared(self):
        prev = run(*base()).snapshot
        del prev[FN_A]
        wants, s, c, d = base()
        c[0] = container("ca2", "sa", "soak-00", "u-a", 4)
        r = run(wants, s, c, d, prev=prev, unchanged={FN_A})
        self.assertTrue(r.ok())
        self.assertEqual(sc.unchanged_count(prev, r, {FN_A}), 0)


class Leaks(unittest.TestCase):
    def test_directories_of_unwanted_uids(self):
        for inv, path, uid in [
            ("cgroup-leak", "/cg/kubepods/podu-gone", "u-gone"),
            ("log-leak", f"/r/logs/default_soak-09-{NODE}_u-gone", "u-gone"),
            ("pod-dir-leak", "/r/pods/u-gone", "u-gone"),
        ]:
            wants, s, c, d = base()
            d[inv].append((path, uid))
            r = run(wants, s, c, d)
            self.assertEqual(r.violations, [(inv, f"{path}: uid u-gone belongs to no wanted pod")])

    def test_uids_compare_without_dashes(self):
        wants, s, c, d = base()
        d["cgroup-leak"].append(("/cg/kubepods/pod" + PINNED.replace("-", ""), PINNED.replace("-", "")))
        self.assertTrue(run(wants, s, c, d).ok())

    def test_directory_names(self):
        rows = [
            ("cgroup-leak", "podabc", "abc"),
            ("cgroup-leak", "pod", None),
            ("cgroup-leak", "cpu.shares", None),
            ("log-leak", "ns_name-n1_abc", "abc"),
            ("log-leak", "ns_name", None),
            ("log-leak", "ns__abc", None),
            ("pod-dir-leak", "abc", "abc"),
        ]
        for inv, name, want in rows:
            self.assertEqual(sc.dir_uid(inv, name), want, (inv, name))
        with self.assertRaises(ValueError):
            sc.dir_uid("other", "x")


class Rss(unittest.TestCase):
    def test_limit(self):
        self.assertTrue(run(*base(), rss=sc.RSS_LIMIT_KIB - 1).ok())
        self.assertTrue(run(*base(), rss=None).ok())
        r = run(*base(), rss=sc.RSS_LIMIT_KIB)
        self.assertEqual(kinds(r), ["rss"])


class SymlinkTest(unittest.TestCase):
    LINKS = [(f"soak-00-{NODE}_default_c4-ca.log", True), (f"soak-03-{NODE}_default_c7-cb.log", True)]

    def test_names(self):
        self.assertEqual(sc.link_container_id("web_default_main-0a1b2c.log"), "0a1b2c")
        self.assertEqual(sc.link_container_id("web_default_main-0a1b2c.log.gz"), None)
        self.assertEqual(sc.link_container_id("web_default_main-.log"), None)

    def test_one_link_per_running_wanted_container_keeps_it(self):
        wants, sandboxes, containers, dirs = base()
        r = run(wants, sandboxes, containers, dirs, links=self.LINKS)
        self.assertEqual(r.violations, [])
        # Not looked at: nothing said.
        self.assertEqual(run(wants, sandboxes, containers, dirs).violations, [])

    def test_a_link_of_a_gone_container_or_to_a_gone_log_leaks(self):
        wants, sandboxes, containers, dirs = base()
        links = self.LINKS + [("old_default_c1-cz.log", True)]
        links[0] = (links[0][0], False)
        r = run(wants, sandboxes, containers, dirs, links=links)
        self.assertEqual(kinds(r), ["symlink-leak"])
        self.assertEqual(len(r.violations), 2, r.violations)

    def test_a_running_wanted_container_without_a_link_is_missing_one(self):
        wants, sandboxes, containers, dirs = base()
        r = run(wants, sandboxes, containers, dirs, links=self.LINKS[1:])
        self.assertEqual(kinds(r), ["symlink-missing"])
        self.assertIn(FN_A, r.violations[0][1])


if __name__ == "__main__":
    unittest.main()
