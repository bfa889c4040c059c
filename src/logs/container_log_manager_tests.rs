//! Tests of the rotation driver and the clean-up: real files in a temporary
//! directory, the runtime faked.

use std::io::Read;

use super::*;
use crate::cri::{ContainerConfig, ContainerMetadata, FakeRuntime, PodSandboxConfig};
use crate::pod::{POD_NAME_LABEL, POD_NAMESPACE_LABEL, POD_UID_LABEL};

const T0: &str = "2026-01-01T12:00:00Z";

fn at_t0() -> jiff::Timestamp {
    T0.parse().unwrap()
}

fn at_t0_plus_1s() -> jiff::Timestamp {
    at_t0() + jiff::SignedDuration::from_secs(1)
}

struct Setup {
    rt: Arc<FakeRuntime>,
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Self {
        Setup {
            rt: Arc::new(FakeRuntime::new()),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// A running container whose log path is `log_path` (as given to
    /// CreateContainer), labelled as pod default/web, UID u1.
    async fn container(&self, name: &str, log_path: &str) -> String {
        let rt = &self.rt;
        if rt.list_images().await.unwrap().is_empty() {
            rt.add_image("busybox", 1);
        }
        let mut sb = PodSandboxConfig::default();
        sb.metadata.name = name.into();
        let sid = rt.run_pod_sandbox(&sb).await.unwrap();
        let labels = [
            (POD_NAME_LABEL, "web"),
            (POD_NAMESPACE_LABEL, "default"),
            (POD_UID_LABEL, "u1"),
            (crate::pod::CONTAINER_NAME_LABEL, name),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let cfg = ContainerConfig {
            metadata: ContainerMetadata {
                name: name.into(),
                attempt: 0,
            },
            image: "busybox".into(),
            labels,
            log_path: log_path.into(),
            ..Default::default()
        };
        let id = rt.create_container(&sid, &cfg, &sb).await.unwrap();
        rt.start_container(&id).await.unwrap();
        id
    }

    fn driver(&self, max_size: u64, max_files: u32, now: fn() -> jiff::Timestamp) -> LogRotation {
        LogRotation {
            runtime: self.rt.clone(),
            policy: RotatePolicy {
                max_size,
                max_files,
            },
            monitor_interval: Duration::from_secs(10),
            max_workers: 2,
            pod_logs_dir: self.dir.path().to_path_buf(),
            now,
            log_files: Default::default(),
        }
    }

    /// The pod logs directory is the temporary directory; the links go to
    /// its `containers`.
    fn dirs(&self) -> LogDirs {
        LogDirs {
            pod_logs_dir: self.dir.path().to_path_buf(),
            container_logs_dir: self.path("containers"),
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn files(&self, rel_dir: &str) -> Vec<String> {
        let mut v = list_dir(&self.path(rel_dir)).unwrap();
        v.sort();
        v
    }

    fn reopens(&self) -> usize {
        let ops = self.rt.ops();
        ops.iter().filter(|o| **o == "ReopenContainerLog").count()
    }
}

fn gunzip(path: &Path) -> String {
    let mut out = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut out)
        .unwrap();
    out
}

#[tokio::test]
async fn a_big_log_is_rotated_then_compressed_at_the_next_rotation() {
    let s = Setup::new();
    let id = s
        .container("c", &s.path("c/0.log").display().to_string())
        .await;
    s.write("c/0.log", &"a".repeat(150));
    let d = s.driver(100, 3, at_t0);
    match d.check(&id).await.unwrap() {
        Outcome::Rotated { rotated, size, .. } => {
            assert_eq!(rotated, s.path("c/0.log.20260101-120000"));
            assert_eq!(size, 150);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(s.reopens(), 1);
    // The fake runtime makes no new file: the next check only reopens.
    assert_eq!(s.files("c"), ["0.log.20260101-120000"]);
    assert_eq!(d.check(&id).await.unwrap(), Outcome::Reopened);
    assert_eq!(s.reopens(), 2);
    // The runtime writes a new log; a second later it is rotated in turn and
    // the first rotated file is gzipped.
    s.write("c/0.log", &"b".repeat(120));
    let d = s.driver(100, 3, at_t0_plus_1s);
    assert!(matches!(
        d.check(&id).await.unwrap(),
        Outcome::Rotated { .. }
    ));
    assert_eq!(
        s.files("c"),
        ["0.log.20260101-120000.gz", "0.log.20260101-120001"]
    );
    assert_eq!(
        gunzip(&s.path("c/0.log.20260101-120000.gz")),
        "a".repeat(150)
    );
    assert_eq!(
        std::fs::read_to_string(s.path("c/0.log.20260101-120001")).unwrap(),
        "b".repeat(120)
    );
}

#[tokio::test]
async fn small_logs_are_kept_and_nothing_else_is_done() {
    let s = Setup::new();
    let id = s
        .container("c", &s.path("c/0.log").display().to_string())
        .await;
    s.write("c/0.log", "short\n");
    s.write("c/0.log.20250101-000000.tmp", "left over");
    let d = s.driver(100, 3, at_t0);
    assert_eq!(d.check(&id).await.unwrap(), Outcome::Kept);
    assert_eq!(s.reopens(), 0);
    // Leftovers wait for a rotation, as the kubelet's.
    assert_eq!(s.files("c"), ["0.log", "0.log.20250101-000000.tmp"]);
}

#[tokio::test]
async fn leftovers_and_the_oldest_go_when_rotating() {
    let s = Setup::new();
    let id = s
        .container("c", &s.path("c/0.log").display().to_string())
        .await;
    s.write("c/0.log", &"x".repeat(100));
    s.write("c/0.log.20250101-000000.gz", "old");
    s.write("c/0.log.20250102-000000", "crashed while compressing");
    s.write("c/0.log.20250102-000000.gz", "complete");
    s.write("c/0.log.20250103-000000.tmp", "half");
    s.write("c/0.log.20250103-000000", "newest");
    s.write("c/1.log", "another attempt's log");
    let d = s.driver(100, 3, at_t0);
    assert!(matches!(
        d.check(&id).await.unwrap(),
        Outcome::Rotated { .. }
    ));
    assert_eq!(
        s.files("c"),
        ["0.log.20250103-000000.gz", "0.log.20260101-120000", "1.log"]
    );
    assert_eq!(gunzip(&s.path("c/0.log.20250103-000000.gz")), "newest");
}

#[tokio::test]
async fn a_failed_reopen_renames_the_log_back_and_the_next_check_retries() {
    let s = Setup::new();
    let id = s
        .container("c", &s.path("c/0.log").display().to_string())
        .await;
    s.write("c/0.log", &"x".repeat(200));
    s.rt.fail_next("ReopenContainerLog", tonic::Status::internal("boom"));
    let d = s.driver(100, 3, at_t0);
    let err = d.check(&id).await.unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(
            &err,
            LogRotationError::Reopen {
                rename_back: None,
                ..
            }
        ),
        "{text}"
    );
    assert!(
        text.contains(&id) && text.contains("0.log") && text.contains("renamed it back"),
        "{text}"
    );
    assert_eq!(s.files("c"), ["0.log"]);
    assert_eq!(
        std::fs::read_to_string(s.path("c/0.log")).unwrap(),
        "x".repeat(200)
    );
    assert!(matches!(
        d.check(&id).await.unwrap(),
        Outcome::Rotated { .. }
    ));
}

#[tokio::test]
async fn a_missing_log_is_reopened_and_a_failed_reopen_is_an_error() {
    let s = Setup::new();
    let id = s
        .container("c", &s.path("c/0.log").display().to_string())
        .await;
    let d = s.driver(100, 3, at_t0);
    // Even its directory is missing: the runtime is asked all the same.
    assert_eq!(d.check(&id).await.unwrap(), Outcome::Reopened);
    std::fs::create_dir_all(s.path("c")).unwrap();
    assert_eq!(d.check(&id).await.unwrap(), Outcome::Reopened);
    assert_eq!(s.reopens(), 2);
    s.rt.fail_next("ReopenContainerLog", tonic::Status::internal("boom"));
    let err = d.check(&id).await.unwrap_err().to_string();
    assert!(err.contains("is missing") && err.contains(&id), "{err}");
}

#[tokio::test]
async fn two_rotations_in_one_second_wait_for_the_next_check() {
    let s = Setup::new();
    let id = s
        .container("c", &s.path("c/0.log").display().to_string())
        .await;
    s.write("c/0.log", &"a".repeat(100));
    let d = s.driver(100, 3, at_t0);
    assert!(matches!(
        d.check(&id).await.unwrap(),
        Outcome::Rotated { .. }
    ));
    s.write("c/0.log", &"b".repeat(100));
    assert!(matches!(
        d.check(&id).await.unwrap(),
        Outcome::Waited { .. }
    ));
    assert_eq!(s.files("c"), ["0.log", "0.log.20260101-120000"]);
    assert_eq!(s.reopens(), 1);
}

#[tokio::test]
async fn a_relative_log_path_is_under_the_pods_log_directory() {
    let s = Setup::new();
    let id = s.container("c", "c/0.log").await;
    let dir = "default_web_u1/c";
    s.write(&format!("{dir}/0.log"), &"x".repeat(100));
    let d = s.driver(100, 3, at_t0);
    assert!(matches!(
        d.check(&id).await.unwrap(),
        Outcome::Rotated { .. }
    ));
    assert_eq!(s.files(dir), ["0.log.20260101-120000"]);
    // No log path: nothing to do.
    let none = s.container("n", "").await;
    assert_eq!(d.check(&none).await.unwrap(), Outcome::NoLog);
}

#[tokio::test]
async fn check_all_takes_running_containers_only() {
    let s = Setup::new();
    let a = s
        .container("a", &s.path("a/0.log").display().to_string())
        .await;
    let b = s
        .container("b", &s.path("b/0.log").display().to_string())
        .await;
    let c = s
        .container("c", &s.path("c/0.log").display().to_string())
        .await;
    for x in ["a", "b", "c"] {
        s.write(&format!("{x}/0.log"), &"x".repeat(100));
    }
    s.rt.exit_container(&c, 0);
    let d = s.driver(100, 3, at_t0);
    let mut out = d.check_all().await;
    out.sort_by(|x, y| x.0.cmp(&y.0));
    let ids: Vec<&str> = out.iter().map(|(id, _)| id.as_str()).collect();
    let mut want = vec![a.as_str(), b.as_str()];
    want.sort();
    assert_eq!(ids, want);
    assert!(
        out.iter()
            .all(|(_, r)| matches!(r, Ok(Outcome::Rotated { .. })))
    );
    assert_eq!(s.files("c"), ["0.log"], "an exited container's log stays");
    // A status failure is reported, naming the container (a new driver:
    // this one knows the logs already).
    let d = s.driver(100, 3, at_t0);
    s.rt.fail_next("ContainerStatus", tonic::Status::internal("boom"));
    let out = d.check_all().await;
    let errors: Vec<String> = (out.iter())
        .filter_map(|(_, r)| r.as_ref().err().map(|e| e.to_string()))
        .collect();
    assert_eq!(errors.len(), 1, "{out:?}");
    assert!(errors[0].contains("ContainerStatus"), "{errors:?}");
}

#[tokio::test]
async fn container_status_is_asked_once_per_container_while_it_runs() {
    let s = Setup::new();
    let a = s
        .container("a", &s.path("a/0.log").display().to_string())
        .await;
    let _b = s
        .container("b", &s.path("b/0.log").display().to_string())
        .await;
    let statuses = || {
        s.rt.ops()
            .iter()
            .filter(|o| **o == "ContainerStatus")
            .count()
    };
    let d = s.driver(100, 3, at_t0);
    let before = statuses();
    for _ in 0..3 {
        assert_eq!(d.check_all().await.len(), 2);
    }
    assert_eq!(statuses() - before, 2, "one ContainerStatus per container");
    // A log written after the first checks is still found and rotated.
    s.write("a/0.log", &"x".repeat(100));
    let out = d.check_all().await;
    let rotated: Vec<&str> = (out.iter())
        .filter(|(_, r)| matches!(r, Ok(Outcome::Rotated { .. })))
        .map(|(id, _)| id.as_str())
        .collect();
    assert_eq!(rotated, [a.as_str()]);
    // A container that stopped running is forgotten.
    s.rt.exit_container(&a, 0);
    d.check_all().await;
    assert_eq!(d.log_files.lock().len(), 1);
    assert_eq!(d.log_files.get(&a), None);
}

#[tokio::test]
async fn a_log_that_cannot_be_stated_is_an_error_naming_it() {
    let s = Setup::new();
    let id = s
        .container("c", &s.path("c/0.log").display().to_string())
        .await;
    // The log's directory is a file: the log cannot be stat'ed.
    s.write("c", "not a directory");
    let d = s.driver(100, 3, at_t0);
    let err = d.check(&id).await.unwrap_err().to_string();
    assert!(
        err.contains(&id) && err.contains(&s.path("c").display().to_string()),
        "{err}"
    );
}

#[tokio::test]
async fn clean_removes_the_log_and_every_rotated_file_only() {
    let s = Setup::new();
    let id = s
        .container("c", &s.path("c/0.log").display().to_string())
        .await;
    for f in [
        "0.log",
        "0.log.20250101-000000.gz",
        "0.log.20250102-000000",
        "0.log.x.tmp",
        "1.log",
    ] {
        s.write(&format!("c/{f}"), "x");
    }
    // The container's link, and another container's.
    std::fs::create_dir_all(s.path("containers")).unwrap();
    let link = s.path(&format!("containers/web_default_c-{id}.log"));
    let other = s.path("containers/web_default_c-0123456789.log");
    std::os::unix::fs::symlink(s.path("c/0.log"), &link).unwrap();
    std::os::unix::fs::symlink(s.path("c/1.log"), &other).unwrap();
    let removed = clean_container_logs(s.rt.as_ref(), &s.dirs(), &id)
        .await
        .unwrap();
    assert_eq!(removed.len(), 5, "{removed:?}");
    assert_eq!(removed.last(), Some(&link));
    assert_eq!(s.files("c"), ["1.log"]);
    assert_eq!(s.files("containers"), ["web_default_c-0123456789.log"]);
    // Again: nothing left, no error; an unknown container has nothing.
    assert!(
        clean_container_logs(s.rt.as_ref(), &s.dirs(), &id)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        clean_container_logs(s.rt.as_ref(), &s.dirs(), "nope")
            .await
            .unwrap()
            .is_empty()
    );
    // A directory already gone is fine too.
    std::fs::remove_dir_all(s.path("c")).unwrap();
    assert!(
        clean_container_logs(s.rt.as_ref(), &s.dirs(), &id)
            .await
            .unwrap()
            .is_empty()
    );
    // A runtime failure is an error naming the container.
    s.rt.fail_next("ContainerStatus", tonic::Status::unavailable("down"));
    let err = clean_container_logs(s.rt.as_ref(), &s.dirs(), &id)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains(&id), "{err}");
    // A link that cannot be removed (a non-empty directory holds its
    // name) is an error naming the container and the link.
    std::fs::create_dir_all(link.join("x")).unwrap();
    let err = clean_container_logs(s.rt.as_ref(), &s.dirs(), &id)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&id) && err.contains(&link.display().to_string()),
        "{err}"
    );
}

#[test]
fn compress_keeps_the_content_and_the_mode_and_cleans_up_on_failure() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("0.log.1");
    let text: String = (0..10_000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(&p, &text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
    compress(&p).unwrap();
    let gz = dir.path().join("0.log.1.gz");
    assert_eq!(gunzip(&gz), text);
    assert!(!p.exists() && !dir.path().join("0.log.1.tmp").exists());
    let mode = std::fs::metadata(&gz).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
    // Missing input: an error, and no .tmp is left.
    assert!(compress(&p).is_err());
    // The .gz cannot be made (a directory holds its name): the .tmp goes.
    std::fs::write(&p, "again").unwrap();
    std::fs::remove_file(&gz).unwrap();
    std::fs::create_dir_all(gz.join("sub")).unwrap();
    assert!(compress(&p).is_err());
    assert!(p.exists() && !dir.path().join("0.log.1.tmp").exists());
}
