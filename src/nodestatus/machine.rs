//! Facts about the node the agent runs on: its name, IP, DNS, capacity
//! (cores, memory, hugepages, the root dir's filesystem, PIDs) and OS
//! (kernel, distribution, machine and boot ids).
//! The parsers are pure; the `read_*` functions do the I/O.

use crate::cri::DnsConfig;
use crate::nodestatus::allocatable::NodeResources;
use crate::nodestatus::node::NodeSystem;

/// The node name: the override if given, else the kernel's hostname,
/// lowercased as the kubelet does.
pub fn node_name(override_name: Option<&str>) -> std::io::Result<String> {
    let name = match override_name {
        Some(n) => n.to_string(),
        None => std::fs::read_to_string("/proc/sys/kernel/hostname")?,
    };
    let name = name.trim().to_lowercase();
    if name.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the node name is empty; pass --hostname-override",
        ));
    }
    Ok(name)
}

/// Local IPv4 addresses from /proc/net/fib_trie ("host LOCAL" entries),
/// loopback last, duplicates removed, in order of appearance.
pub fn parse_fib_trie_local_addresses(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut last_addr: Option<&str> = None;
    for line in text.lines() {
        let t = line.trim_start_matches([' ', '|', '+', '-']).trim();
        if t.starts_with("/32 host LOCAL") {
            if let Some(a) = last_addr {
                if !out.iter().any(|x| x == a) {
                    out.push(a.to_string());
                }
            }
        } else if t.parse::<std::net::Ipv4Addr>().is_ok() {
            last_addr = Some(t);
        }
    }
    out.sort_by_key(|a| a.starts_with("127."));
    out
}

/// The node IP: the given one, else the first non-loopback local IPv4.
pub fn node_ip(given: Option<&str>) -> String {
    if let Some(ip) = given {
        return ip.to_string();
    }
    std::fs::read_to_string("/proc/net/fib_trie")
        .ok()
        .and_then(|t| parse_fib_trie_local_addresses(&t).into_iter().next())
        .unwrap_or_else(|| "127.0.0.1".to_string())
}

/// nameserver / search / options lines of a resolv.conf.
pub fn parse_resolv_conf(text: &str) -> DnsConfig {
    let mut dns = DnsConfig::default();
    for line in text.lines() {
        let line = line.split(['#', ';']).next().unwrap_or_default();
        let mut words = line.split_whitespace();
        match words.next() {
            Some("nameserver") => dns.servers.extend(words.next().map(String::from)),
            // The last search (or domain) line wins, as in glibc.
            Some("search") | Some("domain") => dns.searches = words.map(String::from).collect(),
            Some("options") => dns.options.extend(words.map(String::from)),
            _ => {}
        }
    }
    dns
}

pub fn read_host_dns(path: &std::path::Path) -> DnsConfig {
    std::fs::read_to_string(path)
        .map(|t| parse_resolv_conf(&t))
        .unwrap_or_default()
}

/// MemTotal of /proc/meminfo, in bytes.
pub fn parse_mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

pub fn read_memory_capacity() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| parse_mem_total(&t))
        .unwrap_or(0)
}

/// The number of CPUs in a sysfs CPU list (`/sys/devices/system/cpu/online`:
/// `0-3,6,8-9`), as cadvisor counts the node's cores.
pub fn parse_cpu_list(text: &str) -> Option<u32> {
    let mut n = 0u32;
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (
                lo.trim().parse::<u32>().ok()?,
                hi.trim().parse::<u32>().ok()?,
            ),
            None => {
                let one = part.trim().parse::<u32>().ok()?;
                (one, one)
            }
        };
        n = n.checked_add(hi.checked_sub(lo)?.checked_add(1)?)?;
    }
    (n > 0).then_some(n)
}

/// The node's online CPUs (else what the process may use).
pub fn read_num_cores() -> u32 {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|t| parse_cpu_list(&t))
        .or_else(|| {
            std::thread::available_parallelism()
                .ok()
                .and_then(|n| u32::try_from(n.get()).ok())
        })
        .unwrap_or(1)
}

/// The page size in KiB of a `/sys/kernel/mm/hugepages` entry
/// (`hugepages-2048kB`).
pub fn parse_hugepages_dir(name: &str) -> Option<i64> {
    name.strip_prefix("hugepages-")?
        .strip_suffix("kB")?
        .parse()
        .ok()
}

/// Each hugepage size the kernel offers, `(page KiB, pages)`, as cadvisor
/// reports them; sizes whose count cannot be read are left out.
pub fn read_hugepages(dir: &std::path::Path) -> Vec<(i64, i64)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(i64, i64)> = entries
        .flatten()
        .filter_map(|e| {
            let kib = parse_hugepages_dir(e.file_name().to_str()?)?;
            let pages = std::fs::read_to_string(e.path().join("nr_hugepages")).ok()?;
            Some((kib, pages.trim().parse().ok()?))
        })
        .collect();
    out.sort();
    out
}

/// A hugepage size as the hugetlb cgroup names it, from its size in KiB
/// (runc's naming, which the kubelet sends): `2048` is "2MB", `1048576`
/// "1GB", below 1 MiB "64KB".
pub fn hugepage_size_name(kib: i64) -> String {
    if kib >= 1 << 20 {
        format!("{}GB", kib >> 20)
    } else if kib >= 1 << 10 {
        format!("{}MB", kib >> 10)
    } else {
        format!("{kib}KB")
    }
}

/// The node's hugepage sizes, named as [`hugepage_size_name`] names them,
/// in the order the kernel lists `dir` (`/sys/kernel/mm/hugepages`): the
/// order the kubelet sends its hugepage limits in. Entries that are not
/// `hugepages-<n>kB` are skipped.
pub fn read_hugepage_sizes(dir: &std::path::Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| parse_hugepages_dir(e.file_name().to_str()?))
        .map(hugepage_size_name)
        .collect()
}

/// The node's capacity as the kubelet reports it: cores, MemTotal,
/// `pods` (already worked out from maxPods), the root dir's filesystem
/// size as ephemeral-storage (when statvfs answers), every hugepage size
/// and the PID limit.
pub fn read_node_capacity(root_dir: &std::path::Path, pods: i64) -> NodeResources {
    use crate::images::disk::{DiskStats, Statvfs};
    let memory = i64::try_from(read_memory_capacity()).unwrap_or(i64::MAX);
    let mut capacity = NodeResources::from_machine(read_num_cores(), memory, pods);
    for (kib, pages) in read_hugepages(std::path::Path::new("/sys/kernel/mm/hugepages")) {
        capacity = capacity.with_hugepages(kib, pages);
    }
    capacity.ephemeral_storage_bytes = Statvfs
        .stat(root_dir)
        .ok()
        .and_then(|s| i64::try_from(s.capacity_bytes).ok());
    capacity.pid = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|t| t.trim().parse().ok());
    capacity
}

/// crilet's own oom_score_adj, the floor of `--restrict-oom-score-adj`
/// (0 when it cannot be read, the score every process starts with).
pub fn read_own_oom_score_adj() -> i64 {
    std::fs::read_to_string("/proc/self/oom_score_adj")
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0)
}

/// PRETTY_NAME of an os-release file, unquoted: what the kubelet reports
/// as the node's OS image.
pub fn parse_os_image(os_release: &str) -> Option<String> {
    let line = os_release.lines().find(|l| l.starts_with("PRETTY_NAME="))?;
    let value = line["PRETTY_NAME=".len()..].trim();
    let unquoted = value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
        .unwrap_or(value);
    let text = unquoted.replace("\\\"", "\"");
    (!text.is_empty()).then_some(text)
}

/// The first of `paths` that reads, trimmed; empty if none does.
fn read_first(paths: &[&str]) -> String {
    let text = paths.iter().find_map(|p| std::fs::read_to_string(p).ok());
    text.map(|t| t.trim().to_owned()).unwrap_or_default()
}

/// The node's OS and machine, from the places cadvisor reads them for the
/// kubelet; what cannot be read stays empty.
pub fn read_node_system() -> NodeSystem {
    let os_release = read_first(&["/etc/os-release", "/usr/lib/os-release"]);
    NodeSystem {
        kernel_version: read_first(&["/proc/sys/kernel/osrelease"]),
        os_image: parse_os_image(&os_release).unwrap_or_default(),
        machine_id: read_first(&["/etc/machine-id", "/var/lib/dbus/machine-id"]),
        boot_id: read_first(&["/proc/sys/kernel/random/boot_id"]),
        // cadvisor's order: DMI, the PowerPC device tree, then (meant for
        // s390x, but tried everywhere) /etc/machine-id, which is what a VM
        // without DMI reports.
        system_uuid: read_first(&[
            "/sys/class/dmi/id/product_uuid",
            "/proc/device-tree/system-id",
            "/proc/device-tree/vm,uuid",
            "/etc/machine-id",
        ]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fib_trie_local_addresses_skip_broadcast_and_put_loopback_last() {
        let text = "Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 0.0.0.0\n        /0 universe UNICAST\n     +-- 127.0.0.0/8 2 0 2\n        +-- 127.0.0.0/31 1 0 0\n           |-- 127.0.0.0\n              /8 host LOCAL\n           |-- 127.0.0.1\n              /32 host LOCAL\n     |-- 192.0.2.10\n        /32 host LOCAL\n     |-- 192.0.2.255\n        /32 link BROADCAST\nLocal:\n     |-- 192.0.2.10\n        /32 host LOCAL\n";
        assert_eq!(
            parse_fib_trie_local_addresses(text),
            ["192.0.2.10", "127.0.0.1"]
        );
    }

    #[test]
    fn resolv_conf_is_parsed() {
        let d = parse_resolv_conf(
            "# comment\nnameserver 192.0.2.53\nnameserver 192.0.2.54 # trailing\nsearch a.example b.example\noptions ndots:2 edns0\n",
        );
        assert_eq!(d.servers, ["192.0.2.53", "192.0.2.54"]);
        assert_eq!(d.searches, ["a.example", "b.example"]);
        assert_eq!(d.options, ["ndots:2", "edns0"]);
    }

    #[test]
    fn mem_total_in_bytes() {
        assert_eq!(
            parse_mem_total("MemTotal:       2048 kB\nMemFree: 1 kB\n"),
            Some(2048 * 1024)
        );
        assert_eq!(parse_mem_total("nothing"), None);
    }

    #[test]
    fn os_image_is_the_unquoted_pretty_name() {
        let debian = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\n";
        assert_eq!(
            parse_os_image(debian).as_deref(),
            Some("Debian GNU/Linux 12 (bookworm)")
        );
        assert_eq!(
            parse_os_image("PRETTY_NAME='Alpine Linux v3.19'\n").as_deref(),
            Some("Alpine Linux v3.19")
        );
        assert_eq!(
            parse_os_image("PRETTY_NAME=Plain\n").as_deref(),
            Some("Plain")
        );
        assert_eq!(parse_os_image("NAME=x\nPRETTY_NAME=\"\"\n"), None);
        assert_eq!(parse_os_image(""), None);
    }

    #[test]
    fn cpu_lists_are_counted() {
        assert_eq!(parse_cpu_list("0-1\n"), Some(2));
        assert_eq!(parse_cpu_list("0-3,6,8-9"), Some(7));
        assert_eq!(parse_cpu_list("5"), Some(1));
        assert_eq!(parse_cpu_list(""), None);
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("a-b"), None);
    }

    #[test]
    fn hugepage_directories_give_the_page_size() {
        assert_eq!(parse_hugepages_dir("hugepages-2048kB"), Some(2048));
        assert_eq!(parse_hugepages_dir("hugepages-1048576kB"), Some(1 << 20));
        assert_eq!(parse_hugepages_dir("hugepages-2MB"), None);
        assert_eq!(parse_hugepages_dir("other"), None);
        let dir = tempfile::tempdir().unwrap();
        for (name, pages) in [("hugepages-2048kB", "3\n"), ("hugepages-1048576kB", "0\n")] {
            std::fs::create_dir(dir.path().join(name)).unwrap();
            std::fs::write(dir.path().join(name).join("nr_hugepages"), pages).unwrap();
        }
        std::fs::create_dir(dir.path().join("hugepages-64kB")).unwrap(); // no count
        assert_eq!(read_hugepages(dir.path()), [(2048, 3), (1 << 20, 0)]);
        // Sizes need no count; the order is the directory's, so compare sets.
        let mut sizes = read_hugepage_sizes(dir.path());
        sizes.sort();
        assert_eq!(sizes, ["1GB", "2MB", "64KB"]);
        std::fs::create_dir(dir.path().join("not-a-size")).unwrap();
        assert_eq!(read_hugepage_sizes(dir.path()).len(), 3);
        assert!(read_hugepage_sizes(&dir.path().join("missing")).is_empty());
    }

    #[test]
    fn hugepage_sizes_are_named_as_the_hugetlb_cgroup_names_them() {
        let rows = [
            (64, "64KB"),
            (2048, "2MB"),
            (32768, "32MB"),
            (1 << 20, "1GB"),
            (16 << 20, "16GB"),
        ];
        for (kib, want) in rows {
            assert_eq!(hugepage_size_name(kib), want, "{kib} KiB");
        }
    }

    #[test]
    fn node_name_is_lowercased_and_not_empty() {
        assert_eq!(node_name(Some("Node-A\n")).unwrap(), "node-a");
        assert!(node_name(Some("  ")).is_err());
    }
}
