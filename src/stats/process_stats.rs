//! crilet's own process metrics, as every Kubernetes component exports them
//! (client_golang's process collector): `process_cpu_seconds_total`,
//! `process_resident_memory_bytes`, `process_virtual_memory_bytes`,
//! `process_start_time_seconds`, `process_open_fds` and `process_max_fds`.
//! The parsers are pure; [`read_self`] is the only function touching /proc.
//! Invariant: a field that cannot be read is left out of the reading (and
//! so keeps its last exported value), never reported as zero.

use std::path::Path;
use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Ticks per second of `/proc/<pid>/stat` times (USER_HZ, 100 on every
/// architecture the kernel exports to userspace).
const TICKS_PER_SECOND: f64 = 100.0;

/// One reading of the process.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessReading {
    /// User + system CPU time, seconds.
    pub cpu_seconds: Option<f64>,
    pub resident_bytes: Option<u64>,
    pub virtual_bytes: Option<u64>,
    /// Seconds since the epoch.
    pub start_time_seconds: Option<f64>,
    pub open_fds: Option<u64>,
    pub max_fds: Option<u64>,
}

/// The fields of `/proc/<pid>/stat` after the command name, which may hold
/// spaces and parentheses: everything after its last `)`, so that index 0
/// is the state (field 3 of proc(5)).
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().collect())
}

/// CPU seconds (utime + stime, fields 14 and 15) from `/proc/<pid>/stat`.
pub fn parse_cpu_seconds(stat: &str) -> Option<f64> {
    let f = stat_fields(stat)?;
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / TICKS_PER_SECOND)
}

/// The start time (field 22, ticks after boot) as seconds since the epoch,
/// given the boot time from /proc/stat.
pub fn parse_start_time(stat: &str, boot_time: i64) -> Option<f64> {
    let ticks: u64 = stat_fields(stat)?.get(19)?.parse().ok()?;
    Some(boot_time as f64 + ticks as f64 / TICKS_PER_SECOND)
}

/// A `kB` field of `/proc/<pid>/status` (`VmRSS`, `VmSize`) in bytes.
pub fn status_bytes(status: &str, field: &str) -> Option<u64> {
    status.lines().find_map(|l| {
        let rest = l.strip_prefix(field)?.strip_prefix(':')?;
        let mut words = rest.split_whitespace();
        let n: u64 = words.next()?.parse().ok()?;
        (words.next() == Some("kB")).then_some(n * 1024)
    })
}

/// The soft limit of open files from `/proc/<pid>/limits`; `None` when
/// unlimited or unreadable.
pub fn parse_max_fds(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Reads this process from `proc_root` (`/proc`): its `self` entries and
/// the boot time in `stat`.
pub fn read_self(proc_root: &Path) -> ProcessReading {
    let file = |name: &str| std::fs::read_to_string(proc_root.join(name)).ok();
    let stat = file("self/stat");
    let status = file("self/status");
    let boot_time = file("stat")
        .as_deref()
        .and_then(super::host::parse_boot_time);
    ProcessReading {
        cpu_seconds: stat.as_deref().and_then(parse_cpu_seconds),
        resident_bytes: status.as_deref().and_then(|s| status_bytes(s, "VmRSS")),
        virtual_bytes: status.as_deref().and_then(|s| status_bytes(s, "VmSize")),
        start_time_seconds: stat
            .as_deref()
            .zip(boot_time)
            .and_then(|(s, b)| parse_start_time(s, b)),
        open_fds: std::fs::read_dir(proc_root.join("self/fd"))
            .ok()
            .map(|d| d.count() as u64),
        max_fds: file("self/limits").as_deref().and_then(parse_max_fds),
    }
}

/// The exported process metrics, set from a reading at scrape time.
#[derive(Debug, Default)]
pub struct ProcessMetrics {
    cpu_seconds: Counter<f64, AtomicU64>,
    resident_bytes: Gauge,
    virtual_bytes: Gauge,
    start_time_seconds: Gauge<f64, AtomicU64>,
    open_fds: Gauge,
    max_fds: Gauge,
}

impl ProcessMetrics {
    /// Registers the metrics under client_golang's names and help texts.
    pub fn register(registry: &mut Registry) -> ProcessMetrics {
        let m = ProcessMetrics::default();
        registry.register(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds.",
            m.cpu_seconds.clone(),
        );
        registry.register(
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            m.resident_bytes.clone(),
        );
        registry.register(
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes.",
            m.virtual_bytes.clone(),
        );
        registry.register(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
            m.start_time_seconds.clone(),
        );
        registry.register(
            "process_open_fds",
            "Number of open file descriptors.",
            m.open_fds.clone(),
        );
        registry.register(
            "process_max_fds",
            "Maximum number of open file descriptors.",
            m.max_fds.clone(),
        );
        m
    }

    /// Sets the metrics from `r`; a field missing from it keeps its value.
    pub fn update(&self, r: &ProcessReading) {
        if let Some(cpu) = r.cpu_seconds {
            let delta = cpu - self.cpu_seconds.get();
            if delta > 0.0 {
                self.cpu_seconds.inc_by(delta);
            }
        }
        let set = |g: &Gauge, v: Option<u64>| {
            if let Some(v) = v {
                g.set(i64::try_from(v).unwrap_or(i64::MAX));
            }
        };
        set(&self.resident_bytes, r.resident_bytes);
        set(&self.virtual_bytes, r.virtual_bytes);
        set(&self.open_fds, r.open_fds);
        set(&self.max_fds, r.max_fds);
        if let Some(t) = r.start_time_seconds {
            self.start_time_seconds.set(t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A real line, with a command name holding a space and a parenthesis.
    const STAT: &str = "4242 (crilet (x) y) S 1 4242 4242 0 -1 4194560 5120 0 3 0 \
        250 75 0 0 20 0 9 0 123456 104857600 5000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";

    #[test]
    fn stat_fields_survive_a_hostile_command_name() {
        assert_eq!(parse_cpu_seconds(STAT), Some(3.25));
        assert_eq!(
            parse_start_time(STAT, 1_700_000_000),
            Some(1_700_001_234.56)
        );
    }

    #[test]
    fn malformed_stat_lines_give_nothing() {
        for bad in [
            "",
            "4242 crilet S 1",
            "1 (x) S",
            "1 (x) S 1 2 3 4 5 6 7 8 9 10 -5 6",
        ] {
            assert_eq!(parse_cpu_seconds(bad), None, "{bad:?}");
            assert_eq!(parse_start_time(bad, 0), None, "{bad:?}");
        }
    }

    #[test]
    fn status_and_limits_fields() {
        let status = "Name:\tcrilet\nVmSize:\t  102400 kB\nVmRSS:\t   18432 kB\nThreads:\t9\n";
        assert_eq!(status_bytes(status, "VmRSS"), Some(18432 * 1024));
        assert_eq!(status_bytes(status, "VmSize"), Some(102400 * 1024));
        assert_eq!(status_bytes(status, "VmHWM"), None);
        assert_eq!(status_bytes(status, "Threads"), None, "not a kB field");
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
            Max open files            1048576              1048576              files\n";
        assert_eq!(parse_max_fds(limits), Some(1_048_576));
        assert_eq!(
            parse_max_fds(
                "Max open files            unlimited            unlimited            files\n"
            ),
            None
        );
    }

    #[test]
    fn this_process_reads_whole() {
        let r = read_self(Path::new("/proc"));
        assert!(r.resident_bytes.unwrap() > 1 << 20, "{r:?}");
        assert!(r.virtual_bytes.unwrap() >= r.resident_bytes.unwrap());
        assert!(r.cpu_seconds.is_some());
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let started = r.start_time_seconds.unwrap();
        assert!(
            started <= now + 1.0 && started > now - 86_400.0 * 365.0,
            "{started}"
        );
        assert!(r.open_fds.unwrap() >= 3 && r.max_fds.unwrap() >= r.open_fds.unwrap());
    }

    #[test]
    fn metrics_render_under_client_golangs_names_and_keep_values_on_a_missed_read() {
        let mut registry = Registry::default();
        let m = ProcessMetrics::register(&mut registry);
        m.update(&ProcessReading {
            cpu_seconds: Some(3.25),
            resident_bytes: Some(18 << 20),
            virtual_bytes: Some(100 << 20),
            start_time_seconds: Some(1_700_001_234.5),
            open_fds: Some(12),
            max_fds: Some(1024),
        });
        m.update(&ProcessReading::default());
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        for line in [
            "process_cpu_seconds_total 3.25",
            "process_resident_memory_bytes 18874368",
            "process_virtual_memory_bytes 104857600",
            "process_start_time_seconds 1700001234.5",
            "process_open_fds 12",
            "process_max_fds 1024",
            "# TYPE process_cpu_seconds counter",
            "# TYPE process_resident_memory_bytes gauge",
        ] {
            assert!(out.lines().any(|l| l == line), "{line} missing in\n{out}");
        }
        // The counter only rises.
        m.update(&ProcessReading {
            cpu_seconds: Some(1.0),
            ..ProcessReading::default()
        });
        assert_eq!(m.cpu_seconds.get(), 3.25);
    }

    #[test]
    fn a_missing_proc_tree_reads_nothing() {
        assert_eq!(
            read_self(Path::new("/nonexistent")),
            ProcessReading::default()
        );
    }
}
