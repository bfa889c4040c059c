//! Writes a pod's managed hosts file (the kubelet's `ensureHostsFile`),
//! with the content [`super::etc_hosts`] gives it: read from the node's
//! `/etc/hosts` for a host-network pod.
//!
//! Invariant: the file is rewritten in place, never replaced: containers
//! already running have it bind-mounted and keep seeing the same file.
//! It ends up mode 0644 whatever the umask.

use std::fs::{self, DirBuilder};
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::HostAlias;

use super::etc_hosts::{managed_hosts_file_content, node_hosts_file_content};

/// The node's own hosts file, copied into host-network pods' files.
pub const NODE_HOSTS_FILE: &str = "/etc/hosts";

/// A hosts file that could not be written (or the node's, read).
#[derive(Debug, thiserror::Error)]
#[error("{what} {}: {source}", .path.display())]
pub struct EtcHostsError {
    pub what: &'static str,
    pub path: PathBuf,
    pub source: io::Error,
}

/// What goes into one pod's hosts file.
#[derive(Debug, Clone, Copy)]
pub struct HostsFile<'a> {
    pub host_network: bool,
    pub pod_ips: &'a [String],
    pub hostname: &'a str,
    /// `<subdomain>.<namespace>.svc.<cluster domain>`, or empty.
    pub host_domain: &'a str,
    pub aliases: &'a [HostAlias],
}

/// Writes `file` (its directory made if missing). For a host-network pod
/// the node's file is read from `node_hosts`.
pub fn ensure_hosts_file(
    file: &Path,
    node_hosts: &Path,
    hosts: &HostsFile,
) -> Result<(), EtcHostsError> {
    let content = if hosts.host_network {
        let node = fs::read_to_string(node_hosts).map_err(|source| EtcHostsError {
            what: "reading the node's hosts file",
            path: node_hosts.to_owned(),
            source,
        })?;
        node_hosts_file_content(&node, hosts.aliases)
    } else {
        managed_hosts_file_content(
            hosts.pod_ips,
            hosts.hostname,
            hosts.host_domain,
            hosts.aliases,
        )
    };
    let fail = |source| EtcHostsError {
        what: "writing the pod's hosts file",
        path: file.to_owned(),
        source,
    };
    if let Some(dir) = file.parent() {
        let made = DirBuilder::new().recursive(true).mode(0o750).create(dir);
        made.map_err(fail)?;
    }
    fs::write(file, content).map_err(fail)?;
    fs::set_permissions(file, fs::Permissions::from_mode(0o644)).map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn aliases() -> Vec<HostAlias> {
        vec![HostAlias {
            ip: "10.1.2.3".into(),
            hostnames: Some(vec!["foo.local".into()]),
        }]
    }

    #[test]
    fn pod_network_file_written_0644_in_place() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("pods/uid/etc-hosts");
        let ips = vec!["10.0.0.5".to_string()];
        let a = aliases();
        let hosts = HostsFile {
            host_network: false,
            pod_ips: &ips,
            hostname: "web",
            host_domain: "",
            aliases: &a,
        };
        let nowhere = tmp.path().join("no-node-file");
        ensure_hosts_file(&file, &nowhere, &hosts).unwrap();
        let text = fs::read_to_string(&file).unwrap();
        assert!(
            text.starts_with("# Kubernetes-managed hosts file.\n"),
            "{text}"
        );
        assert!(text.contains("\n10.0.0.5\tweb\n"), "{text}");
        assert!(text.ends_with("10.1.2.3\tfoo.local\n"), "{text}");
        let meta = fs::metadata(&file).unwrap();
        assert_eq!(meta.mode() & 0o7777, 0o644);

        // Rewritten: same inode (a running container's bind mount sees it).
        fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
        let ips = vec!["10.0.0.6".to_string()];
        ensure_hosts_file(
            &file,
            &nowhere,
            &HostsFile {
                pod_ips: &ips,
                ..hosts
            },
        )
        .unwrap();
        let again = fs::metadata(&file).unwrap();
        assert_eq!(again.ino(), meta.ino());
        assert_eq!(again.mode() & 0o7777, 0o644);
        assert!(
            fs::read_to_string(&file)
                .unwrap()
                .contains("\n10.0.0.6\tweb\n")
        );
    }

    #[test]
    fn host_network_file_copies_the_given_node_file() {
        let tmp = tempfile::tempdir().unwrap();
        let node = tmp.path().join("node-hosts");
        fs::write(&node, "192.0.2.2 node-a\n").unwrap();
        let file = tmp.path().join("etc-hosts");
        let a = aliases();
        let hosts = HostsFile {
            host_network: true,
            pod_ips: &[],
            hostname: "ignored",
            host_domain: "ignored",
            aliases: &a,
        };
        ensure_hosts_file(&file, &node, &hosts).unwrap();
        assert_eq!(
            fs::read_to_string(&file).unwrap(),
            "# Kubernetes-managed hosts file (host network).\n192.0.2.2 node-a\n\
             \n# Entries added by HostAliases.\n10.1.2.3\tfoo.local\n"
        );

        let missing = tmp.path().join("missing");
        let err = ensure_hosts_file(&file, &missing, &hosts).unwrap_err();
        let text = err.to_string();
        let want = format!("reading the node's hosts file {}: ", missing.display());
        assert!(text.starts_with(&want), "{text}");
    }

    #[test]
    fn an_unwritable_place_names_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let blocker = tmp.path().join("pods");
        fs::write(&blocker, "a file where the pod directory goes").unwrap();
        let file = blocker.join("uid/etc-hosts");
        let hosts = HostsFile {
            host_network: false,
            pod_ips: &[],
            hostname: "h",
            host_domain: "",
            aliases: &[],
        };
        let err = ensure_hosts_file(&file, Path::new("/nonexistent"), &hosts).unwrap_err();
        let text = err.to_string();
        let want = format!("writing the pod's hosts file {}: ", file.display());
        assert!(text.starts_with(&want), "{text}");
    }
}
