//! Node readings from /proc: CPU time, memory, page faults and boot time.
//! The parsers are pure; [`read`] is the only function touching the files.

use std::path::Path;

use super::assemble::NodeReadings;
use super::types::Time;

/// Linux reports /proc/stat times in USER_HZ ticks, 100 a second on every
/// architecture the kernel exports to userspace.
const NANOS_PER_TICK: u64 = 10_000_000;

/// Busy CPU time of all CPUs from the first line of /proc/stat, in
/// nanoseconds: user + nice + system + irq + softirq + steal (idle and
/// iowait excluded; guest time is already inside user and nice).
pub fn parse_proc_stat_cpu(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    let ticks = at(0) + at(1) + at(2) + at(5) + at(6) + at(7);
    Some(ticks.saturating_mul(NANOS_PER_TICK))
}

/// Boot time (seconds since the epoch) from /proc/stat's `btime` line.
pub fn parse_boot_time(stat: &str) -> Option<i64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// A field of /proc/meminfo in bytes (the file says kB, meaning KiB).
pub fn meminfo_bytes(meminfo: &str, field: &str) -> Option<u64> {
    meminfo.lines().find_map(|l| {
        let rest = l.strip_prefix(field)?.strip_prefix(':')?;
        let kib: u64 = rest.split_whitespace().next()?.parse().ok()?;
        Some(kib * 1024)
    })
}

/// A counter of /proc/vmstat.
pub fn vmstat(vmstat: &str, field: &str) -> Option<u64> {
    vmstat.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == field).then(|| v.trim().parse().ok()).flatten()
    })
}

/// Fills the host fields of `NodeReadings` from a /proc tree (`/proc` in
/// production). A file that cannot be read leaves its fields empty.
pub fn read(proc_root: &Path, node_name: &str) -> NodeReadings {
    let file = |name: &str| std::fs::read_to_string(proc_root.join(name)).unwrap_or_default();
    let stat = file("stat");
    let meminfo = file("meminfo");
    let vm = file("vmstat");
    NodeReadings {
        node_name: node_name.to_owned(),
        start_time: Time(
            parse_boot_time(&stat)
                .unwrap_or(0)
                .saturating_mul(1_000_000_000),
        ),
        cpu_usage_core_nano_seconds: parse_proc_stat_cpu(&stat),
        memory_total_bytes: meminfo_bytes(&meminfo, "MemTotal"),
        memory_free_bytes: meminfo_bytes(&meminfo, "MemFree"),
        memory_inactive_file_bytes: meminfo_bytes(&meminfo, "Inactive(file)"),
        memory_anon_bytes: meminfo_bytes(&meminfo, "AnonPages"),
        page_faults: vmstat(&vm, "pgfault"),
        major_page_faults: vmstat(&vm, "pgmajfault"),
        root_fs: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  100 5 50 9000 20 3 2 1 7 0\ncpu0 50 2 25 4500 10 1 1 0 0 0\nintr 1 2\nbtime 1764470000\nprocesses 42\n";

    #[test]
    fn busy_cpu_time_excludes_idle_and_iowait() {
        // 100 + 5 + 50 + 3 + 2 + 1 ticks of 10 ms.
        assert_eq!(parse_proc_stat_cpu(STAT), Some(161 * 10_000_000));
        assert_eq!(parse_proc_stat_cpu("intr 1\n"), None);
        assert_eq!(parse_proc_stat_cpu("cpu  1 x 3\n"), None);
    }

    #[test]
    fn boot_time_is_read_from_btime() {
        assert_eq!(parse_boot_time(STAT), Some(1_764_470_000));
        assert_eq!(parse_boot_time("cpu 1\n"), None);
    }

    #[test]
    fn meminfo_fields_are_in_bytes_and_exact_names() {
        let m = "MemTotal:       16384 kB\nMemFree:         2048 kB\nInactive(file):   512 kB\nInactive:        9999 kB\n";
        assert_eq!(meminfo_bytes(m, "MemTotal"), Some(16384 * 1024));
        assert_eq!(meminfo_bytes(m, "Inactive(file)"), Some(512 * 1024));
        assert_eq!(meminfo_bytes(m, "Inactive"), Some(9999 * 1024));
        assert_eq!(meminfo_bytes(m, "AnonPages"), None);
    }

    #[test]
    fn vmstat_counters_match_whole_names() {
        let v = "pgfault 1234\npgmajfault 56\npgfault_extra 9\n";
        assert_eq!(vmstat(v, "pgfault"), Some(1234));
        assert_eq!(vmstat(v, "pgmajfault"), Some(56));
        assert_eq!(vmstat(v, "pgfree"), None);
    }

    #[test]
    fn this_machine_has_plausible_readings() {
        let r = read(Path::new("/proc"), "n1");
        assert!(r.cpu_usage_core_nano_seconds.unwrap() > 0);
        assert!(r.memory_total_bytes.unwrap() > r.memory_free_bytes.unwrap());
        assert!(r.start_time.0 > 1_500_000_000_000_000_000);
        assert!(r.page_faults.unwrap() > 0);
    }
}
