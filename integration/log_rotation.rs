//! Container log rotation by the real `crilet run` on the agent tests'
//! containerd: a static pod writes about 30 MiB of numbered lines while
//! crilet rotates its log at 1 MiB keeping 3 files, and the log files go
//! with the pod.
//!
//! What must hold, and why. The kubelet's rotation loses lines only by
//! removing whole oldest rotated files: a rotation renames the log and the
//! runtime reopens a new one, so every line lands in exactly one file, and
//! the files in name order (the rotated ones, then the current one) hold
//! the lines in order. So at the end the files hold the lines k..=N for
//! some k, each once, with nothing missing in between; lines 1..k were in
//! removed files. At every moment the directory holds at most 3 files
//! (during a rotation too: the oldest goes before a `.tmp` or `.gz` is
//! made), and of the rotated files still in use only the newest is
//! uncompressed. A `.tmp`, or an uncompressed file whose `.gz` exists, is
//! one being compressed right then.
//!
//! The kubelet refuses a monitor interval under 3s, and so does crilet: the
//! pod writes at about 2 MiB/s so that several rotations happen.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::agent::*;
use crate::kubelet_server_client::{Ca, Client, files, wait_healthy};
use crate::support::eventually;
use crate::support::free_port;

/// Numbered lines the pod writes (about 1 KiB each), then `DONE`.
const LINES: u64 = 30_000;
const MAX_SIZE: u64 = 1024 * 1024;
const MAX_FILES: usize = 3;

fn rotation_flags(interval: &str) -> Vec<String> {
    [
        "--container-log-max-size",
        "1Mi",
        "--container-log-max-files",
        "3",
        "--container-log-monitor-interval",
        interval,
    ]
    .map(String::from)
    .to_vec()
}

/// `L<n> <1 KiB of x>` for n in 1..=lines, 200 lines per 0.1 s, then
/// `DONE`, then it stays running (only running containers are rotated).
fn chatty_script(lines: u64) -> String {
    format!(
        "p=x; for k in 1 2 3 4 5 6 7 8 9 10; do p=$p$p; done; i=1; \
         while [ $i -le {lines} ]; do echo \"L$i $p\"; \
         if [ $((i % 200)) -eq 0 ]; then sleep 0.1; fi; i=$((i+1)); done; \
         echo DONE; exec sleep 100000"
    )
}

/// `crilet logs -f` on a pod, its stdout read line by line on a thread.
struct Follower {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Follower {
    fn start(agent: &AgentProcess, pod: &str) -> Follower {
        use std::io::BufRead;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_crilet"))
            .args(["logs", "-f", pod, "--socket"])
            .arg(agent.socket())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("start crilet logs -f");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Follower { child, lines }
    }

    /// The lines up to and with `DONE` (or all it gave within `limit`).
    fn until_done(mut self, limit: Duration) -> Vec<String> {
        let deadline = Instant::now() + limit;
        let mut got = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let done = line == "DONE";
                    got.push(line);
                    if done {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        got
    }
}

/// Follows `path` on the kubelet server until a `DONE` line; its lines.
async fn follow_https(client: Client, path: String) -> Vec<String> {
    use http_body_util::BodyExt;
    let tls = client.connect().await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .unwrap();
    tokio::spawn(conn);
    let req = hyper::Request::get(path)
        .header("host", "x")
        .body(http_body_util::Empty::<hyper::body::Bytes>::new())
        .unwrap();
    let answer = sender.send_request(req).await.unwrap();
    let status = answer.status();
    let mut body = answer.into_body();
    let mut text = Vec::new();
    while let Some(Ok(frame)) = body.frame().await {
        if let Some(data) = frame.data_ref() {
            text.extend_from_slice(data);
            if text.ends_with(b"DONE\n") {
                break;
            }
        }
    }
    let text = String::from_utf8_lossy(&text);
    assert_eq!(status, 200, "{text}");
    text.lines().map(String::from).collect()
}

/// The container log directory of `pod`'s container `main`.
async fn main_log_dir(rt: &crilet::cri::CriRuntime, agent: &AgentProcess, pod: &str) -> PathBuf {
    let v = wait_for(
        rt,
        agent,
        pod,
        Duration::from_secs(60),
        "a running container",
        |v| v.running("main").is_some(),
    )
    .await;
    let uid = v.uid().unwrap();
    agent
        .pod_logs_dir()
        .join(format!("default_{}_{uid}", agent.pod_name(pod)))
        .join("main")
}

/// One look at a container log directory.
#[derive(Debug)]
struct Snapshot {
    /// Every name in the directory, sorted.
    names: Vec<String>,
}

impl Snapshot {
    fn take(dir: &Path) -> Snapshot {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().into_string().unwrap())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        Snapshot { names }
    }

    /// The rotated files holding lines, oldest first: not a `.tmp`, not
    /// one whose `.gz` exists (both are a compression in progress).
    fn rotated_in_use(&self) -> Vec<&str> {
        let rotated: Vec<&str> = (self.names.iter())
            .map(String::as_str)
            .filter(|n| n.starts_with("0.log."))
            .collect();
        (rotated.iter().copied())
            .filter(|n| !n.ends_with(".tmp"))
            .filter(|n| n.ends_with(".gz") || !rotated.contains(&format!("{n}.gz").as_str()))
            .collect()
    }

    /// What must hold at every moment; `Err` says what does not.
    fn check(&self) -> Result<(), String> {
        if self.names.len() > MAX_FILES {
            return Err(format!("more than {MAX_FILES} files: {:?}", self.names));
        }
        if let Some(other) = self.names.iter().find(|n| !n.starts_with("0.log")) {
            return Err(format!("unexpected file {other}: {:?}", self.names));
        }
        let inuse = self.rotated_in_use();
        if let Some((_, older)) = inuse.split_last() {
            if let Some(plain) = older.iter().find(|n| !n.ends_with(".gz")) {
                return Err(format!(
                    "{plain} is not compressed but is not the newest rotated file: {:?}",
                    self.names
                ));
            }
        }
        Ok(())
    }
}

/// The text of a log file, gunzipped if `.gz`; `None` if it vanished.
fn read_log(path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    if path.extension().is_some_and(|e| e == "gz") {
        let mut out = String::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_string(&mut out)
            .ok()?;
        Some(out)
    } else {
        Some(String::from_utf8(bytes).unwrap())
    }
}

/// The lines of a CRI log (`<time> <stream> <F|P> <text>`), partial
/// lines joined.
fn cri_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut partial = String::new();
    for raw in text.lines() {
        let mut f = raw.splitn(4, ' ');
        let (_time, _stream, tag, content) = (f.next(), f.next(), f.next(), f.next());
        partial.push_str(content.unwrap_or_default());
        if tag != Some("P") {
            out.push(std::mem::take(&mut partial));
        }
    }
    out
}

/// The line numbers of `L<n>` lines, in order, and whether `DONE` came.
fn numbers(lines: &[String]) -> (Vec<u64>, bool) {
    let mut nums = Vec::new();
    let mut done = false;
    for l in lines {
        if l == "DONE" {
            done = true;
        } else if let Some(n) = l.strip_prefix('L').and_then(|r| r.split(' ').next()) {
            nums.push(n.parse().unwrap_or_else(|_| panic!("bad line {l:.40}")));
        }
    }
    (nums, done)
}

/// The rotated files then the current log, read in order; `None` when a
/// file changed under the reading (a rotation ran): look again.
fn read_all(dir: &Path) -> Option<(Snapshot, Vec<String>)> {
    let snap = Snapshot::take(dir);
    let mut files: Vec<String> = snap
        .rotated_in_use()
        .iter()
        .map(|n| n.to_string())
        .collect();
    files.push("0.log".into());
    let mut lines = Vec::new();
    for f in &files {
        lines.extend(cri_lines(&read_log(&dir.join(f))?));
    }
    (Snapshot::take(dir).names == snap.names).then_some((snap, lines))
}

/// Runs until the pod has written everything and the last rotation is
/// over, checking the directory all along; returns the final files' lines.
async fn watch_until_done(
    agent: &AgentProcess,
    dir: &Path,
    limit: Duration,
) -> (Snapshot, Vec<String>) {
    let start = Instant::now();
    let mut looks = 0;
    loop {
        let snap = Snapshot::take(dir);
        looks += 1;
        if let Err(e) = snap.check() {
            panic!(
                "after {:?}: {e}\ncrilet log:\n{}",
                start.elapsed(),
                agent.logs()
            );
        }
        // Settled: DONE written and the log under the max size (a rotation
        // ends with the reopen that makes the new log, so none is running).
        let size = std::fs::metadata(dir.join("0.log")).map(|m| m.len()).ok();
        if size.is_some_and(|s| s < MAX_SIZE) && !snap.names.iter().any(|n| n.ends_with(".tmp")) {
            if let Some((final_snap, lines)) = read_all(dir) {
                if numbers(&lines).1 {
                    eprintln!("settled after {:?} and {looks} looks", start.elapsed());
                    return (final_snap, lines);
                }
            }
        }
        assert!(
            start.elapsed() < limit,
            "not done after {limit:?}: {:?}\ncrilet log:\n{}",
            snap.names,
            agent.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn a_chatty_container_keeps_at_most_three_files_and_no_line_twice() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    // The kubelet server too, for `/containerLogs?follow=true`.
    let pki = tempfile::tempdir().unwrap();
    let ca = Ca::new("crilet-test-ca");
    let port = free_port();
    let mut flags = rotation_flags("3s");
    flags.extend([
        "--port".into(),
        port.to_string(),
        "--client-ca-file".into(),
        files(pki.path(), &ca),
    ]);
    let agent = AgentProcess::start_with(&flags);
    let admin = Client::new(port, Some(&ca.client("kube-apiserver-kubelet-client", &[])));
    wait_healthy(&admin, &agent).await;
    agent.write(
        "chatty.yaml",
        &busybox_pod("chatty", "Never", &chatty_script(LINES)),
    );
    let dir = main_log_dir(&rt, &agent, "chatty").await;
    // crilet has seen the container running (its status may lag the runtime's).
    let ready = format!(
        "/containerLogs/default/{}/main?tailLines=0",
        agent.pod_name("chatty")
    );
    let seen = eventually(Duration::from_secs(30), || async {
        (admin.get(&ready).await.0 == 200).then_some(())
    })
    .await;
    assert!(
        seen.is_some(),
        "crilet never saw chatty running:\n{}",
        agent.logs()
    );
    // `crilet logs -f` and `/containerLogs?follow=true` follow the pod from
    // here on, across every rotation.
    let follower = Follower::start(&agent, &agent.pod_name("chatty"));
    let path = format!(
        "/containerLogs/default/{}/main?follow=true",
        agent.pod_name("chatty")
    );
    let http_follower = tokio::spawn(follow_https(admin, path));
    let (snap, lines) = watch_until_done(&agent, &dir, Duration::from_secs(180)).await;
    let followed = follower.until_done(Duration::from_secs(60));
    let over_https = tokio::time::timeout(Duration::from_secs(60), http_follower)
        .await
        .expect("/containerLogs?follow=true printed DONE")
        .unwrap();
    for (who, followed) in [
        ("crilet logs -f", followed),
        ("/containerLogs?follow=true", over_https),
    ] {
        let (seen, done) = numbers(&followed);
        assert!(
            done,
            "{who} never printed DONE; it printed {} lines",
            followed.len()
        );
        let start = *seen.first().expect("numbered lines");
        assert!(
            seen.iter().copied().eq(start..=LINES),
            "{who}: lines {start}..={LINES} expected once each, in order; got {} lines",
            seen.len()
        );
        eprintln!("{who} saw lines {start}..={LINES}, each once");
    }

    // The end state: the current log, the newest rotated file plain, the
    // older one gzipped.
    snap.check().unwrap();
    let inuse = snap.rotated_in_use();
    assert_eq!(inuse.len(), MAX_FILES - 1, "{:?}", snap.names);
    assert!(
        inuse[0].ends_with(".gz") && !inuse[1].ends_with(".gz"),
        "{:?}",
        snap.names
    );
    assert_eq!(snap.names.len(), MAX_FILES, "{:?}", snap.names);

    // Every line at most once, in order, none missing between the first
    // kept and the last: only whole oldest files were dropped.
    let (nums, done) = numbers(&lines);
    assert!(done);
    let first = *nums.first().expect("some numbered lines are kept");
    let want: Vec<u64> = (first..=LINES).collect();
    if nums != want {
        let mut seen = BTreeMap::new();
        for n in &nums {
            *seen.entry(*n).or_insert(0) += 1;
        }
        let twice: Vec<&u64> = seen
            .iter()
            .filter(|(_, c)| **c > 1)
            .map(|(n, _)| n)
            .take(10)
            .collect();
        let missing: Vec<&u64> = want
            .iter()
            .filter(|n| !seen.contains_key(n))
            .take(10)
            .collect();
        panic!(
            "lines {first}..={LINES} expected once each, in order: {} lines, twice {twice:?}, missing {missing:?}",
            nums.len()
        );
    }
    assert!(
        first > 1,
        "30 MiB in 3 files of ~1 MiB: the oldest lines must be gone"
    );

    // One info line per rotation, and several rotations.
    let log = agent.logs();
    let rotations = log.matches("container log rotated").count();
    assert!(rotations >= 4, "{rotations} rotations\n{log}");
    assert!(!log.contains("container log rotation failed"), "{log}");
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn log_files_go_with_the_pod_even_when_removed_while_crilet_was_down() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let mut agent = AgentProcess::start_with(&rotation_flags("3s"));
    // About 8 MiB each over 4 s: rotated twice (3 s apart), so there is
    // a gzipped file and a plain one besides the log.
    for name in ["gone", "orphan"] {
        agent.write(
            &format!("{name}.yaml"),
            &busybox_pod(name, "Never", &chatty_script(8_000)),
        );
    }
    let gone = main_log_dir(&rt, &agent, "gone").await;
    let orphan = main_log_dir(&rt, &agent, "orphan").await;
    for dir in [&gone, &orphan] {
        let rotated = eventually(Duration::from_secs(60), || async {
            let s = Snapshot::take(dir);
            s.names.iter().any(|n| n.ends_with(".gz")).then_some(s)
        })
        .await;
        assert!(
            rotated.is_some(),
            "{dir:?} was never rotated twice\n{}",
            agent.logs()
        );
    }

    // Removed from its source: the pod's log directory goes.
    agent.remove("gone.yaml");
    wait_for(
        &rt,
        &agent,
        "gone",
        Duration::from_secs(30),
        "removal",
        |v| v.sandboxes.is_empty(),
    )
    .await;
    let pod_dir = gone.parent().unwrap();
    let went = eventually(Duration::from_secs(10), || async {
        (!pod_dir.exists()).then_some(())
    });
    assert!(went.await.is_some(), "{:?}", Snapshot::take(&gone).names);

    // Removed while crilet was down: it comes back without the pod's spec,
    // so it knows only the containers; their log files go with them.
    agent.kill9();
    agent.remove("orphan.yaml");
    agent.spawn();
    wait_for(
        &rt,
        &agent,
        "orphan",
        Duration::from_secs(30),
        "removal",
        |v| v.sandboxes.is_empty() && v.containers.is_empty(),
    )
    .await;
    let went = eventually(Duration::from_secs(10), || async {
        Snapshot::take(&orphan).names.is_empty().then_some(())
    });
    assert!(
        went.await.is_some(),
        "log files left behind: {:?}\n{}",
        Snapshot::take(&orphan).names,
        agent.logs()
    );
}
