use std::sync::atomic::AtomicI64;
use std::time::Duration;

use super::*;
use crate::cri::{ContainerConfig, ContainerMetadata, FakeRuntime, PodSandboxConfig};
use crate::images::disk::FsStats;
use crate::images::select::KeepReason;

const MIB: u64 = 1 << 20;
const S: i64 = 1_000_000_000;

struct FakeDisk(Mutex<FsStats>);

impl FakeDisk {
    /// A 100 MiB disk with `free` MiB available.
    fn new(free: u64) -> Arc<Self> {
        Arc::new(FakeDisk(Mutex::new(FsStats {
            capacity_bytes: 100 * MIB,
            available_bytes: free * MIB,
            inodes: 0,
            inodes_free: 0,
        })))
    }
}

impl DiskStats for FakeDisk {
    fn stat(&self, path: &Path) -> std::io::Result<FsStats> {
        assert_eq!(
            path,
            Path::new("/fake/images"),
            "stats the ImageFsInfo mountpoint"
        );
        Ok(*self.0.lock().unwrap())
    }
}

struct Fixture {
    rt: Arc<FakeRuntime>,
    now: Arc<AtomicI64>,
    gc: ImageGcHandle,
}

fn fixture(free_mib: u64, policy: GcPolicy) -> Fixture {
    let rt = Arc::new(FakeRuntime::new());
    let now = Arc::new(AtomicI64::new(1000 * S));
    let clock_now = now.clone();
    let clock: Clock = Arc::new(move || clock_now.load(Ordering::SeqCst));
    let gc = ImageGcHandle::new(rt.clone(), FakeDisk::new(free_mib), policy, clock);
    Fixture { rt, now, gc }
}

impl Fixture {
    async fn run_container(&self, image: &str) -> String {
        let sb = PodSandboxConfig {
            metadata: crate::cri::PodSandboxMetadata {
                name: format!("p-{image}"),
                ..Default::default()
            },
            ..Default::default()
        };
        let id = self.rt.run_pod_sandbox(&sb).await.unwrap();
        let cfg = ContainerConfig {
            metadata: ContainerMetadata {
                name: "c".into(),
                attempt: 0,
            },
            image: image.into(),
            ..Default::default()
        };
        self.rt.create_container(&id, &cfg, &sb).await.unwrap()
    }

    fn advance(&self, secs: i64) {
        self.now.fetch_add(secs * S, Ordering::SeqCst);
    }

    fn removed_images(&self) -> Vec<String> {
        self.rt
            .calls()
            .into_iter()
            .filter(|c| c.op == "RemoveImage")
            .map(|c| c.arg)
            .collect()
    }
}

fn pinned(refs: &[&str]) -> GcPolicy {
    GcPolicy {
        pinned_images: refs.iter().map(|s| s.to_string()).collect(),
        ..GcPolicy::default()
    }
}

/// a (never used), b (used, then its container removed), c (in use),
/// the pause image, k (pinned by flag): all present at the first detection.
async fn populated(free_mib: u64) -> Fixture {
    populated_with(free_mib, 80).await
}

async fn populated_with(free_mib: u64, low: u8) -> Fixture {
    let policy = GcPolicy {
        low_threshold_percent: low,
        ..pinned(&["k:1"])
    };
    let f = fixture(free_mib, policy);
    f.rt.add_image("a:1", 10 * MIB);
    f.rt.add_image("b:1", 10 * MIB);
    f.rt.add_image("c:1", 30 * MIB);
    f.rt.add_image("registry.k8s.io/pause:3.6", 30 * MIB);
    f.rt.add_image("docker.io/library/k:1", 30 * MIB);
    let b = f.run_container("b:1").await;
    f.run_container("c:1").await;
    f.gc.detect().await.unwrap();
    f.rt.remove_container(&b).await.unwrap();
    f.advance(600);
    f
}

#[tokio::test]
async fn space_collection_removes_lru_until_low_and_keeps_used_pinned_and_pause() {
    let f = populated(5).await;
    let report = f.gc.collect().await.unwrap();
    assert_eq!(report.usage_percent, 95);
    assert_eq!(report.wanted_bytes, 15 * MIB);
    assert_eq!(f.removed_images(), ["sha256:a-1", "sha256:b-1"]);
    assert_eq!(report.freed_bytes, 20 * MIB);
    assert!(!report.short());
    let c = f.gc.counters();
    assert_eq!(c.images_removed(GcReason::Space), 2);
    assert_eq!(c.bytes_freed(GcReason::Space), 20 * MIB);
    assert_eq!(c.images_removed(GcReason::Age), 0);
    let left: Vec<String> =
        f.gc.images()
            .await
            .unwrap()
            .into_iter()
            .map(|i| i.id)
            .collect();
    assert_eq!(
        left,
        [
            "sha256:c-1",
            "sha256:docker.io-library-k-1",
            "sha256:registry.k8s.io-pause-3.6"
        ]
    );
}

#[tokio::test]
async fn not_enough_to_free_reports_wanted_vs_freed_and_why() {
    let f = populated_with(1, 10).await;
    // Added after the first detection: too young for two minutes.
    f.rt.add_image("young:1", 40 * MIB);
    let report = f.gc.collect().await.unwrap();
    // 99 % used, low 10 %: 89 MiB wanted; a and b hold 20.
    assert_eq!(report.wanted_bytes, 89 * MIB);
    assert_eq!(report.space_freed_bytes, 20 * MIB);
    assert!(report.short());
    assert_eq!(f.gc.counters().space_shortfalls.load(Ordering::Relaxed), 1);
    let why: Vec<(&str, KeepReason)> = report
        .kept
        .iter()
        .map(|k| (k.image.name.as_str(), k.why))
        .collect();
    assert!(why.contains(&("c:1", KeepReason::InUse)), "{why:?}");
    assert!(why.contains(&("docker.io/library/k:1", KeepReason::Pinned)));
    assert!(why.contains(&("registry.k8s.io/pause:3.6", KeepReason::Pinned)));
    assert!(why.contains(&("young:1", KeepReason::TooYoung)));
    let summary = report.kept_summary();
    assert!(
        summary.contains("1 too young (41943040 bytes)"),
        "{summary}"
    );
    assert!(summary.contains("2 pinned"), "{summary}");
}

#[tokio::test]
async fn a_failed_removal_is_skipped_and_the_next_candidate_taken() {
    let f = populated(5).await;
    f.rt.add_image("d:1", 10 * MIB);
    f.rt.fail_next("RemoveImage", tonic::Status::internal("busy"));
    // d is young: not a candidate. a fails, b and then nothing else: 10 MiB of 15.
    let report = f.gc.collect().await.unwrap();
    assert_eq!(f.removed_images(), ["sha256:a-1", "sha256:b-1"]);
    assert_eq!(report.failed.len(), 1);
    assert_eq!(report.failed[0].image.id, "sha256:a-1");
    assert_eq!(report.space_freed_bytes, 10 * MIB);
    assert!(report.short());
    assert_eq!(f.gc.counters().removal_failures.load(Ordering::Relaxed), 1);
}

#[tokio::test]
async fn dry_run_removes_nothing_and_says_what_collect_would_do() {
    let f = populated(5).await;
    let dry = f.gc.dry_run().await.unwrap();
    assert!(dry.dry_run);
    assert!(f.removed_images().is_empty());
    let would: Vec<&str> = dry.removed.iter().map(|r| r.image.id.as_str()).collect();
    assert_eq!(would, ["sha256:a-1", "sha256:b-1"]);
    let real = f.gc.collect().await.unwrap();
    assert_eq!(real.removed, dry.removed);
}

#[tokio::test]
async fn high_100_never_removes_and_max_age_does_whatever_the_usage() {
    let off = fixture(
        0,
        GcPolicy {
            high_threshold_percent: 100,
            low_threshold_percent: 80,
            ..GcPolicy::default()
        },
    );
    off.rt.add_image("a:1", 10 * MIB);
    off.gc.detect().await.unwrap();
    off.advance(3600);
    let r = off.gc.collect().await.unwrap();
    assert_eq!((r.usage_percent, r.wanted_bytes), (100, 0));
    assert!(off.removed_images().is_empty());

    let aged = fixture(
        90,
        GcPolicy {
            max_age: Some(Duration::from_secs(3600)),
            ..GcPolicy::default()
        },
    );
    aged.rt.add_image("old:1", MIB);
    aged.gc.detect().await.unwrap();
    aged.advance(1800);
    aged.rt.add_image("new:1", MIB);
    aged.gc.collect().await.unwrap();
    assert!(
        aged.removed_images().is_empty(),
        "nothing older than 1 h yet"
    );
    aged.advance(1801);
    aged.gc.collect().await.unwrap();
    assert_eq!(aged.removed_images(), ["sha256:old-1"]);
    assert_eq!(aged.gc.counters().images_removed(GcReason::Age), 1);
}

#[tokio::test]
async fn the_runtimes_own_sandbox_image_is_protected() {
    let f = fixture(5, GcPolicy::default());
    f.rt.set_sandbox_image(Some("example.test/sandbox:9"));
    f.rt.add_image("example.test/sandbox:9", 10 * MIB);
    f.rt.add_image("registry.k8s.io/pause:3.6", 10 * MIB);
    f.gc.detect().await.unwrap();
    f.advance(600);
    let r = f.gc.collect().await.unwrap();
    // The runtime's answer replaces the flag's default.
    assert_eq!(f.removed_images(), ["sha256:registry.k8s.io-pause-3.6"]);
    assert_eq!(r.kept[0].why, KeepReason::Pinned);
}

#[tokio::test(start_paused = true)]
async fn run_detects_at_once_and_collects_every_period() {
    let f = fixture(5, GcPolicy::default());
    f.rt.add_image("a:1", 20 * MIB);
    let cancel = CancellationToken::new();
    let task = tokio::spawn(f.gc.clone().run(cancel.clone()));
    tokio::time::sleep(Duration::from_secs(299)).await;
    assert!(
        f.removed_images().is_empty(),
        "no collection before the period"
    );
    assert_eq!(f.rt.ops().iter().filter(|o| **o == "ListImages").count(), 1);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(f.removed_images(), ["sha256:a-1"]);
    assert_eq!(f.gc.counters().collections.load(Ordering::Relaxed), 1);
    cancel.cancel();
    task.await.unwrap();
}
