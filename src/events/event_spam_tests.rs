use super::*;

fn pod(name: &str, field_path: &str) -> EventObject {
    EventObject::test_pod(name, field_path)
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn client_gos_defaults_let_25_through_then_one_every_5_minutes() {
    let mut f = SpamFilter::default();
    let web = pod("web", "spec.containers{c}");
    let allowed = (0..40).filter(|_| f.allow(&web, secs(0))).count();
    assert_eq!(allowed, 25);
    let cases = [
        (299, false),
        (300, true),
        (301, false),
        (599, false),
        (600, true),
    ];
    for (at, want) in cases {
        assert_eq!(f.allow(&web, secs(at)), want, "at {at} s");
    }
}

#[test]
fn tokens_refill_at_the_rate_and_never_past_the_burst() {
    // burst 3, one token per 10 s.
    let cases: &[(&str, u64, bool)] = &[
        ("a", 0, true),
        ("a", 0, true),
        ("a", 0, true),
        ("a", 0, false),
        ("a", 9, false),
        ("a", 10, true),
        ("a", 10, false),
        ("a", 25, true), // 1.5 tokens had come back: one is used, half stays
        ("a", 30, true), // the half and 0.5 more
        ("a", 30, false),
        ("a", 1_000, true), // a long pause refills to the burst, no more
        ("a", 1_000, true),
        ("a", 1_000, true),
        ("a", 1_000, false),
        // A time that goes back (it never should) refills nothing.
        ("a", 500, false),
    ];
    let mut f = SpamFilter::new(3, secs(10), 16);
    for (i, (name, at, want)) in cases.iter().enumerate() {
        assert_eq!(
            f.allow(&pod(name, ""), secs(*at)),
            *want,
            "step {i} at {at} s"
        );
    }
}

#[test]
fn one_bucket_per_object_whatever_the_container() {
    let mut f = SpamFilter::new(2, secs(300), 16);
    let node = EventObject::node("node-1");
    let cases = [
        (pod("web", "spec.containers{a}"), true),
        (pod("web", "spec.containers{b}"), true),
        (pod("web", ""), false), // the pod's two tokens are gone
        (pod("db", "spec.containers{a}"), true),
        (node.clone(), true),
        (node.clone(), true),
        (node, false),
    ];
    for (i, (object, want)) in cases.into_iter().enumerate() {
        assert_eq!(f.allow(&object, secs(0)), want, "step {i}: {object:?}");
    }
    assert_eq!(f.len(), 3);
}

#[test]
fn a_uid_is_part_of_the_object() {
    // A manifest edited in place is a new static UID: a new bucket.
    let mut f = SpamFilter::new(1, secs(300), 16);
    let old = pod("web", "");
    let new = EventObject {
        uid: "uid-web-2".into(),
        ..old.clone()
    };
    assert!(f.allow(&old, secs(0)));
    assert!(!f.allow(&old, secs(0)));
    assert!(f.allow(&new, secs(0)));
}

#[test]
fn the_least_recently_used_bucket_goes_first() {
    let mut f = SpamFilter::new(1, secs(300), 2);
    assert!(f.allow(&pod("a", ""), secs(1)));
    assert!(f.allow(&pod("b", ""), secs(2)));
    assert!(!f.allow(&pod("a", ""), secs(3))); // a used at 3: b is older
    assert!(f.allow(&pod("c", ""), secs(4))); // evicts b
    assert_eq!(f.len(), 2);
    assert!(
        f.allow(&pod("b", ""), secs(5)),
        "b starts over with a full bucket"
    );
    assert!(!f.allow(&pod("c", ""), secs(6)), "c kept its bucket");
}
