//! Manifest trust: a static pod may run privileged, so whoever can write to
//! the manifest directory, a manifest, or the traffic of a manifest URL is
//! root on the node. The kubelet does not check this; crilet warns (the
//! default, `--manifest-trust=warn`) or refuses (`strict`) such manifests.
//!
//! Invariant: the decisions ([`ownership_reasons`], [`url_reasons`]) are
//! pure; only [`path_reasons`] reads the file system (one `stat`). A
//! trusted path or URL gives no reasons, and every reason names who could
//! write.

use std::net::IpAddr;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// What to do with a manifest that someone other than root or crilet's
/// own user could change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ManifestTrust {
    /// Warn once per file, run the pod.
    #[default]
    Warn,
    /// Refuse the file, naming it.
    Strict,
}

/// A file's owner and permission bits, as `stat` gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ownership {
    pub uid: u32,
    pub mode: u32,
}

/// Why a manifest or manifest directory (`what`) owned as `own` could be
/// changed by someone other than root or `self_uid` (crilet's own user).
pub fn ownership_reasons(what: &str, own: Ownership, self_uid: u32) -> Vec<String> {
    let mut reasons = Vec::new();
    if own.mode & 0o020 != 0 {
        reasons.push(format!("the {what} is writable by its group"));
    }
    if own.mode & 0o002 != 0 {
        reasons.push(format!("the {what} is writable by others"));
    }
    if own.uid != 0 && own.uid != self_uid {
        reasons.push(format!(
            "the {what} is owned by uid {}, not root or crilet's user (uid {self_uid})",
            own.uid
        ));
    }
    reasons
}

/// Why pods fetched from `url` could come from someone other than the
/// node's operator: plain http from a host other than loopback.
pub fn url_reasons(url: &str) -> Vec<String> {
    let Some(rest) = url.strip_prefix("http://") else {
        return Vec::new();
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    let host = match host_port.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host_port.split(':').next().unwrap_or_default(),
    };
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if loopback {
        return Vec::new();
    }
    vec![format!(
        "served over plain http from {host:?}, not a loopback host: anyone on the path can \
         change the pods"
    )]
}

/// [`ownership_reasons`] of the file or directory at `path` (symlinks
/// followed); a path that cannot be stat'ed has none here (reading it
/// reports that).
pub fn path_reasons(what: &str, path: &Path) -> Vec<String> {
    match std::fs::metadata(path) {
        Ok(meta) => ownership_reasons(what, ownership(&meta), self_uid()),
        Err(_) => Vec::new(),
    }
}

/// The owner and mode of `meta`.
pub fn ownership(meta: &std::fs::Metadata) -> Ownership {
    Ownership {
        uid: meta.uid(),
        mode: meta.mode(),
    }
}

/// crilet's effective user ID.
pub fn self_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ownership_table() {
        let root = |mode| Ownership { uid: 0, mode };
        let rows: Vec<(Ownership, u32, &[&str])> = vec![
            (root(0o100644), 0, &[]),
            (root(0o100600), 1000, &[]),
            (root(0o040755), 0, &[]),
            (
                Ownership {
                    uid: 1000,
                    mode: 0o100644,
                },
                1000,
                &[],
            ),
            (root(0o100664), 0, &["writable by its group"]),
            (root(0o100646), 0, &["writable by others"]),
            (
                root(0o041777),
                0,
                &["writable by its group", "writable by others"],
            ),
            (
                Ownership {
                    uid: 1001,
                    mode: 0o100644,
                },
                0,
                &["owned by uid 1001, not root or crilet's user (uid 0)"],
            ),
        ];
        for (own, me, want) in rows {
            let got = ownership_reasons("manifest", own, me);
            assert_eq!(got.len(), want.len(), "{own:?}: {got:?}");
            for (g, w) in got.iter().zip(want) {
                assert!(
                    g.starts_with("the manifest is ") && g.ends_with(w),
                    "{g} / {w}"
                );
            }
        }
    }

    #[test]
    fn url_table() {
        for trusted in [
            "https://example.invalid/pods",
            "http://127.0.0.1:8080/pods",
            "http://127.9.9.9/x",
            "http://[::1]:80/x",
            "http://LOCALHOST/x",
            "http://user@localhost:1/x",
            "file:///etc/pods",
        ] {
            assert_eq!(url_reasons(trusted), Vec::<String>::new(), "{trusted}");
        }
        for untrusted in [
            "http://10.0.0.1/pods",
            "http://config.example.invalid:8080/pods",
            "http://[2001:db8::1]/x",
            "http://127.0.0.1.example.invalid/x",
            "http://localhost@10.0.0.2/x",
        ] {
            let r = url_reasons(untrusted);
            assert_eq!(r.len(), 1, "{untrusted}");
            assert!(r[0].contains("plain http"), "{r:?}");
        }
    }
}
