use super::*;
use crate::nodestatus::eviction::{
    default_eviction_hard, parse_eviction_hard_flag, parse_thresholds,
};
use proptest::prelude::*;

const KI: i64 = 1024;
const MI: i64 = 1024 * KI;
const GI: i64 = 1024 * MI;

fn list(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|&(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect()
}

/// A 4-core node with MemTotal 24605048 kB and a 100 GB root filesystem.
fn capacity() -> NodeResources {
    NodeResources {
        ephemeral_storage_bytes: Some(105_152_176_128),
        ..NodeResources::from_machine(4, 24_605_048 * KI, DEFAULT_MAX_PODS)
    }
}

fn defaults() -> Vec<Threshold> {
    parse_thresholds(&default_eviction_hard()).unwrap()
}

#[test]
fn reservations_parse_from_the_flag_and_the_config_map() {
    let r = Reservation::parse_flag("cpu=100m,memory=256Mi,ephemeral-storage=1Gi,pid=1000");
    let want = Reservation {
        cpu_millicores: 100,
        memory_bytes: 256 * MI,
        ephemeral_storage_bytes: GI,
        pid: 1000,
    };
    assert_eq!(r, Ok(want));
    let map: BTreeMap<String, String> = [("cpu", "0.5"), ("memory", "1G")]
        .iter()
        .map(|&(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let r = Reservation::from_map(&map).unwrap();
    assert_eq!((r.cpu_millicores, r.memory_bytes), (500, 1_000_000_000));
    // Trimmed, empty items skipped, a later key wins, zero is fine.
    let r = Reservation::parse_flag(" cpu = 1 ,,cpu=2,memory=0,").unwrap();
    assert_eq!((r.cpu_millicores, r.memory_bytes), (2000, 0));
    assert_eq!(Reservation::parse_flag(""), Ok(Reservation::default()));
    // Sub-unit amounts round up; too large saturates.
    let r = Reservation::parse_flag("cpu=0.1m,memory=0.5,pid=9Ei").unwrap();
    assert_eq!((r.cpu_millicores, r.memory_bytes, r.pid), (1, 1, i64::MAX));
}

#[test]
fn bad_reservations_are_refused_naming_the_entry() {
    use ReservationError as E;
    let rows: &[(&str, ReservationError, &str)] = &[
        (
            "cpu",
            E::MalformedPair {
                entry: "cpu".into(),
            },
            r#"malformed pair "cpu", expect string=string"#,
        ),
        (
            "memory=1Gi,gpu=1",
            E::UnknownResource {
                resource: "gpu".into(),
            },
            r#"cannot reserve "gpu" resource"#,
        ),
        (
            "pods=10",
            E::UnknownResource {
                resource: "pods".into(),
            },
            r#"cannot reserve "pods" resource"#,
        ),
        (
            "hugepages-2Mi=1Gi",
            E::UnknownResource {
                resource: "hugepages-2Mi".into(),
            },
            r#"cannot reserve "hugepages-2Mi" resource"#,
        ),
        (
            "memory=-1Gi",
            E::Negative {
                resource: "memory".into(),
                value: "-1Gi".into(),
            },
            r#"resource quantity for "memory" cannot be negative: -1Gi"#,
        ),
    ];
    for (text, want, message) in rows {
        let err = Reservation::parse_flag(text).unwrap_err();
        assert_eq!(&err, want, "{text}");
        assert_eq!(err.to_string(), *message);
    }
    match Reservation::parse_flag("cpu=lots") {
        Err(E::BadQuantity {
            resource, value, ..
        }) => assert_eq!((resource.as_str(), value.as_str()), ("cpu", "lots")),
        other => panic!("{other:?}"),
    }
    let err = Reservation::parse_flag("memory=").unwrap_err();
    assert!(err.to_string().contains(r#""" for "memory""#), "{err}");
}

#[test]
fn capacity_prints_as_the_kubelets() {
    let c = capacity()
        .with_hugepages(2048, 512)
        .with_hugepages(1024 * 1024, 1);
    assert_eq!(
        c.to_resource_list(),
        list(&[
            ("cpu", "4"),
            ("ephemeral-storage", "102687672Ki"),
            ("hugepages-1Gi", "1Gi"),
            ("hugepages-2Mi", "1Gi"),
            ("memory", "24605048Ki"),
            ("pods", "110"),
        ])
    );
    // No root filesystem reading: no ephemeral-storage; pid never shows.
    let c = NodeResources {
        pid: Some(4_194_304),
        ..NodeResources::from_machine(2, 1_999_999_000, 110)
    };
    assert_eq!(
        c.to_resource_list(),
        list(&[("cpu", "2"), ("memory", "1999999000"), ("pods", "110")])
    );
    assert_eq!(hugepage_resource_name(64 * KI), "hugepages-64Ki");
    assert_eq!(hugepage_resource_name(32 * MI), "hugepages-32Mi");
}

#[test]
fn pods_capacity_follows_max_pods_and_pods_per_core() {
    assert_eq!(pods_capacity(110, 0, 4), 110);
    assert_eq!(pods_capacity(110, 10, 4), 40);
    assert_eq!(pods_capacity(110, 100, 4), 110);
    assert_eq!(pods_capacity(250, -1, 64), 250);
}

#[test]
fn allocatable_without_reservations_is_capacity_less_the_default_eviction() {
    let none = Reservation::default();
    let a = node_allocatable(&capacity(), &none, &none, &defaults());
    assert_eq!(a.cpu_millicores, 4000);
    assert_eq!(a.memory_bytes, 24_605_048 * KI - 100 * MI);
    // 10% of the disk as float32 arithmetic gives it.
    assert_eq!(
        a.ephemeral_storage_bytes,
        Some(105_152_176_128 - 10_515_217_769)
    );
    assert_eq!(
        a.to_resource_list(),
        list(&[
            ("cpu", "4"),
            ("ephemeral-storage", "94636958359"),
            ("memory", "24502648Ki"),
            ("pods", "110"),
        ])
    );
    // No thresholds at all (an empty evictionHard, or ignore-eviction).
    let a = node_allocatable(&capacity(), &none, &none, &[]);
    assert_eq!(a, capacity());
}

#[test]
fn reservations_and_thresholds_add_up() {
    let kube =
        Reservation::parse_flag("cpu=100m,memory=256Mi,ephemeral-storage=1Gi,pid=1000").unwrap();
    let system = Reservation::parse_flag("cpu=0.5,memory=1Gi,pid=500").unwrap();
    let hard = parse_thresholds(
        &parse_eviction_hard_flag("memory.available<500Mi,nodefs.available<5Gi,pid.available<10%")
            .unwrap(),
    )
    .unwrap();
    let c = NodeResources {
        pid: Some(32_768),
        ..capacity()
    };
    let a = node_allocatable(&c, &kube, &system, &hard);
    assert_eq!(a.cpu_millicores, 3400);
    assert_eq!(a.memory_bytes, 24_605_048 * KI - 256 * MI - GI - 500 * MI);
    assert_eq!(
        a.ephemeral_storage_bytes,
        Some(105_152_176_128 - GI - 5 * GI)
    );
    // pid.available is no reservation; kube + system pid are.
    assert_eq!(a.pid, Some(32_768 - 1500));
    let l = a.to_resource_list();
    assert_eq!(l["cpu"], Quantity("3400m".into()));
    assert_eq!(l["memory"], Quantity("22782328Ki".into()));
    // A percentage memory threshold is of memory capacity.
    let hard =
        parse_thresholds(&parse_eviction_hard_flag("memory.available<10%").unwrap()).unwrap();
    let c = NodeResources::from_machine(1, 1_000_000_000, 110);
    let none = Reservation::default();
    let a = node_allocatable(&c, &none, &none, &hard);
    assert_eq!(a.memory_bytes, 1_000_000_000 - 100_000_001);
}

#[test]
fn hugepages_come_out_of_allocatable_memory() {
    let c = NodeResources::from_machine(2, 4 * GI, 110).with_hugepages(2048, 1024);
    let none = Reservation::default();
    let a = node_allocatable(&c, &none, &none, &defaults());
    assert_eq!(a.memory_bytes, 4 * GI - 100 * MI - 2 * GI);
    assert_eq!(a.hugepages, c.hugepages, "hugepages themselves stay");
    let l = a.to_resource_list();
    assert_eq!(l["memory"], Quantity("1948Mi".into()));
    assert_eq!(l["hugepages-2Mi"], Quantity("2Gi".into()));
    // More hugepages than memory left: 0, never negative.
    let c = NodeResources::from_machine(2, GI, 110).with_hugepages(1024 * 1024, 1);
    assert_eq!(
        node_allocatable(&c, &none, &none, &defaults()).memory_bytes,
        0
    );
}

#[test]
fn over_reservation_clamps_at_zero() {
    let huge = Reservation::parse_flag("cpu=64,memory=1Ti,ephemeral-storage=8Ei,pid=9Ei").unwrap();
    let c = NodeResources {
        pid: Some(1000),
        ..capacity()
    };
    let a = node_allocatable(&c, &huge, &huge, &defaults());
    assert_eq!(
        (
            a.cpu_millicores,
            a.memory_bytes,
            a.ephemeral_storage_bytes,
            a.pid
        ),
        (0, 0, Some(0), Some(0))
    );
    assert_eq!(a.pods, 110);
    assert_eq!(a.to_resource_list()["memory"], Quantity("0".into()));
}

fn reservation() -> impl Strategy<Value = Reservation> {
    (0..i64::MAX, 0..i64::MAX, 0..i64::MAX, 0..i64::MAX).prop_map(|(c, m, e, p)| Reservation {
        cpu_millicores: c >> (c % 64),
        memory_bytes: m >> (m % 64),
        ephemeral_storage_bytes: e >> (e % 64),
        pid: p >> (p % 64),
    })
}

proptest! {
    #[test]
    fn allocatable_stays_within_capacity(
        cores in 0u32..512,
        memory in 0..i64::MAX,
        storage in proptest::option::of(0..i64::MAX),
        pid in proptest::option::of(0..i64::MAX),
        pages in proptest::collection::btree_map(1i64..(1 << 20), 0i64..(1 << 20), 0..3),
        kube in reservation(),
        system in reservation(),
        memory_threshold in "[0-9]{1,12}(Mi|%)",
        nodefs_threshold in "[0-9]{1,2}%",
    ) {
        let mut c = NodeResources::from_machine(cores, memory, 110);
        c.ephemeral_storage_bytes = storage;
        c.pid = pid;
        for (kib, n) in pages {
            c = c.with_hugepages(kib, n);
        }
        let flag = format!("memory.available<{memory_threshold},nodefs.available<{nodefs_threshold}");
        let hard = parse_eviction_hard_flag(&flag)
            .ok()
            .and_then(|m| parse_thresholds(&m).ok())
            .unwrap_or_default();
        let a = node_allocatable(&c, &kube, &system, &hard);
        prop_assert!((0..=c.cpu_millicores).contains(&a.cpu_millicores));
        prop_assert!((0..=c.memory_bytes).contains(&a.memory_bytes));
        prop_assert_eq!(a.pods, c.pods);
        match (a.ephemeral_storage_bytes, c.ephemeral_storage_bytes) {
            (Some(a), Some(c)) => prop_assert!((0..=c).contains(&a)),
            (None, None) => {}
            other => prop_assert!(false, "storage {:?}", other),
        }
        match (a.pid, c.pid) {
            (Some(a), Some(c)) => prop_assert!((0..=c).contains(&a)),
            (None, None) => {}
            other => prop_assert!(false, "pid {:?}", other),
        }
        // Whatever the amounts, the lists print and parse back.
        for (name, q) in a.to_resource_list() {
            prop_assert!(quantity::parse(&q.0).is_ok(), "{} {}", name, q.0);
        }
    }
}
