//! Tests of the rotation plan: tables of listings, and a proptest that
//! applies plans to random directories and checks the module's invariant.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;

const LOG: &str = "0.log";
const TS: &str = "20260101-120000";
const POLICY: RotatePolicy = RotatePolicy {
    max_size: 100,
    max_files: 5,
};

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn rm(n: &str) -> Step {
    Step::Remove(n.into())
}

fn gz(n: &str) -> Step {
    Step::Compress(n.into())
}

fn rotate_tail() -> [Step; 2] {
    [
        Step::Rename {
            from: LOG.into(),
            to: format!("{LOG}.{TS}"),
        },
        Step::Reopen,
    ]
}

fn rotate(mut steps: Vec<Step>) -> Decision {
    steps.extend(rotate_tail());
    Decision::Rotate(steps)
}

/// Applies `steps` to a directory of names as the driver and the runtime
/// would, refusing a step the filesystem would refuse.
fn apply(dir: &mut BTreeSet<String>, log: &str, steps: &[Step]) -> Result<(), String> {
    for s in steps {
        match s {
            Step::Remove(n) => {
                dir.remove(n)
                    .then_some(())
                    .ok_or(format!("remove {n}: missing"))?;
            }
            Step::Compress(n) => {
                let out = format!("{n}{COMPRESS_SUFFIX}");
                if !dir.remove(n) || dir.contains(&out) {
                    return Err(format!("compress {n}: missing, or {out} exists"));
                }
                dir.insert(out);
            }
            Step::Rename { from, to } => {
                if !dir.remove(from) || !dir.insert(to.clone()) {
                    return Err(format!("rename {from} -> {to}"));
                }
            }
            Step::Reopen => {
                if !dir.insert(log.to_string()) {
                    return Err(format!("reopen: {log} exists"));
                }
            }
        }
    }
    Ok(())
}

#[test]
fn table() {
    // (what, size, listing, policy, decision)
    type Case<'a> = (&'a str, Option<u64>, Vec<&'a str>, RotatePolicy, Decision);
    let cases: Vec<Case> = vec![
        (
            "missing log: reopen only",
            None,
            vec!["0.log.20250101-000000"],
            POLICY,
            Decision::Reopen,
        ),
        (
            "small log: keep",
            Some(99),
            vec![LOG, "0.log.x.tmp"],
            POLICY,
            Decision::Keep,
        ),
        (
            "exactly max size: rotate",
            Some(100),
            vec![LOG],
            POLICY,
            rotate(vec![]),
        ),
        (
            "first rotation leaves unrelated files alone",
            Some(500),
            vec![LOG, "1.log", "0.logx", "10.log.20250101-000000", "other"],
            POLICY,
            rotate(vec![]),
        ),
        (
            "the newest uncompressed one is compressed",
            Some(500),
            vec![LOG, "0.log.20250101-000000.gz", "0.log.20250102-000000"],
            POLICY,
            rotate(vec![gz("0.log.20250102-000000")]),
        ),
        (
            "leftovers go first: tmp files and a file whose .gz exists",
            Some(500),
            vec![
                LOG,
                "0.log.20250101-000000",
                "0.log.20250101-000000.gz",
                "0.log.20250102-000000.tmp",
                "0.log.20250102-000000",
            ],
            POLICY,
            rotate(vec![
                rm("0.log.20250101-000000"),
                rm("0.log.20250102-000000.tmp"),
                gz("0.log.20250102-000000"),
            ]),
        ),
        (
            "at most max_files - 2 rotated kept: the oldest go",
            Some(500),
            vec![
                LOG,
                "0.log.20250104-000000",
                "0.log.20250101-000000.gz",
                "0.log.20250103-000000.gz",
                "0.log.20250102-000000.gz",
            ],
            RotatePolicy {
                max_size: 100,
                max_files: 4,
            },
            rotate(vec![
                rm("0.log.20250101-000000.gz"),
                rm("0.log.20250102-000000.gz"),
                gz("0.log.20250104-000000"),
            ]),
        ),
        (
            "two files: no rotated file is kept before the rename",
            Some(500),
            vec![LOG, "0.log.20250101-000000.gz", "0.log.20250102-000000"],
            RotatePolicy {
                max_size: 100,
                max_files: 2,
            },
            rotate(vec![
                rm("0.log.20250101-000000.gz"),
                rm("0.log.20250102-000000"),
            ]),
        ),
        (
            "two rotations in one second: wait",
            Some(500),
            vec![LOG, "0.log.20260101-120000"],
            POLICY,
            Decision::Wait {
                taken: "0.log.20260101-120000".into(),
            },
        ),
        (
            "this second's name compressed already: wait",
            Some(500),
            vec![LOG, "0.log.20260101-120000.gz"],
            POLICY,
            Decision::Wait {
                taken: "0.log.20260101-120000.gz".into(),
            },
        ),
        (
            "max size 0 rotates an empty log",
            Some(0),
            vec![LOG],
            RotatePolicy {
                max_size: 0,
                max_files: 5,
            },
            rotate(vec![]),
        ),
    ];
    for (what, size, listing, policy, want) in cases {
        let got = plan(LOG, size, &names(&listing), policy, TS);
        assert_eq!(got, want, "{what}");
    }
}

#[test]
fn all_logs_is_oldest_first_and_skips_leftovers() {
    let listing = names(&[
        "0.log",
        "0.log.20250102-000000",
        "0.log.20250101-000000.gz",
        "0.log.20250101-000000",
        "0.log.20250103-000000.tmp",
        "1.log",
    ]);
    assert_eq!(
        all_logs(LOG, &listing),
        ["0.log.20250101-000000.gz", "0.log.20250102-000000", "0.log"]
    );
    assert_eq!(all_logs(LOG, &[]), ["0.log"]);
}

#[test]
fn clean_targets_is_the_log_glob() {
    let listing = names(&[
        "0.log",
        "0.log.20250101-000000.gz",
        "0.log.20250102-000000",
        "0.log.x.tmp",
        "1.log",
        "10.log",
        "x0.log",
    ]);
    assert_eq!(
        clean_targets(LOG, &listing),
        [
            "0.log",
            "0.log.20250101-000000.gz",
            "0.log.20250102-000000",
            "0.log.x.tmp"
        ]
    );
    assert_eq!(clean_targets("1.log", &listing), ["1.log"]);
    assert!(clean_targets("", &listing).is_empty(), "no log, nothing");
}

/// A rotated file's name: a timestamp in 2025 (before [`TS`]), sometimes
/// this second's, with the suffixes a crash can leave.
fn rotated_entry() -> impl Strategy<Value = String> {
    let stamp = prop_oneof![
        9 => (1u32..=28, 0u32..24).prop_map(|(d, h)| format!("202501{d:02}-{h:02}0000")),
        1 => Just(TS.to_string()),
    ];
    let suffix = prop_oneof![Just(""), Just(".gz"), Just(".tmp"), Just(".gz.tmp")];
    (stamp, suffix).prop_map(|(s, x)| format!("{LOG}.{s}{x}"))
}

fn listing() -> impl Strategy<Value = (Vec<String>, bool)> {
    let junk = prop_oneof![
        Just("1.log".to_string()),
        Just("0.logx".to_string()),
        Just("10.log.20250101-000000".to_string()),
        "[a-z][a-z0-9.]{0,7}",
    ];
    (
        proptest::collection::vec(rotated_entry(), 0..12),
        proptest::collection::vec(junk, 0..3),
        any::<bool>(),
    )
        .prop_map(|(mut r, j, present)| {
            r.extend(j);
            if present {
                r.push(LOG.to_string());
            }
            let set: BTreeSet<String> = r.into_iter().collect();
            (set.into_iter().collect(), present)
        })
}

proptest! {
    #[test]
    fn applied_plans_keep_the_invariant(
        (listing, present) in listing(),
        size in 0u64..300,
        max_files in 2u32..7,
    ) {
        let policy = RotatePolicy { max_size: 100, max_files };
        let decision = plan(LOG, present.then_some(size), &listing, policy, TS);
        let before: BTreeSet<String> = listing.iter().cloned().collect();
        let target = rotated_name(LOG, TS);
        let steps = match decision {
            Decision::Keep => {
                prop_assert!(present && size < 100);
                return Ok(());
            }
            Decision::Reopen => {
                prop_assert!(!present);
                return Ok(());
            }
            Decision::Wait { taken } => {
                prop_assert!(taken.starts_with(&target) && before.contains(&taken));
                return Ok(());
            }
            Decision::Rotate(steps) => steps,
        };
        prop_assert!(present && size >= 100);
        // The log is touched by the final rename only, then reopened.
        let n = steps.len();
        prop_assert_eq!(&steps[n - 2..], &[
            Step::Rename { from: LOG.into(), to: target.clone() },
            Step::Reopen,
        ]);
        for s in &steps[..n - 2] {
            match s {
                Step::Remove(x) | Step::Compress(x) => {
                    prop_assert!(x.starts_with(&format!("{LOG}.")), "{:?}", s);
                }
                other => prop_assert!(false, "unexpected {:?}", other),
            }
        }
        let mut dir = before.clone();
        apply(&mut dir, LOG, &steps).map_err(TestCaseError::fail)?;
        // Files that are not the log's are untouched.
        let ours = |n: &String| n == LOG || n.starts_with(&format!("{LOG}."));
        let others = |d: &BTreeSet<String>| d.iter().filter(|n| !ours(n)).cloned().collect::<Vec<_>>();
        prop_assert_eq!(others(&dir), others(&before));
        // At most max_files files, only this rotation's file uncompressed.
        let mine: Vec<&String> = dir.iter().filter(|n| ours(n)).collect();
        prop_assert!(mine.len() <= max_files as usize, "{:?}", mine);
        let plain: Vec<&str> = mine
            .iter()
            .map(|n| n.as_str())
            .filter(|n| *n != LOG && !n.ends_with(COMPRESS_SUFFIX))
            .collect();
        prop_assert_eq!(plain, vec![target.as_str()]);
        // Every rotated name sorts before this rotation's (all stamps are
        // older), so the uncompressed one is the newest.
        prop_assert_eq!(mine.iter().filter(|n| n.as_str() != LOG).max(), Some(&&target));
        // What is kept is the newest of what held lines, none lost beyond
        // the excess.
        let rotated = rotated_siblings(LOG, &listing);
        let mut inuse: Vec<String> = rotated
            .iter()
            .filter(|n| is_in_use(n, &rotated))
            .map(|n| n.trim_end_matches(COMPRESS_SUFFIX).to_string())
            .collect();
        inuse.sort();
        let keep = (max_files - 2) as usize;
        let kept: Vec<String> = mine
            .iter()
            .filter(|n| n.as_str() != LOG && **n != &target)
            .map(|n| n.trim_end_matches(COMPRESS_SUFFIX).to_string())
            .collect();
        prop_assert_eq!(&kept[..], &inuse[inuse.len().saturating_sub(keep)..]);
        // A second check right away, the new log small: nothing more.
        let again: Vec<String> = dir.iter().cloned().collect();
        prop_assert_eq!(plan(LOG, Some(0), &again, policy, TS), Decision::Keep);
    }

    #[test]
    fn a_second_rotation_leaves_at_most_max_files(
        (listing, _) in listing(),
        max_files in 2u32..7,
    ) {
        // Two rotations a second apart keep the invariant too.
        let policy = RotatePolicy { max_size: 100, max_files };
        let mut dir: BTreeSet<String> = listing.into_iter().collect();
        dir.insert(LOG.to_string());
        for ts in ["20260101-120000", "20260101-120001"] {
            let listing: Vec<String> = dir.iter().cloned().collect();
            match plan(LOG, Some(100), &listing, policy, ts) {
                Decision::Rotate(steps) => apply(&mut dir, LOG, &steps).map_err(TestCaseError::fail)?,
                Decision::Wait { .. } => {}
                other => prop_assert!(false, "{:?}", other),
            }
        }
        let mine = dir.iter().filter(|n| *n == LOG || n.starts_with(&format!("{LOG}."))).count();
        prop_assert!(mine <= max_files as usize);
    }
}

#[test]
fn a_log_is_due_from_the_max_size_on() {
    let policy = RotatePolicy {
        max_size: 100,
        max_files: 5,
    };
    for (size, want) in [(0, false), (99, false), (100, true), (u64::MAX, true)] {
        assert_eq!(due(size, policy), want, "{size}");
    }
}
