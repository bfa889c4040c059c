//! The pod's managed `/etc/hosts`, as the kubelet writes it
//! (`pkg/kubelet/kubelet_pods.go`: `makeMounts`, `shouldMountHostsFile`,
//! `managedHostsFileContent`, `nodeHostsFileContent`,
//! `hostsEntriesFromHostAliases`): one file per pod, `<root>/pods/<uid>/
//! etc-hosts`, bind-mounted read-write at `/etc/hosts` into each container
//! that does not mount something there itself.
//!
//! On the pod network it holds a header, the localhost lines, one line per
//! pod IP naming the pod's hostname (with `<hostname>.<subdomain>.<ns>.svc.
//! <cluster domain>` first when the pod has a subdomain), then the
//! `hostAliases`. On the host network it holds another header, the node's
//! own hosts file verbatim, then the `hostAliases`. Fields are separated by
//! tabs. The file is written by [`super::etc_hosts_file`].
//!
//! Invariant: pure. The node's hosts file arrives as text.

use k8s_openapi::api::core::v1::{Container, HostAlias};

/// Where the hosts file goes in a container.
pub const ETC_HOSTS_PATH: &str = "/etc/hosts";

const MANAGED_HEADER: &str = "# Kubernetes-managed hosts file.\n";
const HOST_NETWORK_HEADER: &str = "# Kubernetes-managed hosts file (host network).\n";
const LOCALHOST_LINES: &str = "127.0.0.1\tlocalhost\n\
    ::1\tlocalhost ip6-localhost ip6-loopback\n\
    fe00::0\tip6-localnet\n\
    fe00::0\tip6-mcastprefix\n\
    fe00::1\tip6-allnodes\n\
    fe00::2\tip6-allrouters\n";
const HOST_ALIASES_HEADER: &str = "\n# Entries added by HostAliases.\n";

/// Whether `container` gets the managed hosts file: the pod is on the host
/// network or its sandbox has an IP (a pod-network pod whose network is not
/// set up yet gets none), and the container mounts nothing at /etc/hosts.
pub fn mounts_hosts_file(host_network: bool, pod_ips: &[String], container: &Container) -> bool {
    let own = container.volume_mounts.iter().flatten();
    (host_network || !pod_ips.is_empty())
        && !own.into_iter().any(|m| m.mount_path == ETC_HOSTS_PATH)
}

/// The file of a pod on the pod network. `host_domain` is the pod's
/// `<subdomain>.<namespace>.svc.<cluster domain>`, or empty.
pub fn managed_hosts_file_content(
    pod_ips: &[String],
    hostname: &str,
    host_domain: &str,
    aliases: &[HostAlias],
) -> String {
    let mut out = String::from(MANAGED_HEADER);
    out.push_str(LOCALHOST_LINES);
    for ip in pod_ips {
        if host_domain.is_empty() {
            out.push_str(&format!("{ip}\t{hostname}\n"));
        } else {
            out.push_str(&format!("{ip}\t{hostname}.{host_domain}\t{hostname}\n"));
        }
    }
    out.push_str(&host_aliases_entries(aliases));
    out
}

/// The file of a pod on the host network: the node's hosts file as it is.
pub fn node_hosts_file_content(node_hosts: &str, aliases: &[HostAlias]) -> String {
    let mut out = String::from(HOST_NETWORK_HEADER);
    out.push_str(node_hosts);
    out.push_str(&host_aliases_entries(aliases));
    out
}

/// One line per alias entry, its hostnames tab-separated; nothing at all
/// (not even the heading) when there are none.
fn host_aliases_entries(aliases: &[HostAlias]) -> String {
    if aliases.is_empty() {
        return String::new();
    }
    let mut out = String::from(HOST_ALIASES_HEADER);
    for alias in aliases {
        let names = alias.hostnames.as_deref().unwrap_or_default().join("\t");
        out.push_str(&format!("{}\t{names}\n", alias.ip));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::VolumeMount;

    fn alias(ip: &str, names: &[&str]) -> HostAlias {
        HostAlias {
            ip: ip.into(),
            hostnames: Some(names.iter().map(|n| n.to_string()).collect()),
        }
    }

    fn ips(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    const LOCALHOST: &str = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n\
        fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\n\
        fe00::2\tip6-allrouters\n";

    #[test]
    fn pod_network_files() {
        let head = format!("# Kubernetes-managed hosts file.\n{LOCALHOST}");
        // (pod IPs, hostname, host domain, aliases, the lines after the localhost ones)
        type Row<'a> = (Vec<String>, &'a str, &'a str, Vec<HostAlias>, &'a str);
        let table: Vec<Row> = vec![
            (
                ips(&["10.88.0.4"]),
                "web-node-1",
                "",
                vec![],
                "10.88.0.4\tweb-node-1\n",
            ),
            (
                ips(&["10.156.0.3"]),
                "web",
                "sub.default.svc.",
                vec![
                    alias("10.1.2.3", &["foo.local", "bar.local"]),
                    alias("fd00::1", &["six.local"]),
                ],
                // As the kubelet v1.32 wrote it, started without --cluster-domain.
                "10.156.0.3\tweb.sub.default.svc.\tweb\n\
                 \n# Entries added by HostAliases.\n\
                 10.1.2.3\tfoo.local\tbar.local\nfd00::1\tsix.local\n",
            ),
            (
                ips(&["10.1.0.7", "fd00::7"]),
                "db",
                "db.prod.svc.cluster.local",
                vec![],
                "10.1.0.7\tdb.db.prod.svc.cluster.local\tdb\n\
                 fd00::7\tdb.db.prod.svc.cluster.local\tdb\n",
            ),
            (ips(&[]), "lonely", "", vec![], ""),
            (
                ips(&["10.0.0.9"]),
                "a",
                "",
                vec![HostAlias {
                    ip: "10.9.9.9".into(),
                    hostnames: None,
                }],
                "10.0.0.9\ta\n\n# Entries added by HostAliases.\n10.9.9.9\t\n",
            ),
        ];
        for (pod_ips, hostname, domain, aliases, tail) in table {
            let got = managed_hosts_file_content(&pod_ips, hostname, domain, &aliases);
            assert_eq!(
                got,
                format!("{head}{tail}"),
                "{pod_ips:?} {hostname} {domain}"
            );
        }
    }

    #[test]
    fn host_network_files_hold_the_node_file_as_it_is() {
        let node = "127.0.0.1 localhost\n127.0.0.1 vm\n";
        assert_eq!(
            node_hosts_file_content(node, &[alias("10.1.2.3", &["foo.local"])]),
            "# Kubernetes-managed hosts file (host network).\n\
             127.0.0.1 localhost\n127.0.0.1 vm\n\
             \n# Entries added by HostAliases.\n10.1.2.3\tfoo.local\n"
        );
        assert_eq!(
            node_hosts_file_content(node, &[]),
            format!("# Kubernetes-managed hosts file (host network).\n{node}")
        );
        // A node file without a final newline is not mended.
        assert_eq!(
            node_hosts_file_content("10.0.0.1 n", &[alias("10.1.1.1", &["x"])]),
            "# Kubernetes-managed hosts file (host network).\n10.0.0.1 n\n\
             # Entries added by HostAliases.\n10.1.1.1\tx\n"
        );
        assert_eq!(
            node_hosts_file_content("", &[]),
            "# Kubernetes-managed hosts file (host network).\n"
        );
    }

    #[test]
    fn which_containers_get_the_file() {
        let with_mounts = |paths: &[&str]| Container {
            name: "c".into(),
            volume_mounts: Some(
                paths
                    .iter()
                    .map(|p| VolumeMount {
                        name: "v".into(),
                        mount_path: p.to_string(),
                        ..VolumeMount::default()
                    })
                    .collect(),
            ),
            ..Container::default()
        };
        let plain = Container::default();
        let ip = ips(&["10.0.0.2"]);
        // (host network, pod IPs, container, mounted)
        let table = [
            (false, ip.clone(), &plain, true),
            (false, vec![], &plain, false),
            (true, vec![], &plain, true),
            (true, ip.clone(), &plain, true),
            (false, ip.clone(), &with_mounts(&["/etc/hosts"]), false),
            (true, vec![], &with_mounts(&["/data", "/etc/hosts"]), false),
            (false, ip.clone(), &with_mounts(&["/x/hosts", "/etc"]), true),
            (false, ip.clone(), &with_mounts(&["/etc/hosts/"]), true),
        ];
        for (host_network, pod_ips, container, want) in table {
            assert_eq!(
                mounts_hosts_file(host_network, &pod_ips, container),
                want,
                "host_network={host_network} {pod_ips:?} {:?}",
                container.volume_mounts
            );
        }
    }
}
