//! Image GC through `crilet run`: the flags reach the collector, a bad one
//! is refused at start, and a running agent collects on its period.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::gc_support::*;
use crate::support::{BUSYBOX, PAUSE, eventually};

#[test]
fn invalid_gc_settings_are_refused_at_start_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("k.yaml");
    std::fs::write(&file, "imageGCHighThresholdPercent: 120\n").unwrap();
    let cases: [(&[&str], &str); 4] = [
        (
            &["--image-gc-low-threshold", "95"],
            "--image-gc-low-threshold",
        ),
        (
            &["--image-gc-high-threshold", "-1"],
            "--image-gc-high-threshold",
        ),
        (&["--image-maximum-gc-age", "1m"], "--image-maximum-gc-age"),
        (
            &["--config", file.to_str().unwrap()],
            "imageGCHighThresholdPercent",
        ),
    ];
    for (args, want) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_crilet"))
            .arg("run")
            .args([
                "--container-runtime-endpoint",
                "unix:///nonexistent/crilet.sock",
            ])
            .args(args)
            .args(["--port", "0"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[tokio::test]
#[ignore = "needs the GC tests' runtime (scripts/test.sh)"]
async fn agent_collects_unused_images_on_its_period() {
    let _g = GC_LOCK.lock().await;
    let rt = gc_runtime();
    clean(&rt).await;
    import(&rt, "a", 16).await;
    import(&rt, "b", 16).await;
    let d = disk(&rt).await;
    // 12 MiB over the low threshold of 70 %, about 72.3 % used: above the
    // high threshold of 71 % with room for containerd's own small writes
    // and frees; one 16 MiB image is enough to get back under 70 %.
    let _fill = Fill::leave(&rt, d.capacity_bytes * 30 / 100 - 12 * MIB).await;
    let root = tempfile::tempdir().unwrap();
    let log = root.path().join("crilet.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_crilet"))
        .args(["run", "--port", "0", "--container-runtime-endpoint"])
        .arg(gc_endpoint())
        .args(["--hostname-override", "gc-node", "--node-ip", "127.0.0.1"])
        .arg("--root-dir")
        .arg(root.path())
        .args(crate::support::private_log_dirs(root.path()))
        .args(["--cgroup-root", &format!("/{}", gc_cgroup_root())])
        .arg("--socket")
        .arg(root.path().join("crilet.sock"))
        .args(["--image-gc-period", "1s", "--image-gc-high-threshold", "71"])
        .args(["--image-gc-low-threshold", "70", "--pinned-image", BUSYBOX])
        .args(["--pinned-image", &gc_ref("b")])
        .env("CRILET_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    // Removal first, then the collection's summary line, written once the
    // whole collection is done: wait for both before stopping the agent.
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
    let removed = eventually(Duration::from_secs(20), || async {
        let logs = read_log();
        (!has(&rt, &gc_ref("a")).await
            && logs.contains("image garbage collected")
            && logs.contains("image garbage collection"))
        .then_some(())
    })
    .await;
    let _ = child.kill();
    let _ = child.wait();
    let logs = read_log();
    assert!(
        removed.is_some(),
        "unused image not collected, or not logged:\n{logs}"
    );
    for kept in [gc_ref("b"), PAUSE.into(), BUSYBOX.into()] {
        assert!(has(&rt, &kept).await, "{kept} removed:\n{logs}");
    }
    drop(_fill);
    clean(&rt).await;
}
