//! Where the real `crilet run` puts container logs on the agent tests'
//! runtime, as the kubelet v1.32 does (measured side by side on containerd
//! 1.6): `<pod logs dir>/<ns>_<pod>_<uid>/<container>/<n>.log` (the pod
//! logs directory 0750, the pod's and the container's directories 0755)
//! and, for log shippers, `<container logs dir>/<pod>_<ns>_<container>-<id>.log`
//! (0755), a symlink to the log made when the container starts and removed
//! with the container; a name over 255 bytes is cut as the kubelet cuts it.
//! Every agent here has private directories (`support::private_log_dirs`).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crilet::cri::{ContainerState, Runtime};

use crate::agent::*;
use crate::support::{RuntimeKind, cli, eventually, runtime_kind};

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// A pod without labels (a label value is at most 63 characters, a pod
/// name 253) whose container `main` runs `script`.
fn pod(name: &str, script: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  hostNetwork: true\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: docker.io/library/busybox:latest\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", {script:?}]\n"
    )
}

/// The link of container `id` of `pod`'s container `main`, as named.
fn link(agent: &AgentProcess, pod: &str, id: &str) -> PathBuf {
    agent
        .container_logs_dir()
        .join(format!("{}_default_main-{id}.log", agent.pod_name(pod)))
}

/// The names in a directory, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().into_string().unwrap())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Waits until `path` is a symlink; its target.
async fn linked(path: &Path, agent: &AgentProcess) -> PathBuf {
    let found = eventually(Duration::from_secs(20), || async {
        std::fs::read_link(path).ok()
    })
    .await;
    found.unwrap_or_else(|| {
        panic!(
            "no symlink {}; the directory holds {:?}\n{}",
            path.display(),
            names(path.parent().unwrap()),
            agent.logs()
        )
    })
}

#[tokio::test]
#[ignore = "needs the agent tests' runtime (scripts/test.sh)"]
async fn containers_are_linked_for_log_shippers_and_unlinked_with_them() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let agent = AgentProcess::start();
    // Exits after two seconds: restarted (back-off 10 s) as attempt 1.
    agent.write("web.yaml", &pod("web", "echo hello; sleep 2; exit 1"));
    // 191 characters (a DNS subdomain of three 63-character labels).
    let long = ["l".repeat(63), "o".repeat(63), "n".repeat(63)].join(".");
    agent.write("long.yaml", &pod(&long, "echo long; exec sleep 100000"));

    let v = wait_for(
        &rt,
        &agent,
        "web",
        Duration::from_secs(60),
        "attempt 0",
        |v| v.named("main").iter().any(|c| c.metadata.attempt == 0),
    )
    .await;
    let uid = v.uid().unwrap();
    let first = v.named("main")[0].id.clone();
    let pod_dir = agent
        .pod_logs_dir()
        .join(format!("default_{}_{uid}", agent.pod_name("web")));
    // The link's target is the log the runtime writes, by its full path.
    assert_eq!(
        linked(&link(&agent, "web", &first), &agent).await,
        pod_dir.join("main/0.log")
    );
    let read = eventually(Duration::from_secs(10), || async {
        let text = std::fs::read_to_string(link(&agent, "web", &first)).unwrap();
        text.contains(" stdout F hello").then_some(())
    });
    assert!(read.await.is_some(), "nothing read through the link");
    // The kubelet's modes.
    assert_eq!(mode(&agent.pod_logs_dir()), 0o750);
    for dir in [
        pod_dir.clone(),
        pod_dir.join("main"),
        agent.container_logs_dir(),
    ] {
        assert_eq!(mode(&dir), 0o755, "{}", dir.display());
    }

    // Restarted: the new instance has a link of its own, to its own log;
    // the exited one keeps its link while the runtime keeps it.
    let v = wait_for(
        &rt,
        &agent,
        "web",
        Duration::from_secs(60),
        "attempt 1",
        |v| v.named("main").iter().any(|c| c.metadata.attempt == 1),
    )
    .await;
    let second = (v.named("main").into_iter())
        .find(|c| c.metadata.attempt == 1)
        .unwrap()
        .id
        .clone();
    assert_eq!(
        linked(&link(&agent, "web", &second), &agent).await,
        pod_dir.join("main/1.log")
    );
    if v.named("main").iter().any(|c| c.id == first) {
        assert!(link(&agent, "web", &first).exists());
    }

    // A name over 255 bytes is cut to 251 before `.log`, the ID first.
    let v = wait_for(
        &rt,
        &agent,
        &long,
        Duration::from_secs(60),
        "running",
        |v| v.running("main").is_some(),
    )
    .await;
    let id = v.running("main").unwrap().id.clone();
    let full = format!("{}_default_main-{id}", agent.pod_name(&long));
    let cut = agent
        .container_logs_dir()
        .join(format!("{}.log", &full[..251]));
    let target = linked(&cut, &agent).await;
    assert!(target.ends_with("main/0.log"), "{}", target.display());
    assert_eq!(cut.file_name().unwrap().len(), 255);
    let read = eventually(Duration::from_secs(10), || async {
        let text = std::fs::read_to_string(&cut).unwrap();
        text.contains(" stdout F long").then_some(())
    });
    assert!(read.await.is_some(), "nothing read through the cut link");

    // Removed: its containers go, with their links and logs.
    agent.remove("web.yaml");
    agent.remove("long.yaml");
    for name in ["web", long.as_str()] {
        wait_for(&rt, &agent, name, Duration::from_secs(60), "removal", |v| {
            v.sandboxes.is_empty() && v.containers.is_empty()
        })
        .await;
    }
    let gone = eventually(Duration::from_secs(10), || async {
        (names(&agent.container_logs_dir()).is_empty() && !pod_dir.exists()).then_some(())
    })
    .await;
    assert!(
        gone.is_some(),
        "left: {:?} and {:?}\n{}",
        names(&agent.container_logs_dir()),
        names(&agent.pod_logs_dir()),
        agent.logs()
    );
    clean_runtime(&rt).await;
}

/// A crilet from before `--pod-logs-dir` kept logs under `<root>/logs`
/// and made no symlinks. After the upgrade its running pods keep writing
/// there (the runtime's ContainerStatus `log_path` says so): the new
/// crilet links them, reads them, and removes that directory once the pod
/// is gone.
#[tokio::test]
#[ignore = "needs the agent tests' runtime (scripts/test.sh)"]
async fn an_upgraded_crilet_links_reads_and_removes_logs_in_the_old_place() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let mut agent = AgentProcess::prepare_on(NODE, &[]);
    let old = agent.root.path().join("logs");
    let no_links = agent.root.path().join("no-links");
    agent.set_extra_args(&[
        "--pod-logs-dir".into(),
        old.display().to_string(),
        "--container-logs-dir".into(),
        no_links.display().to_string(),
    ]);
    agent.spawn();
    agent.write(
        "old.yaml",
        &pod(
            "old",
            "i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.5; done",
        ),
    );
    let v = wait_for(
        &rt,
        &agent,
        "old",
        Duration::from_secs(60),
        "running",
        |v| v.running("main").is_some(),
    )
    .await;
    let (uid, id) = (v.uid().unwrap(), v.running("main").unwrap().id.clone());
    let log = old
        .join(format!("default_{}_{uid}", agent.pod_name("old")))
        .join("main/0.log");
    assert!(
        eventually(Duration::from_secs(10), || async {
            log.exists().then_some(())
        })
        .await
        .is_some(),
        "{}",
        agent.logs()
    );
    // The old crilet stops (its pods keep running); the new one starts.
    agent.terminate();
    std::fs::remove_dir_all(&no_links).unwrap();
    agent.set_extra_args(&[]);
    agent.spawn();

    assert_eq!(linked(&link(&agent, "old", &id), &agent).await, log);
    let socket = agent.socket();
    let read = eventually(Duration::from_secs(20), || async {
        let pod = agent.pod_name("old");
        let (ok, out, _) = cli(&[
            "logs",
            &pod,
            "--tail",
            "2",
            "--socket",
            socket.to_str().unwrap(),
        ]);
        (ok && out.lines().count() == 2 && out.starts_with("tick ")).then_some(out)
    })
    .await;
    assert!(read.is_some(), "crilet logs read nothing\n{}", agent.logs());
    assert_eq!(
        v.running("main").map(|c| c.id.clone()),
        agent
            .view(&rt, "old")
            .await
            .running("main")
            .map(|c| c.id.clone()),
        "the container was adopted, not restarted"
    );

    // Restarted in its old sandbox, it writes where the runtime puts it
    // (containerd 1.6 and CRI-O 1.32: the directory crilet names now, in
    // the sandbox config CreateContainer carries), and its link leads there.
    rt.stop_container(&id, Duration::ZERO).await.unwrap();
    let v = wait_for(
        &rt,
        &agent,
        "old",
        Duration::from_secs(60),
        "attempt 1",
        |v| {
            (v.named("main").iter())
                .any(|c| c.metadata.attempt == 1 && c.state == ContainerState::Running)
        },
    )
    .await;
    let again = (v.named("main").into_iter())
        .find(|c| c.metadata.attempt == 1)
        .unwrap()
        .id
        .clone();
    let written = PathBuf::from(rt.container_status(&again).await.unwrap().log_path);
    assert_eq!(linked(&link(&agent, "old", &again), &agent).await, written);
    assert!(written.exists(), "{}", written.display());
    let new = agent.pod_logs_dir();
    match runtime_kind() {
        RuntimeKind::Crio | RuntimeKind::Containerd1 => {
            assert!(written.starts_with(&new), "{}", written.display())
        }
        RuntimeKind::Containerd2 => {
            assert!(written.starts_with(&old) || written.starts_with(&new))
        }
    }

    agent.remove("old.yaml");
    wait_for(
        &rt,
        &agent,
        "old",
        Duration::from_secs(60),
        "removal",
        |v| v.sandboxes.is_empty() && v.containers.is_empty(),
    )
    .await;
    let gone = eventually(Duration::from_secs(10), || async {
        let empty = names(&agent.container_logs_dir()).is_empty()
            && names(&agent.pod_logs_dir()).is_empty();
        (!old.exists() && empty).then_some(())
    })
    .await;
    assert!(
        gone.is_some(),
        "left: {:?}, {:?} and {:?}\n{}",
        names(&old),
        names(&agent.pod_logs_dir()),
        names(&agent.container_logs_dir()),
        agent.logs()
    );
    clean_runtime(&rt).await;
}

/// Checked as the kubelet checks `podLogsDir`, before anything runs.
#[test]
fn bad_log_directories_stop_crilet_run_naming_the_flag_or_the_field() {
    let endpoint = "unix:///nonexistent/crilet-test.sock";
    for (flag, value, want) in [
        ("--pod-logs-dir", "var/log/pods", "must be an absolute path"),
        (
            "--pod-logs-dir",
            "/var/log/pods/",
            "must be normalized (as \"/var/log/pods\")",
        ),
        (
            "--container-logs-dir",
            "/var/log/../containers",
            "must be normalized",
        ),
        (
            "--container-logs-dir",
            "/var/log/cöntainers",
            "must contain ASCII characters only",
        ),
    ] {
        let (ok, _, err) = cli(&["run", "--container-runtime-endpoint", endpoint, flag, value]);
        assert!(!ok, "{flag} {value}");
        assert!(err.contains(&format!("{flag} {value:?}: {want}")), "{err}");
    }
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("kubelet.yaml");
    std::fs::write(
        &config,
        "kind: KubeletConfiguration\npodLogsDir: /var/log//pods\n",
    )
    .unwrap();
    let (ok, _, err) = cli(&[
        "run",
        "--container-runtime-endpoint",
        endpoint,
        "--config",
        config.to_str().unwrap(),
    ]);
    assert!(!ok);
    let want = format!(
        "config file {}: podLogsDir: \"/var/log//pods\": must be normalized",
        config.display()
    );
    assert!(err.contains(&want), "{err}");
}
