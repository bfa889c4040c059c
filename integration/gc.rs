//! Image and dead-container GC against real containerd whose root sits on
//! a 512 MiB loop-mounted ext4: images of known sizes, some used by pods,
//! a file that fills the disk over the high threshold.

use std::sync::Arc;
use std::time::Duration;

use crilet::cri::*;
use crilet::images::disk::Statvfs;
use crilet::images::gc::{ImageGcHandle, system_clock};
use crilet::images::policy::GcPolicy;
use crilet::images::records::Protection;
use crilet::images::select::KeepReason;
use crilet::kuberuntime::container_gc_driver as container_gc;
use crilet::pod::view::AgentView;
use tokio_util::sync::CancellationToken;

use crate::gc_support::*;
use crate::support::{BUSYBOX, PAUSE, eventually, runtime_kind};

fn policy(high: u8, low: u8, pinned: &[&str]) -> GcPolicy {
    GcPolicy {
        high_threshold_percent: high,
        low_threshold_percent: low,
        period: Duration::from_millis(300),
        pinned_images: pinned.iter().map(|s| s.to_string()).collect(),
        // Not containerd's: the runtime's own answer must win.
        pod_infra_container_image: "example.test/not-the-sandbox:0".into(),
        ..GcPolicy::default()
    }
}

fn handle(rt: &CriRuntime, policy: GcPolicy) -> ImageGcHandle {
    ImageGcHandle::new(
        Arc::new(rt.clone()),
        Arc::new(Statvfs),
        policy,
        system_clock(),
    )
}

#[tokio::test]
#[ignore = "needs the GC tests' runtime (scripts/test.sh)"]
async fn space_gc_removes_unused_images_lru_first_until_low() {
    let _g = GC_LOCK.lock().await;
    let rt = gc_runtime();
    clean(&rt).await;
    for name in ["never", "old", "mid", "used", "pinned"] {
        import(&rt, name, 16).await;
    }
    let p = pod("gc-lru");
    let sb = rt.run_pod_sandbox(&p.config).await.unwrap();
    let old = hold(&rt, &p, &sb, "old", &gc_ref("old")).await;
    let mid = hold(&rt, &p, &sb, "mid", &gc_ref("mid")).await;
    hold(&rt, &p, &sb, "used", &gc_ref("used")).await;
    let pinned = gc_ref("pinned");
    let gc = handle(&rt, policy(72, 70, &[BUSYBOX, &pinned]));
    // old is last used at the first detection, mid at the second.
    gc.detect().await.unwrap();
    rt.remove_container(&old).await.unwrap();
    // The two detections apart in time: distinct last-used times.
    tokio::time::sleep(Duration::from_millis(20)).await;
    gc.detect().await.unwrap();
    rt.remove_container(&mid).await.unwrap();

    let views = gc.images().await.unwrap();
    let pause = views
        .iter()
        .find(|v| v.repo_tags.iter().any(|t| t == PAUSE));
    // containerd 2 and CRI-O pin it themselves; containerd 1.6 only names
    // it as its sandbox image.
    let want = match runtime_kind().pins_sandbox_image() {
        true => Protection::Runtime,
        false => Protection::Sandbox,
    };
    assert_eq!(pause.unwrap().pinned, Some(want));

    // 24 MiB to free: "never" (16) then "old" (16) do it; "mid" stays.
    let d = disk(&rt).await;
    let _fill = Fill::leave(&rt, d.capacity_bytes * 30 / 100 - 24 * MIB).await;
    let dry = gc.dry_run().await.unwrap();
    let would: Vec<&str> = dry.removed.iter().map(|r| r.image.name.as_str()).collect();
    assert_eq!(would, [gc_ref("never"), gc_ref("old")], "{dry:?}");
    assert!(
        has(&rt, &gc_ref("never")).await,
        "a dry run removes nothing"
    );

    let cancel = CancellationToken::new();
    let task = tokio::spawn(gc.clone().run(cancel.clone()));
    let gone = eventually(Duration::from_secs(20), || async {
        (!has(&rt, &gc_ref("never")).await && !has(&rt, &gc_ref("old")).await).then_some(())
    })
    .await;
    assert!(
        gone.is_some(),
        "the two least recently used images were not removed"
    );
    // Usage reaches the low threshold (ext4 frees blocks at its next commit).
    let low = eventually(Duration::from_secs(15), || async {
        let d = disk(&rt).await;
        (d.usage_percent().unwrap() <= 70).then_some(d)
    })
    .await;
    assert!(low.is_some(), "usage above low: {:?}", disk(&rt).await);
    // Give later periods a chance to over-collect; they must not.
    tokio::time::sleep(Duration::from_secs(1)).await;
    cancel.cancel();
    task.await.unwrap();
    for kept in [
        gc_ref("mid"),
        gc_ref("used"),
        pinned,
        PAUSE.into(),
        BUSYBOX.into(),
    ] {
        assert!(has(&rt, &kept).await, "{kept} was removed");
    }
    let c = gc.counters();
    assert_eq!(c.images_removed(crilet::images::select::GcReason::Space), 2);
    assert!(c.bytes_freed(crilet::images::select::GcReason::Space) >= 32 * MIB);
    clean(&rt).await;
}

#[tokio::test]
#[ignore = "needs the GC tests' runtime (scripts/test.sh)"]
async fn space_gc_short_of_the_target_warns_wanted_vs_freed() {
    let _g = GC_LOCK.lock().await;
    let rt = gc_runtime();
    clean(&rt).await;
    import(&rt, "never", 16).await;
    import(&rt, "used", 16).await;
    let p = pod("gc-short");
    let sb = rt.run_pod_sandbox(&p.config).await.unwrap();
    hold(&rt, &p, &sb, "used", &gc_ref("used")).await;
    let gc = handle(&rt, policy(72, 30, &[BUSYBOX]));
    gc.detect().await.unwrap();
    // Imported after the first detection: too young to go.
    import(&rt, "young", 16).await;
    let d = disk(&rt).await;
    let _fill = Fill::leave(&rt, d.capacity_bytes * 20 / 100).await;

    let (logs, _log_guard) = Logs::capture();
    let report = gc.collect().await.unwrap();
    assert!(report.short(), "{report:?}");
    assert!(report.wanted_bytes > 200 * MIB, "{report:?}");
    assert!(!has(&rt, &gc_ref("never")).await);
    assert!(report.space_freed_bytes >= 16 * MIB && report.space_freed_bytes < 17 * MIB);
    let why = |name: &str| {
        report
            .kept
            .iter()
            .find(|k| k.image.name == name)
            .map(|k| k.why)
    };
    assert_eq!(why(&gc_ref("used")), Some(KeepReason::InUse));
    assert_eq!(why(&gc_ref("young")), Some(KeepReason::TooYoung));
    assert_eq!(why(PAUSE), Some(KeepReason::Pinned));
    let text = logs.text();
    let warning = text
        .lines()
        .find(|l| l.contains("FreeDiskSpaceFailed"))
        .unwrap_or_else(|| panic!("no warning in:\n{text}"));
    assert!(warning.contains("WARN"), "{warning}");
    let wanted_vs_freed = format!(
        "wanted to free {} bytes, freed {}",
        report.wanted_bytes, report.space_freed_bytes
    );
    assert!(warning.contains(&wanted_vs_freed), "{warning}");
    for reason in ["in use", "pinned", "too young"] {
        assert!(warning.contains(reason), "{reason}: {warning}");
    }
    assert_eq!(
        gc.counters()
            .space_shortfalls
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    clean(&rt).await;
}

#[tokio::test]
#[ignore = "needs the GC tests' runtime (scripts/test.sh)"]
async fn high_threshold_100_removes_nothing_on_a_full_disk() {
    let _g = GC_LOCK.lock().await;
    let rt = gc_runtime();
    clean(&rt).await;
    import(&rt, "never", 16).await;
    let gc = handle(&rt, policy(100, 80, &[]));
    gc.detect().await.unwrap();
    let _fill = Fill::leave(&rt, 4 * MIB).await;
    let report = gc.collect().await.unwrap();
    assert!(report.usage_percent >= 99, "{report:?}");
    assert_eq!(report.wanted_bytes, 0);
    assert!(report.removed.is_empty());
    assert!(has(&rt, &gc_ref("never")).await);
    assert!(has(&rt, BUSYBOX).await);
    drop(_fill);
    clean(&rt).await;
}

/// Runs attempt `n` of container "app" to completion (`exit 1`), or
/// leaves it running.
async fn attempt(
    rt: &CriRuntime,
    p: &crate::support::PodFixture,
    sb: &str,
    n: u32,
    run: bool,
) -> String {
    let script = if run { "sleep 3600" } else { "exit 1" };
    let (mut labels, mut cfg) = p.container("app", script);
    labels.restart_count = n;
    cfg.metadata.attempt = n;
    cfg.labels = labels.to_labels();
    cfg.annotations = labels.to_annotations();
    cfg.log_path = format!("app/{n}.log");
    let id = rt.create_container(sb, &cfg, &p.config).await.unwrap();
    rt.start_container(&id).await.unwrap();
    if !run {
        let exited = eventually(Duration::from_secs(10), || async {
            let s = rt.container_status(&id).await.unwrap();
            (s.state == ContainerState::Exited).then_some(())
        })
        .await;
        assert!(exited.is_some(), "attempt {n} did not exit");
    }
    id
}

async fn attempts_left(rt: &CriRuntime) -> Vec<(u32, ContainerState)> {
    let mut v: Vec<(u32, ContainerState)> = rt
        .list_containers(&ContainerFilter::default())
        .await
        .unwrap()
        .into_iter()
        .map(|c| (c.metadata.attempt, c.state))
        .collect();
    v.sort_by_key(|(a, _)| *a);
    v
}

#[tokio::test]
#[ignore = "needs the GC tests' runtime (scripts/test.sh)"]
async fn dead_container_gc_keeps_the_newest_exited_instance() {
    let _g = GC_LOCK.lock().await;
    let rt = gc_runtime();
    clean(&rt).await;
    let p = pod("gc-dead");
    let sb = rt.run_pod_sandbox(&p.config).await.unwrap();
    let mut ids = Vec::new();
    for n in 0..4 {
        ids.push(attempt(&rt, &p, &sb, n, false).await);
    }
    ids.push(attempt(&rt, &p, &sb, 4, true).await);
    let (tx, rx) = tokio::sync::watch::channel(Arc::new(AgentView {
        unseen_sources: crilet::pod::view::UnseenSources::new(["file"]),
        ..AgentView::default()
    }));
    // A rotated file beside attempt 0's log: it goes with the container.
    let app = p.log_dir.path().join("app");
    std::fs::write(app.join("0.log.20260101-120000.gz"), "rotated").unwrap();
    // The runtime reports absolute log paths: no pod logs dir is needed.
    let links = tempfile::tempdir().unwrap();
    let dirs = crilet::logs::layout::LogDirs {
        pod_logs_dir: "/nonexistent".into(),
        container_logs_dir: links.path().to_path_buf(),
    };
    // Each instance's symlink, as the worker makes it at start; and dead
    // links: of a container the runtime never had (swept), and one whose
    // container runs (kept: a rotation renames its log for a moment).
    let link = |id: &str| {
        let meta = &p.config.metadata;
        crilet::logs::layout::legacy_log_symlink(
            links.path(),
            &meta.name,
            &meta.namespace,
            "app",
            id,
        )
    };
    for (n, id) in ids.iter().enumerate() {
        std::os::unix::fs::symlink(app.join(format!("{n}.log")), link(id)).unwrap();
    }
    let unknown = link("0123456789abcdef");
    std::os::unix::fs::symlink(app.join("gone.log"), &unknown).unwrap();
    let running_dead = links.path().join(format!("other_ns_app-{}.log", ids[4]));
    std::os::unix::fs::symlink(app.join("rotating.log"), &running_dead).unwrap();
    let names = || {
        let mut v: Vec<std::path::PathBuf> = std::fs::read_dir(links.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        v.sort();
        v
    };
    // The pod is not known to be gone (sources not all seen): only the surplus.
    assert_eq!(container_gc::collect(&rt, &rx, &dirs).await, 3);
    use ContainerState::{Exited, Running};
    assert_eq!(attempts_left(&rt).await, [(3, Exited), (4, Running)]);
    // The removed attempts' logs went with them (the kubelet's Clean).
    let mut logs: Vec<String> = std::fs::read_dir(&app)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    logs.sort();
    assert_eq!(logs, ["3.log", "4.log"]);
    // And their links; the unknown container's dead link went too.
    let mut want = vec![link(&ids[3]), link(&ids[4]), running_dead.clone()];
    want.sort();
    assert_eq!(names(), want);
    assert_eq!(container_gc::collect(&rt, &rx, &dirs).await, 0, "stable");
    // Every source seen and none wants the pod: its exited container goes.
    tx.send_replace(Arc::new(AgentView::default()));
    assert_eq!(container_gc::collect(&rt, &rx, &dirs).await, 1);
    assert_eq!(attempts_left(&rt).await, [(4, Running)]);
    let mut want = vec![link(&ids[4]), running_dead];
    want.sort();
    assert_eq!(names(), want);
    clean(&rt).await;
}
