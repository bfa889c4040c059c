//! Fixtures of the GC tests: their own runtime whose image store is a small
//! loop-mounted ext4 (CRILET_GC_TEST_ENDPOINT, CRILET_GC_TEST_DIR), images
//! of known sizes built by scripts/gc-images.sh and pulled from the
//! loopback registry, a disk filler, and a log capture for the warnings.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crilet::cri::*;
use crilet::images::disk::{DiskStats, Statvfs};
use crilet::images::select::DiskUsage;

use crate::support::PodFixture;

/// Serialises the GC tests: they fill one disk and remove images.
pub static GC_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
pub const MIB: u64 = 1 << 20;
/// cgroupfs root of this containerd's pods (its down script cleans it):
/// CRILET_GC_TEST_CGROUP_ROOT, or "crilet-gc-test", so that the runtime
/// passes that run at once never share one (an agent sweeps the pod
/// cgroups under its root that it does not know).
pub fn gc_cgroup_root() -> String {
    std::env::var("CRILET_GC_TEST_CGROUP_ROOT").unwrap_or_else(|_| "crilet-gc-test".into())
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!(
            "{name} is not set: the GC tests need their own containerd on a loop-mounted root. \
             Run `bash scripts/test.sh`, or start one with `scripts/containerd-up.sh \
             /tmp/crilet-gc-test --root-fs loop:512M` and export \
             CRILET_GC_TEST_ENDPOINT=unix:///tmp/crilet-gc-test/containerd.sock \
             CRILET_GC_TEST_DIR=/tmp/crilet-gc-test"
        )
    })
}

pub fn gc_dir() -> PathBuf {
    PathBuf::from(env("CRILET_GC_TEST_DIR"))
}

pub fn gc_endpoint() -> String {
    env("CRILET_GC_TEST_ENDPOINT")
}

pub fn gc_runtime() -> CriRuntime {
    CriRuntime::connect_lazy(
        &gc_endpoint(),
        RuntimeOptions {
            request_timeout: Duration::from_secs(30),
            image_pull_timeout: Duration::from_secs(60),
        },
    )
    .expect("GC endpoint is valid")
}

/// The reference of a test image: in the loopback registry, which every
/// runtime of the suite pulls from; under the pass's runtime, since the
/// passes run at once and each pushes its own random layers.
pub fn gc_ref(name: &str) -> String {
    let kind = std::env::var("CRILET_TEST_RUNTIME").unwrap_or_else(|_| "containerd1".into());
    format!("{REGISTRY}/crilet/gc/{kind}/{name}:1")
}

/// The loopback registry of the CRI tests' containerd.
const REGISTRY: &str = "127.0.0.1:5000";

/// Builds (once) an image named `name` with a random layer of `mib` MiB,
/// pushes it to the loopback registry and pulls it through CRI: the same
/// path on every runtime (containerd and CRI-O import differently).
/// Returns the image's ID as the runtime lists it.
pub async fn import(rt: &CriRuntime, name: &str, mib: u64) -> String {
    let out = gc_dir().join("gc-images");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/gc-images.sh");
    let st = Command::new("bash")
        .arg(&script)
        .arg(&out)
        .arg(format!("{name}:{mib}"))
        .status()
        .unwrap();
    assert!(st.success(), "gc-images.sh failed");
    let o = Command::new("skopeo")
        .args(["copy", "--quiet", "--dest-tls-verify=false"])
        .arg(format!(
            "oci-archive:{}",
            out.join(format!("{name}.tar")).display()
        ))
        .arg(format!("docker://{}", gc_ref(name)))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "skopeo copy to {REGISTRY}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let reference = gc_ref(name);
    rt.pull_image(&reference, None, None)
        .await
        .unwrap_or_else(|e| panic!("pulling {reference}: {e}"));
    rt.image_status(&reference)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("{reference} pulled but not listed"))
        .id
}

/// Capacity and availability of the image filesystem, as GC reads them.
pub async fn disk(rt: &CriRuntime) -> DiskUsage {
    let fs = rt.image_fs_info().await.unwrap();
    let mount = &fs.image_filesystems[0].mountpoint;
    let s = Statvfs.stat(Path::new(mount)).unwrap();
    DiskUsage {
        capacity_bytes: s.capacity_bytes,
        available_bytes: s.available_bytes,
    }
}

/// A file that takes disk space on the containerd root until dropped.
pub struct Fill(PathBuf);

impl Fill {
    /// Leaves `available` bytes free on the image filesystem.
    pub async fn leave(rt: &CriRuntime, available: u64) -> Fill {
        let d = disk(rt).await;
        let take = d
            .available_bytes
            .checked_sub(available)
            .expect("disk already fuller");
        let path = gc_dir().join("root").join("crilet-gc-fill");
        let st = Command::new("fallocate")
            .args(["-l", &take.to_string()])
            .arg(&path)
            .status()
            .unwrap();
        assert!(st.success(), "fallocate");
        Fill(path)
    }
}

impl Drop for Fill {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Removes every pod, container and test image: each test starts clean.
pub async fn clean(rt: &CriRuntime) {
    let _ = std::fs::remove_file(gc_dir().join("root").join("crilet-gc-fill"));
    crate::agent::remove_all_pods(rt).await;
    for i in rt.list_images().await.unwrap() {
        if i.repo_tags
            .iter()
            .any(|t| t.starts_with(&format!("{REGISTRY}/crilet/gc/")))
        {
            rt.remove_image(&i.id).await.unwrap();
        }
    }
}

/// A host-network pod whose cgroup lives under this containerd's root.
pub fn pod(prefix: &str) -> PodFixture {
    let mut p = PodFixture::new(prefix, true);
    p.config.cgroup_parent = format!("/{}/pod{}", gc_cgroup_root(), p.labels.pod_uid);
    p
}

/// A container of `pod` on `image`, created and never started: it holds
/// the image in use all the same.
pub async fn hold(
    rt: &CriRuntime,
    pod: &PodFixture,
    sandbox: &str,
    name: &str,
    image: &str,
) -> String {
    let (_, mut cfg) = pod.container(name, "true");
    cfg.image = image.to_string();
    // The image's only file; CRI-O's runc create checks it can be executed.
    cfg.command = vec![format!("/data-{name}")];
    rt.create_container(sandbox, &cfg, &pod.config)
        .await
        .unwrap()
}

/// Whether the runtime still has `reference`.
pub async fn has(rt: &CriRuntime, reference: &str) -> bool {
    rt.image_status(reference).await.unwrap().is_some()
}

/// Everything logged on this thread while the guard lives.
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    pub fn capture() -> (Logs, tracing::dispatcher::DefaultGuard) {
        let logs = Logs::default();
        let w = logs.clone();
        let sub = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || w.clone())
            .finish();
        let guard = tracing::dispatcher::set_default(&tracing::Dispatch::new(sub));
        (logs, guard)
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}
