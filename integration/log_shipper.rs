//! A real log shipper on crilet's container log symlinks: Debian's rsyslog
//! (installed by `scripts/test.sh`, `need_log_shipper`), its `imfile` input
//! tailing `<container logs dir>/*.log` as a node's Fluent Bit, Vector or
//! Promtail tails `/var/log/containers/*.log`. It must deliver a static
//! pod's lines with the pod, the namespace and the container in the file
//! name, which is all those shippers know of a line's origin.
//!
//! The rsyslogd is private: its own config, work directory, pid file and
//! output file in a temporary directory, in the foreground (`-n`), started
//! here and stopped by its PID; no system rsyslog is started or touched.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::agent::*;
use crate::support::eventually;

/// The rsyslogd binary: on PATH, or where Debian puts it.
fn rsyslogd() -> PathBuf {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain([PathBuf::from("/usr/sbin")])
        .map(|d| d.join("rsyslogd"))
        .find(|p| p.is_file());
    found.unwrap_or_else(|| {
        panic!(
            "rsyslogd not found: the log shipper test needs Debian's rsyslog \
             (scripts/test.sh installs it with apt-get, without starting it)"
        )
    })
}

/// A private rsyslogd in the foreground; stopped (SIGTERM, by PID) when
/// dropped, whatever the test's outcome.
struct Shipper {
    child: Option<Child>,
    dir: tempfile::TempDir,
}

impl Shipper {
    /// Tails `links/*.log`; writes `<file name> <line>` per line to its
    /// output file.
    fn start(links: &Path) -> Shipper {
        let dir = tempfile::Builder::new()
            .prefix("crilet-rsyslog-")
            .tempdir()
            .unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        let config = format!(
            "global(workDirectory=\"{work}\")\n\
             module(load=\"imfile\" mode=\"inotify\")\n\
             input(type=\"imfile\" file=\"{links}/*.log\" tag=\"containers\" addMetadata=\"on\")\n\
             template(name=\"withFile\" type=\"string\" string=\"%$!metadata!filename% %msg%\\n\")\n\
             action(type=\"omfile\" file=\"{out}\" template=\"withFile\")\n",
            work = work.display(),
            links = links.display(),
            out = dir.path().join("out.log").display(),
        );
        let conf = dir.path().join("rsyslog.conf");
        std::fs::write(&conf, config).unwrap();
        let check = Command::new(rsyslogd())
            .args(["-N1", "-f"])
            .arg(&conf)
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "rsyslogd refuses its config: {}",
            String::from_utf8_lossy(&check.stderr)
        );
        let child = Command::new(rsyslogd())
            .arg("-n")
            .arg("-f")
            .arg(&conf)
            .arg("-i")
            .arg(dir.path().join("rsyslogd.pid"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("rsyslogd.err")).unwrap())
            .spawn()
            .expect("start rsyslogd");
        Shipper {
            child: Some(child),
            dir,
        }
    }

    /// `(file name, line)` for every line shipped so far.
    fn shipped(&self) -> Vec<(String, String)> {
        let text = std::fs::read_to_string(self.dir.path().join("out.log")).unwrap_or_default();
        text.lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(f, m)| (f.to_owned(), m.to_owned()))
            .collect()
    }

    fn errors(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("rsyslogd.err")).unwrap_or_default()
    }

    /// SIGTERM by PID, then its exit status.
    fn stop(&mut self) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        for _ in 0..100 {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        child.wait().ok()
    }
}

impl Drop for Shipper {
    fn drop(&mut self) {
        self.stop();
    }
}

#[tokio::test]
#[ignore = "needs the agent tests' runtime and rsyslog (scripts/test.sh)"]
async fn rsyslog_ships_a_static_pods_lines_named_by_pod_namespace_and_container() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let agent = AgentProcess::start();
    // The shipper watches the directory first, as a node's does: the link
    // appears under it when the container starts.
    let links = agent.container_logs_dir();
    let ready = eventually(Duration::from_secs(30), || async {
        links.is_dir().then_some(())
    });
    assert!(ready.await.is_some(), "{}", agent.logs());
    let mut shipper = Shipper::start(&links);
    agent.write(
        "shipped.yaml",
        &busybox_pod(
            "shipped",
            "Always",
            "i=0; while true; do echo shipped line $i; i=$((i+1)); sleep 0.2; done",
        ),
    );
    let v = wait_for(
        &rt,
        &agent,
        "shipped",
        Duration::from_secs(60),
        "running",
        |v| v.running("main").is_some(),
    )
    .await;
    let id = v.running("main").unwrap().id.clone();
    let link = links.join(format!(
        "{}_default_main-{id}.log",
        agent.pod_name("shipped")
    ));

    // Ten lines of the pod, in order, each named by the link it came by.
    let lines = eventually(Duration::from_secs(30), || async {
        let ours: Vec<(String, String)> = shipper
            .shipped()
            .into_iter()
            .filter(|(_, m)| m.contains(" shipped line "))
            .collect();
        (ours.len() >= 10).then_some(ours)
    })
    .await;
    let Some(lines) = lines else {
        panic!(
            "rsyslog shipped {:?}\nits errors: {}\nlinks: {:?}\n{}",
            shipper.shipped(),
            shipper.errors(),
            std::fs::read_dir(&links).map(|d| d.count()),
            agent.logs()
        );
    };
    for (n, (file, message)) in lines.iter().enumerate() {
        assert_eq!(Path::new(file), link, "{message}");
        // The CRI line as the runtime wrote it: time, stream, tag, text.
        let fields: Vec<&str> = message.splitn(4, ' ').collect();
        assert_eq!(
            fields[1..],
            ["stdout", "F", &format!("shipped line {n}")],
            "{message}"
        );
    }
    let name = link.file_name().unwrap().to_str().unwrap();
    let (pod, rest) = name.split_once('_').unwrap();
    let (namespace, container) = rest.split_once('_').unwrap();
    assert_eq!(pod, agent.pod_name("shipped"));
    assert_eq!(namespace, "default");
    assert!(container.starts_with("main-"), "{name}");

    let status = shipper.stop().expect("rsyslogd ran");
    assert!(
        status.success(),
        "rsyslogd: {status:?}: {}",
        shipper.errors()
    );
    clean_runtime(&rt).await;
}
