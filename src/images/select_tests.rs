use super::*;
use crate::images::records::Protection;
use proptest::prelude::*;

const S: i64 = 1_000_000_000;
const MIB: u64 = 1 << 20;

fn rec(id: &str, size: u64, first: Option<i64>, last: Option<i64>) -> ImageRecord {
    ImageRecord {
        id: id.into(),
        repo_tags: vec![format!("{id}:1")],
        repo_digests: vec![],
        size,
        first_detected: first,
        last_used: last,
        in_use: false,
        pinned: None,
    }
}

fn policy(high: u8, low: u8) -> GcPolicy {
    GcPolicy {
        high_threshold_percent: high,
        low_threshold_percent: low,
        ..GcPolicy::default()
    }
}

/// A 100 MiB disk with `free` MiB available.
fn disk(free: u64) -> DiskUsage {
    DiskUsage {
        capacity_bytes: 100 * MIB,
        available_bytes: free * MIB,
    }
}

fn ids(v: &[(GcReason, &Selected)]) -> Vec<String> {
    v.iter().map(|(_, s)| s.id.clone()).collect()
}

#[test]
fn usage_and_bytes_to_free_follow_the_kubelet_formulas() {
    let d = disk(5);
    assert_eq!(d.usage_percent(), Ok(95));
    assert_eq!(d.bytes_to_free(80), 15 * MIB);
    assert_eq!(disk(30).bytes_to_free(80), 0);
    let zero = DiskUsage {
        capacity_bytes: 0,
        available_bytes: 0,
    };
    assert_eq!(zero.usage_percent(), Err(SelectError::NoCapacity));
}

#[test]
fn space_gc_removes_lru_first_until_low_and_keeps_used_pinned_young() {
    let now = 1000 * S;
    let mut used = rec("used", 50 * MIB, None, Some(now));
    used.in_use = true;
    let mut pinned = rec("pinned", 50 * MIB, None, None);
    pinned.pinned = Some(Protection::Sandbox);
    let records = ImageRecords::from_parts(
        0,
        [
            rec("b-used-at-300", 6 * MIB, None, Some(300 * S)),
            rec("a-used-at-200", 6 * MIB, None, Some(200 * S)),
            rec("never-used-late", 6 * MIB, Some(500 * S), None),
            rec("never-used-at-start", 6 * MIB, None, None),
            rec("young", 50 * MIB, Some(now - 10 * S), None),
            used,
            pinned,
        ],
    );
    // 95 % used, low 80 %: 15 MiB wanted, three 6 MiB images do it.
    let p = plan(&records, disk(5), &policy(90, 80), now).unwrap();
    assert_eq!(p.wanted_bytes, 15 * MIB);
    assert_eq!(
        ids(&p.would_remove()),
        ["never-used-at-start", "never-used-late", "a-used-at-200"]
    );
    let kept: Vec<(&str, KeepReason)> = p
        .kept
        .iter()
        .map(|k| (k.image.id.as_str(), k.why))
        .collect();
    assert!(kept.contains(&("used", KeepReason::InUse)));
    assert!(kept.contains(&("pinned", KeepReason::Pinned)));
    assert!(kept.contains(&("young", KeepReason::TooYoung)));
    assert_eq!(p.kept_bytes(KeepReason::TooYoung), (1, 50 * MIB));
}

#[test]
fn below_high_or_at_100_nothing_is_removed() {
    let records = ImageRecords::from_parts(0, [rec("a", 10 * MIB, None, None)]);
    // 89 % < 90 %.
    let p = plan(&records, disk(11), &policy(90, 80), 10 * S).unwrap();
    assert_eq!((p.wanted_bytes, p.would_remove().len()), (0, 0));
    // Exactly at high: collect.
    let p = plan(&records, disk(10), &policy(90, 80), 10 * S).unwrap();
    assert_eq!(p.wanted_bytes, 10 * MIB);
    assert_eq!(ids(&p.would_remove()), ["a"]);
    // A full disk with high = 100: space GC is off.
    let p = plan(&records, disk(0), &policy(100, 80), 10 * S).unwrap();
    assert!(p.would_remove().is_empty());
}

#[test]
fn max_age_removes_old_unused_images_whatever_the_usage() {
    let now = 10_000 * S;
    let max_age = Policy {
        max_age: Some(Duration::from_secs(3600)),
        ..policy(90, 80)
    };
    let records = ImageRecords::from_parts(
        now - 1800 * S,
        [
            rec("stale", MIB, None, Some(now - 3601 * S)),
            rec("recent", MIB, None, Some(now - 60 * S)),
            // Never used, there since the first detection 30 min ago: not older than 1 h.
            rec("at-start", MIB, None, None),
            rec("old-never-used", MIB, Some(now - 7200 * S), None),
        ],
    );
    let p = plan(&records, disk(90), &max_age, now).unwrap();
    assert_eq!(p.wanted_bytes, 0);
    let r = p.would_remove();
    assert!(r.iter().all(|(why, _)| *why == GcReason::Age));
    assert_eq!(ids(&r), ["old-never-used", "stale"]);
}

type Policy = GcPolicy;

/// Images with random sizes, ages, use and pins; a random disk.
fn arb_case() -> impl Strategy<Value = (Vec<ImageRecord>, u64, u8, u8, Option<u64>)> {
    let one = (
        1u64..40,
        proptest::option::of(0i64..1000),
        proptest::option::of(0i64..1000),
        any::<bool>(),
        any::<bool>(),
    );
    (
        proptest::collection::vec(one, 0..30),
        0u64..100,
        1u8..100,
        0u8..99,
        proptest::option::of(121u64..2000),
    )
        .prop_map(|(imgs, free, high, low, max_age)| {
            let recs = imgs
                .into_iter()
                .enumerate()
                .map(|(i, (size, first, last, in_use, pinned))| ImageRecord {
                    in_use,
                    pinned: pinned.then_some(Protection::Configured),
                    ..rec(
                        &format!("i{i:02}"),
                        size * MIB,
                        first.map(|t| t * S),
                        last.map(|t| t * S),
                    )
                })
                .collect();
            let (low, high) = if low < high {
                (low, high)
            } else {
                (high - 1, high)
            };
            (recs, free, high, low, max_age)
        })
}

proptest! {
    #[test]
    fn never_selects_in_use_pinned_or_young_and_frees_the_target_when_possible(
        (recs, free, high, low, max_age) in arb_case()
    ) {
        let now = 1000 * S;
        let pol = GcPolicy {
            high_threshold_percent: high,
            low_threshold_percent: low,
            max_age: max_age.map(Duration::from_secs),
            ..GcPolicy::default()
        };
        let records = ImageRecords::from_parts(0, recs.clone());
        let p = plan(&records, disk(free), &pol, now).unwrap();
        let removed = p.would_remove();
        for (_, s) in &removed {
            let r = records.get(&s.id).unwrap();
            prop_assert!(!r.in_use && r.pinned.is_none());
            prop_assert!(r.first_detected.is_none_or(|t| now - t >= 120 * S));
        }
        // Enough freed whenever the eligible images hold enough.
        let eligible: u64 = recs.iter().filter(|r| keep_reason(r, &pol, now).is_none()).map(|r| r.size).sum();
        let freed: u64 = removed.iter().map(|(_, s)| s.size).sum();
        if eligible >= p.wanted_bytes {
            prop_assert!(freed >= p.wanted_bytes);
        } else {
            prop_assert_eq!(freed, eligible);
        }
        // Space removals are in LRU order (ties: first detected).
        let space: Vec<(Option<i64>, Option<i64>)> = removed.iter()
            .filter(|(w, _)| *w == GcReason::Space)
            .map(|(_, s)| (s.last_used, s.first_detected)).collect();
        prop_assert!(space.windows(2).all(|w| w[0] <= w[1]));
        // Minimal: without the last space removal the target would not be met.
        if let Some((GcReason::Space, last)) = removed.last() {
            prop_assert!(freed - last.size < p.wanted_bytes);
        }
        // Every image is kept or a candidate (space candidates only when wanted).
        let candidates = recs.len() - p.kept.len();
        prop_assert!(p.age.len() <= candidates);
        if p.wanted_bytes > 0 {
            prop_assert_eq!(p.age.len() + p.space.len(), candidates);
        }
    }
}
