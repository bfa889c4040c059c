//! Tests of the node status settings: defaults, flag over file, and each
//! bad value naming its flag or its file and field.

use std::time::Duration;

use crate::agent::config::{ConfigFile, RunArgs, parse_config_file, resolve};
use crate::nodestatus::eviction::{Signal, ThresholdValue};

fn flags(args: &[&str]) -> RunArgs {
    crate::agent::config::parse_flags(args)
}

fn file(text: &str) -> ConfigFile {
    parse_config_file("k.yaml", text).unwrap()
}

fn settings(args: &RunArgs, f: &ConfigFile) -> super::NodeStatusSettings {
    resolve(args, f, "k.yaml").unwrap().node_status
}

fn err(args: &RunArgs, f: &ConfigFile) -> String {
    match resolve(args, f, "k.yaml") {
        Ok(s) => panic!("expected an error, got {:?}", s.node_status),
        Err(e) => e.to_string(),
    }
}

#[test]
fn defaults_are_the_kubelets() {
    let s = settings(&RunArgs::default(), &ConfigFile::default());
    assert_eq!(s.max_pods, 110);
    assert_eq!(s.pods_per_core, 0);
    assert_eq!(s.max_images, 50);
    assert_eq!(s.update_frequency, Duration::from_secs(10));
    assert_eq!(s.report_frequency, Duration::from_secs(300));
    assert_eq!(
        s.eviction_pressure_transition_period,
        Duration::from_secs(300)
    );
    assert_eq!(s.kube_reserved, Default::default());
    let signals: Vec<Signal> = s.eviction_hard.iter().map(|t| t.signal).collect();
    assert_eq!(
        signals,
        [
            Signal::ImageFsAvailable,
            Signal::ImageFsInodesFree,
            Signal::MemoryAvailable,
            Signal::NodeFsAvailable,
            Signal::NodeFsInodesFree
        ]
    );
}

#[test]
fn flags_win_over_the_file_and_the_file_over_defaults() {
    let f = file(
        "kubeReserved: {cpu: 200m, memory: 1Gi}\nsystemReserved: {memory: 512Mi}\nevictionHard: {memory.available: 1Gi}\nevictionPressureTransitionPeriod: 30s\nmaxPods: 20\npodsPerCore: 4\nnodeStatusMaxImages: 3\nnodeStatusUpdateFrequency: 20s\nnodeStatusReportFrequency: 1m\n",
    );
    let s = settings(&RunArgs::default(), &f);
    assert_eq!(s.kube_reserved.cpu_millicores, 200);
    assert_eq!(s.kube_reserved.memory_bytes, 1 << 30);
    assert_eq!(s.system_reserved.memory_bytes, 512 << 20);
    // A given map replaces the defaults.
    assert_eq!(s.eviction_hard.len(), 1);
    assert_eq!(s.eviction_hard[0].value, ThresholdValue::Quantity(1 << 30));
    assert_eq!((s.max_pods, s.pods_per_core, s.max_images), (20, 4, 3));
    assert_eq!(
        s.eviction_pressure_transition_period,
        Duration::from_secs(30)
    );
    assert_eq!(s.update_frequency, Duration::from_secs(20));
    assert_eq!(s.report_frequency, Duration::from_secs(60));
    let a = flags(&[
        "--kube-reserved=cpu=1",
        "--system-reserved=pid=100",
        "--eviction-hard=nodefs.available<5%",
        "--eviction-pressure-transition-period=1s",
        "--max-pods=7",
        "--pods-per-core=0",
        "--node-status-max-images=-1",
        "--node-status-update-frequency=5s",
    ]);
    let s = settings(&a, &f);
    assert_eq!(s.kube_reserved.cpu_millicores, 1000);
    assert_eq!(s.kube_reserved.memory_bytes, 0, "the flag replaces the map");
    assert_eq!(s.system_reserved.pid, 100);
    assert_eq!(s.eviction_hard.len(), 1);
    assert_eq!(s.eviction_hard[0].signal, Signal::NodeFsAvailable);
    assert_eq!(
        s.eviction_pressure_transition_period,
        Duration::from_secs(1)
    );
    assert_eq!((s.max_pods, s.pods_per_core, s.max_images), (7, 0, -1));
    assert_eq!(s.update_frequency, Duration::from_secs(5));
    assert_eq!(s.report_frequency, Duration::from_secs(60), "the file's");
}

#[test]
fn an_explicit_update_frequency_is_the_report_frequency_unless_given() {
    let s = settings(
        &flags(&["--node-status-update-frequency=30s"]),
        &ConfigFile::default(),
    );
    assert_eq!(s.report_frequency, Duration::from_secs(30));
    let s = settings(
        &RunArgs::default(),
        &file("nodeStatusUpdateFrequency: 40s\n"),
    );
    assert_eq!(s.report_frequency, Duration::from_secs(40));
}

#[test]
fn an_empty_eviction_flag_turns_every_threshold_off() {
    let s = settings(&flags(&["--eviction-hard="]), &ConfigFile::default());
    assert!(s.eviction_hard.is_empty());
    let s = settings(&RunArgs::default(), &file("evictionHard: {}\n"));
    assert!(s.eviction_hard.is_empty());
}

#[test]
fn bad_values_name_the_flag_or_the_file_and_field() {
    let none = ConfigFile::default();
    let cases: [(&[&str], &str, &[&str]); 12] = [
        (&["--kube-reserved=gpu=1"], "", &["--kube-reserved", "gpu"]),
        (
            &["--system-reserved=memory"],
            "",
            &["--system-reserved", "malformed"],
        ),
        (
            &["--eviction-hard=memory.available>1Gi"],
            "",
            &["--eviction-hard", "malformed"],
        ),
        (
            &["--eviction-hard=disk.free<1Gi"],
            "",
            &["--eviction-hard", "disk.free"],
        ),
        (&["--max-pods=-1"], "", &["--max-pods", "negative"]),
        (
            &["--pods-per-core=-2"],
            "",
            &["--pods-per-core", "negative"],
        ),
        (
            &["--node-status-max-images=-2"],
            "",
            &["--node-status-max-images", "-2"],
        ),
        (
            &["--node-status-update-frequency=0s"],
            "",
            &["--node-status-update-frequency"],
        ),
        (
            &[],
            "kubeReserved: {memory: -1Gi}\n",
            &["k.yaml", "kubeReserved", "negative"],
        ),
        (
            &[],
            "evictionHard: {nodefs.available: 120%}\n",
            &["k.yaml", "evictionHard", "100%"],
        ),
        (&[], "maxPods: -5\n", &["k.yaml", "maxPods"]),
        (
            &[],
            "nodeStatusReportFrequency: soon\n",
            &["k.yaml", "nodeStatusReportFrequency"],
        ),
    ];
    for (args, text, wants) in cases {
        let f = if text.is_empty() {
            none.clone()
        } else {
            file(text)
        };
        let e = err(&flags(args), &f);
        for want in wants {
            assert!(e.contains(want), "{args:?} {text:?}: {e}");
        }
    }
}
