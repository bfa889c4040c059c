//! The eviction signals of the stats collector's samples, for the Node's
//! MemoryPressure, DiskPressure and PIDPressure (the kubelet's
//! `makeSignalObservations`):
//! - `memory.available` = the node's available memory (MemTotal − working
//!   set) of MemTotal;
//! - `nodefs.*` = the root dir's filesystem, bytes and inodes;
//! - `imagefs.*` = the runtime's image filesystem (ImageFsInfo), or the
//!   nodefs when the runtime reports none, as the kubelet does;
//! - `pid.available` = the PID limit (the smaller of `kernel.pid_max` and
//!   `kernel.threads-max`) less the tasks running (`/proc/loadavg`).
//!
//! Invariant: a reading that is unknown stays `None`, so it never raises a
//! pressure condition. The conversion is pure; `read_pid` does the I/O and
//! `forward` is the thin task that feeds the mirror driver.

use std::path::Path;
use std::sync::Arc;

use tokio::sync::watch;

use crate::nodestatus::eviction::{Observation, Observed};
use crate::stats::assemble::Sample;
use crate::stats::types::{FsStats, NodeStats};

fn observed(available: Option<u64>, capacity: Option<u64>) -> Option<Observed> {
    let available = i64::try_from(available?).ok()?;
    let capacity = i64::try_from(capacity?).ok()?;
    Some(Observed {
        available,
        capacity,
    })
}

fn bytes(fs: Option<&FsStats>) -> Option<Observed> {
    let fs = fs?;
    observed(fs.available_bytes, fs.capacity_bytes)
}

fn inodes(fs: Option<&FsStats>) -> Option<Observed> {
    let fs = fs?;
    observed(fs.inodes_free, fs.inodes)
}

/// The signals of one node sample; `pid` is read apart (see [`read_pid`]).
pub fn observation(node: &NodeStats, pid: Option<Observed>) -> Observation {
    let memory = node.memory.as_ref().and_then(|m| {
        let available = m.available_bytes?;
        observed(Some(available), Some(available + m.working_set_bytes?))
    });
    let nodefs = node.fs.as_ref();
    let imagefs = (node.runtime.as_ref())
        .and_then(|r| r.image_fs.as_ref())
        .or(nodefs);
    Observation {
        memory,
        allocatable_memory: None,
        nodefs: bytes(nodefs),
        nodefs_inodes: inodes(nodefs),
        imagefs: bytes(imagefs),
        imagefs_inodes: inodes(imagefs),
        pid,
    }
}

/// The number of tasks (threads) of `/proc/loadavg`'s fourth field,
/// `running/total`.
pub fn parse_loadavg_tasks(loadavg: &str) -> Option<i64> {
    loadavg
        .split_whitespace()
        .nth(3)?
        .split_once('/')?
        .1
        .parse()
        .ok()
}

/// `pid.available`: the PID limit less the tasks now running, from
/// `proc_root` (`/proc`); `None` when either cannot be read.
pub fn read_pid(proc_root: &Path) -> Option<Observed> {
    let read = |p: &str| -> Option<i64> {
        std::fs::read_to_string(proc_root.join(p))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let max = match (read("sys/kernel/pid_max"), read("sys/kernel/threads-max")) {
        (Some(a), Some(b)) => a.min(b),
        (a, b) => a.or(b)?,
    };
    let tasks = parse_loadavg_tasks(&std::fs::read_to_string(proc_root.join("loadavg")).ok()?)?;
    Some(Observed {
        available: max - tasks,
        capacity: max,
    })
}

/// Sends the signals of every new sample until the sample channel closes.
pub async fn forward(
    mut samples: watch::Receiver<Option<Arc<Sample>>>,
    proc_root: std::path::PathBuf,
    tx: watch::Sender<Option<Observation>>,
) {
    loop {
        let sample = samples.borrow_and_update().clone();
        if let Some(sample) = sample {
            tx.send_replace(Some(observation(&sample.node, read_pid(&proc_root))));
        }
        if samples.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::types::{MemoryStats, RuntimeStats, Time};

    fn fs(available: u64, capacity: u64, free: u64, inodes: u64) -> FsStats {
        FsStats {
            time: Time(0),
            available_bytes: Some(available),
            capacity_bytes: Some(capacity),
            used_bytes: None,
            inodes_free: Some(free),
            inodes: Some(inodes),
            inodes_used: None,
        }
    }

    fn node() -> NodeStats {
        NodeStats {
            memory: Some(MemoryStats {
                time: Time(0),
                available_bytes: Some(300),
                working_set_bytes: Some(700),
                usage_bytes: None,
                rss_bytes: None,
                page_faults: None,
                major_page_faults: None,
            }),
            fs: Some(fs(10, 100, 5, 50)),
            runtime: Some(RuntimeStats {
                image_fs: Some(fs(40, 200, 30, 60)),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn signals_come_from_memory_the_root_fs_and_the_image_fs() {
        let pid = Some(Observed {
            available: 1,
            capacity: 2,
        });
        let o = observation(&node(), pid);
        let ob = |available, capacity| {
            Some(Observed {
                available,
                capacity,
            })
        };
        assert_eq!(o.memory, ob(300, 1000));
        assert_eq!(o.nodefs, ob(10, 100));
        assert_eq!(o.nodefs_inodes, ob(5, 50));
        assert_eq!(o.imagefs, ob(40, 200));
        assert_eq!(o.imagefs_inodes, ob(30, 60));
        assert_eq!(o.pid, pid);
        assert_eq!(o.allocatable_memory, None);
    }

    #[test]
    fn without_an_image_fs_imagefs_is_the_nodefs_and_unknowns_stay_unknown() {
        let mut n = node();
        n.runtime = None;
        let o = observation(&n, None);
        assert_eq!(o.imagefs, o.nodefs);
        assert_eq!(o.imagefs_inodes, o.nodefs_inodes);
        let o = observation(&NodeStats::default(), None);
        assert_eq!(o, Observation::default(), "nothing read, nothing known");
        let mut n = node();
        n.memory.as_mut().unwrap().working_set_bytes = None;
        assert_eq!(observation(&n, None).memory, None);
    }

    #[test]
    fn pid_readings_come_from_proc() {
        assert_eq!(
            parse_loadavg_tasks("0.10 0.20 0.30 2/345 6789\n"),
            Some(345)
        );
        assert_eq!(parse_loadavg_tasks("0.10 0.20"), None);
        assert_eq!(parse_loadavg_tasks("0 0 0 x 1"), None);
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sys/kernel")).unwrap();
        std::fs::write(dir.path().join("sys/kernel/pid_max"), "4194304\n").unwrap();
        std::fs::write(dir.path().join("sys/kernel/threads-max"), "1000\n").unwrap();
        std::fs::write(dir.path().join("loadavg"), "0 0 0 1/250 9\n").unwrap();
        assert_eq!(
            read_pid(dir.path()),
            Some(Observed {
                available: 750,
                capacity: 1000
            })
        );
        std::fs::remove_file(dir.path().join("loadavg")).unwrap();
        assert_eq!(read_pid(dir.path()), None);
        // The real /proc reads.
        let real = read_pid(Path::new("/proc")).expect("/proc");
        assert!(real.available > 0 && real.available < real.capacity);
    }
}
