//! What the `probes` benchmark reads of /proc and cgroupfs: CPU ticks and
//! RSS of crilet, containerd and its shims, and the pods' cgroup CPU, over
//! a measuring window.
//!
//! Invariant: read-only; a process that is gone reads as `None`.

// Each bench uses part of it.
#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::{Duration, Instant};

/// Clock ticks per second of /proc/<pid>/stat (USER_HZ).
pub const HZ: f64 = 100.0;

// ------------------------------------------------------------------ /proc

/// The fields of /proc/<pid>/stat after the command name: [0] is field 3
/// (state), so utime is [11], stime [12], cutime [13], cstime [14] and
/// starttime [19].
pub fn stat_fields(pid: u32) -> Option<Vec<u64>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.get(stat.rfind(')')? + 2..)?;
    Some(
        after
            .split_whitespace()
            .map(|f| f.parse().unwrap_or(0))
            .collect(),
    )
}

/// (own utime+stime, reaped children's cutime+cstime) in clock ticks.
pub fn cpu_ticks(pid: u32) -> Option<(u64, u64)> {
    let f = stat_fields(pid)?;
    Some((f[11] + f[12], f[13] + f[14]))
}

pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

/// A `kB` field of /proc/<pid>/status (VmRSS, VmHWM, RssAnon, RssFile...),
/// or the plain number of another (Threads).
pub fn status_field(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

pub fn comm(pid: u32) -> Option<String> {
    Some(
        std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .ok()?
            .trim()
            .to_owned(),
    )
}

/// The private containerd: the pid file containerd-up.sh writes beside
/// the socket, if it names a live `containerd`.
pub fn containerd_pid(socket: &Path) -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(socket.parent()?.join("containerd.pid"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    (comm(pid).as_deref() == Some("containerd")).then_some(pid)
}

/// The shims of that containerd, keyed by (pid, start time): comm
/// `containerd-shim` (the 15-byte cut of containerd-shim-runc-v2) and
/// `-address SOCK` on the command line, as containerd-down.sh finds them.
pub fn shims(socket: &Path) -> HashSet<(u32, u64)> {
    let sock = socket.to_string_lossy();
    let mut found = HashSet::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if comm(pid).as_deref() != Some("containerd-shim") {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let ours = args
            .windows(2)
            .any(|w| w[0] == b"-address" && w[1] == sock.as_bytes());
        if let (true, Some(f)) = (ours, stat_fields(pid)) {
            found.insert((pid, f[19]));
        }
    }
    found
}

/// CPU time in nanoseconds of everything under the cgroup root crilet
/// puts its pods in (cgroup v1 cpuacct, or v2 cpu.stat).
pub fn pods_cgroup_ns(cgroup_root: &str) -> Option<u64> {
    let rel = cgroup_root.trim_start_matches('/');
    let base = Path::new(crilet::cm::cgroup::CGROUP_ROOT);
    if base.join("cgroup.controllers").exists() {
        let stat = std::fs::read_to_string(base.join(rel).join("cpu.stat")).ok()?;
        let usec: u64 = stat
            .lines()
            .find_map(|l| l.strip_prefix("usage_usec "))?
            .trim()
            .parse()
            .ok()?;
        return Some(usec * 1000);
    }
    std::fs::read_to_string(base.join("cpuacct").join(rel).join("cpuacct.usage"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

// ---------------------------------------------------------------- readings

pub struct Snapshot {
    pub at: Instant,
    pub crilet: u64,
    pub containerd: Option<u64>,
    pub shims: HashMap<(u32, u64), (u64, u64)>,
    pub pods_ns: Option<u64>,
}

pub struct Targets<'a> {
    pub crilet: u32,
    pub containerd: Option<u32>,
    pub socket: &'a Path,
    pub cgroup_root: &'a str,
}

impl Targets<'_> {
    fn snapshot(&self) -> Snapshot {
        Snapshot {
            at: Instant::now(),
            crilet: cpu_ticks(self.crilet).expect("crilet exited").0,
            containerd: self.containerd.and_then(cpu_ticks).map(|t| t.0),
            shims: shims(self.socket)
                .into_iter()
                .filter_map(|k| cpu_ticks(k.0).map(|t| (k, t)))
                .collect(),
            pods_ns: pods_cgroup_ns(self.cgroup_root),
        }
    }
}

/// One phase's figures, CPU in % of one core.
pub struct Figures {
    pub crilet_cpu: f64,
    pub rss_start_mib: f64,
    pub rss_end_mib: f64,
    pub rss_max_mib: f64,
    pub containerd_cpu: Option<f64>,
    pub shims_cpu: f64,
    pub shims_children_cpu: f64,
    pub shims_counted: usize,
    pub shims_changed: usize,
    pub pods_cpu: Option<f64>,
    pub load: String,
}

pub fn pct(ticks: u64, secs: f64) -> f64 {
    ticks as f64 / HZ / secs * 100.0
}

/// Reads /proc over `window`, crilet's RSS every second.
pub async fn measure(probe: &Targets<'_>, window: Duration) -> Figures {
    let load = loadavg();
    let rss_start = rss_kib(probe.crilet).unwrap_or(0);
    let a = probe.snapshot();
    let mut rss_max = 0;
    while a.at.elapsed() < window {
        rss_max = rss_max.max(rss_kib(probe.crilet).unwrap_or(0));
        tokio::time::sleep(Duration::from_secs(1).min(window.saturating_sub(a.at.elapsed()))).await;
    }
    let b = probe.snapshot();
    let rss_end = rss_kib(probe.crilet).unwrap_or(0);
    let secs = (b.at - a.at).as_secs_f64();
    let (mut own, mut children, mut counted) = (0, 0, 0);
    for (k, (o0, c0)) in &a.shims {
        if let Some((o1, c1)) = b.shims.get(k) {
            own += o1 - o0;
            children += c1 - c0;
            counted += 1;
        }
    }
    let changed = a.shims.len() + b.shims.len() - 2 * counted;
    Figures {
        crilet_cpu: pct(b.crilet - a.crilet, secs),
        rss_start_mib: rss_start as f64 / 1024.0,
        rss_end_mib: rss_end as f64 / 1024.0,
        rss_max_mib: rss_max.max(rss_end) as f64 / 1024.0,
        containerd_cpu: a
            .containerd
            .zip(b.containerd)
            .map(|(x, y)| pct(y - x, secs)),
        shims_cpu: pct(own, secs),
        shims_children_cpu: pct(children, secs),
        shims_counted: counted,
        shims_changed: changed,
        pods_cpu: a
            .pods_ns
            .zip(b.pods_ns)
            .map(|(x, y)| (y - x) as f64 / 1e9 / secs * 100.0),
        load,
    }
}
