//! Tests of the log directories and symlinks: real files in a temporary
//! directory, the runtime faked.

use std::os::unix::fs::PermissionsExt;

use super::*;
use crate::cri::{ContainerConfig, ContainerMetadata, FakeRuntime, PodSandboxConfig};
use crate::pod::POD_UID_LABEL;

struct Setup {
    rt: FakeRuntime,
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Self {
        let s = Setup {
            rt: FakeRuntime::new(),
            dir: tempfile::tempdir().unwrap(),
        };
        s.rt.add_image("busybox", 1);
        std::fs::create_dir_all(s.links()).unwrap();
        s
    }

    fn dirs(&self) -> LogDirs {
        LogDirs {
            pod_logs_dir: self.dir.path().join("pods"),
            container_logs_dir: self.links(),
        }
    }

    fn links(&self) -> PathBuf {
        self.dir.path().join("containers")
    }

    /// A started container of pod default/web labelled as the worker
    /// labels it (`labelled`), writing to `log` (made when `write`).
    async fn container(&self, name: &str, log: &Path, labelled: bool, write: bool) -> String {
        // A sandbox per container: the fake reserves sandbox names.
        let mut sandbox = PodSandboxConfig::default();
        sandbox.metadata.name = name.into();
        let sid = self.rt.run_pod_sandbox(&sandbox).await.unwrap();
        let labels = [
            (POD_NAME_LABEL, "web"),
            (POD_NAMESPACE_LABEL, "default"),
            (POD_UID_LABEL, "u1"),
            (CONTAINER_NAME_LABEL, name),
        ];
        let cfg = ContainerConfig {
            metadata: ContainerMetadata {
                name: name.into(),
                attempt: 0,
            },
            image: "busybox".into(),
            labels: labels
                .into_iter()
                .filter(|_| labelled)
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            log_path: log.display().to_string(),
            ..Default::default()
        };
        let id = self
            .rt
            .create_container(&sid, &cfg, &sandbox)
            .await
            .unwrap();
        self.rt.start_container(&id).await.unwrap();
        if write {
            std::fs::create_dir_all(log.parent().unwrap()).unwrap();
            std::fs::write(log, "x").unwrap();
        }
        id
    }

    fn link(&self, container: &str, id: &str) -> PathBuf {
        self.links()
            .join(format!("web_default_{container}-{id}.log"))
    }

    fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.links())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    }
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn setup_makes_both_directories_with_the_kubelets_modes() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = LogDirs {
        pod_logs_dir: dir.path().join("var/log/pods"),
        container_logs_dir: dir.path().join("var/log/containers"),
    };
    setup_dirs(&dirs).unwrap();
    // The umask may take bits away, never add them.
    assert_eq!(mode(&dirs.pod_logs_dir) & !0o750, 0);
    assert_eq!(mode(&dirs.pod_logs_dir) & 0o700, 0o700);
    assert_eq!(mode(&dirs.container_logs_dir) & !0o755, 0);
    // An existing directory keeps its mode.
    std::fs::set_permissions(&dirs.pod_logs_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    setup_dirs(&dirs).unwrap();
    assert_eq!(mode(&dirs.pod_logs_dir), 0o700);
    // A pod logs directory that cannot be made stops the start, naming it
    // and the flag; a symlinks directory that cannot be made does not.
    std::fs::write(dir.path().join("file"), "x").unwrap();
    let bad = LogDirs {
        pod_logs_dir: dir.path().join("file/pods"),
        container_logs_dir: dirs.container_logs_dir.clone(),
    };
    let err = setup_dirs(&bad).unwrap_err().to_string();
    assert!(
        err.contains("--pod-logs-dir") && err.contains(&bad.pod_logs_dir.display().to_string()),
        "{err}"
    );
    let bad = LogDirs {
        pod_logs_dir: dirs.pod_logs_dir.clone(),
        container_logs_dir: dir.path().join("file/containers"),
    };
    setup_dirs(&bad).unwrap();
}

#[tokio::test]
async fn a_started_container_is_linked_to_its_log() {
    let s = Setup::new();
    let log = s.dirs().pod_logs_dir.join("default_web_u1/main/0.log");
    let id = s.container("main", &log, true, true).await;
    let link = s.link("main", &id);
    let made = link_started_container(&s.rt, &link, log.clone(), &id, &s.dirs().pod_logs_dir)
        .await
        .unwrap();
    assert_eq!(made.as_deref(), Some(link.as_path()));
    assert_eq!(std::fs::read_link(&link).unwrap(), log);
    // The kubelet's symlink call fails on an existing link: an error
    // naming the container, the link and the log.
    let err = link_started_container(&s.rt, &link, log.clone(), &id, &s.dirs().pod_logs_dir)
        .await
        .unwrap_err()
        .to_string();
    for want in [&id, &link.display().to_string(), &log.display().to_string()] {
        assert!(err.contains(want.as_str()), "{err}");
    }
}

#[tokio::test]
async fn the_runtimes_path_is_linked_when_the_given_one_does_not_exist() {
    let s = Setup::new();
    // The runtime writes to the sandbox's old directory (a runtime that
    // keeps the log directory its sandbox was run with).
    let old = s.dir.path().join("root/logs/default_web_u1/main/1.log");
    let id = s.container("main", &old, true, true).await;
    let given = s.dirs().pod_logs_dir.join("default_web_u1/main/1.log");
    let link = s.link("main", &id);
    let made = link_started_container(&s.rt, &link, given.clone(), &id, &s.dirs().pod_logs_dir)
        .await
        .unwrap();
    assert_eq!(made.as_deref(), Some(link.as_path()));
    assert_eq!(std::fs::read_link(&link).unwrap(), old);
    // Neither exists: no dangling link.
    let gone = s.dir.path().join("nowhere/0.log");
    let id = s.container("side", &gone, true, false).await;
    let link = s.link("side", &id);
    let made = link_started_container(&s.rt, &link, given, &id, &s.dirs().pod_logs_dir).await;
    assert_eq!(made.unwrap(), None);
    assert!(std::fs::symlink_metadata(&link).is_err());
}

#[tokio::test]
async fn a_removed_containers_link_goes_and_an_unlabelled_one_has_none() {
    let s = Setup::new();
    let log = s.dirs().pod_logs_dir.join("default_web_u1/main/0.log");
    let id = s.container("main", &log, true, true).await;
    let link = s.link("main", &id);
    std::os::unix::fs::symlink(&log, &link).unwrap();
    let status = s.rt.container_status(&id).await.unwrap();
    let dir = s.links();
    assert_eq!(remove_link(&dir, &status, &id).unwrap(), Some(link.clone()));
    assert!(std::fs::symlink_metadata(&link).is_err());
    assert_eq!(remove_link(&dir, &status, &id).unwrap(), None);
    let bare = s.container("bare", &log, false, false).await;
    let status = s.rt.container_status(&bare).await.unwrap();
    assert_eq!(remove_link(&dir, &status, &bare).unwrap(), None);
}

#[tokio::test]
async fn dead_links_go_once_their_container_is_gone_or_exited() {
    let s = Setup::new();
    let gone = s.dir.path().join("gone.log");
    let live_log = s.dir.path().join("live.log");
    std::fs::write(&live_log, "x").unwrap();
    let running = s.container("run", &gone, true, false).await;
    let exited = s.container("ex", &gone, true, false).await;
    s.rt.exit_container(&exited, 0);
    let flaky = s.container("flaky", &gone, true, false).await;
    let dead = |name: &str| {
        let link = s.links().join(name);
        std::os::unix::fs::symlink(&gone, &link).unwrap();
    };
    // Dead, and kept: its container runs (a rotation is under way).
    dead(&format!("web_default_run-{running}.log"));
    // Dead and removed: exited, unknown to the runtime, no ID in the name.
    dead(&format!("web_default_ex-{exited}.log"));
    dead("web_default_old-0123456789ab.log");
    dead("web_default_cut-abc.log");
    // Dead but not a log link: not the sweep's.
    dead("README");
    // Alive: kept whatever its container.
    std::os::unix::fs::symlink(&live_log, s.links().join("web_default_x-0123456789cd.log"))
        .unwrap();
    let removed = remove_dead(&s.rt, &s.links()).await;
    let removed: Vec<String> = removed
        .iter()
        .map(|p| p.file_name().unwrap().to_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        removed,
        [
            "web_default_cut-abc.log".to_owned(),
            format!("web_default_ex-{exited}.log"),
            "web_default_old-0123456789ab.log".to_owned(),
        ]
    );
    // Dead, and the runtime cannot say: kept for the next sweep.
    dead(&format!("web_default_flaky-{flaky}.log"));
    s.rt.fail_next("ContainerStatus", tonic::Status::unavailable("down"));
    s.rt.exit_container(&flaky, 1);
    assert!(remove_dead(&s.rt, &s.links()).await.is_empty());
    let mut left = vec![
        "README".to_owned(),
        format!("web_default_flaky-{flaky}.log"),
        format!("web_default_run-{running}.log"),
        "web_default_x-0123456789cd.log".to_owned(),
    ];
    left.sort();
    assert_eq!(s.names(), left);
    // Once it answers, the exited container's link goes.
    let removed = remove_dead(&s.rt, &s.links()).await;
    assert_eq!(removed, [s.link("flaky", &flaky)]);
    // No directory: nothing to sweep.
    assert!(
        remove_dead(&s.rt, &s.dir.path().join("none"))
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn containers_started_before_get_their_links_at_start() {
    let s = Setup::new();
    // Started by a crilet that kept logs under its root dir.
    let old = s.dir.path().join("root/logs/default_web_u1/main/0.log");
    let main = s.container("main", &old, true, true).await;
    // Already linked (to wherever): left alone.
    let side_log = s.dirs().pod_logs_dir.join("default_web_u1/side/0.log");
    let side = s.container("side", &side_log, true, true).await;
    std::os::unix::fs::symlink("/elsewhere", s.link("side", &side)).unwrap();
    // Exited: linked too, as the kubelet keeps exited containers' links.
    let done_log = s.dir.path().join("root/logs/default_web_u1/done/0.log");
    let done = s.container("done", &done_log, true, true).await;
    s.rt.exit_container(&done, 0);
    // Not labelled, or no log file: nothing to link.
    s.container("bare", &old, false, false).await;
    s.container("quiet", &s.dir.path().join("none/0.log"), true, false)
        .await;
    let made = link_existing(&s.rt, &s.dirs()).await;
    let mut want = vec![s.link("main", &main), s.link("done", &done)];
    want.sort();
    let mut made = made;
    made.sort();
    assert_eq!(made, want);
    assert_eq!(std::fs::read_link(s.link("main", &main)).unwrap(), old);
    assert_eq!(
        std::fs::read_link(s.link("side", &side)).unwrap(),
        Path::new("/elsewhere")
    );
    // A second start has nothing left to do.
    assert!(link_existing(&s.rt, &s.dirs()).await.is_empty());
}
