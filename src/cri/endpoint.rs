//! Parsing and checking a CRI endpoint such as
//! `unix:///run/containerd/containerd.sock`.
//!
//! Only unix sockets are accepted, as the kubelet on Linux does. A bare
//! absolute path is taken as a unix socket (the kubelet's old behaviour).

use std::path::{Path, PathBuf};

use super::RuntimeError;

/// The kubelet's default runtime endpoint.
pub const DEFAULT_ENDPOINT: &str = "unix:///run/containerd/containerd.sock";

/// `sun_path` holds 108 bytes including the terminating NUL.
pub const MAX_SOCKET_PATH: usize = 107;

/// A checked endpoint: the original text (for messages) and the socket path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    text: String,
    path: PathBuf,
}

impl Endpoint {
    pub fn parse(text: &str) -> Result<Self, RuntimeError> {
        let invalid = |reason: String| RuntimeError::InvalidEndpoint {
            endpoint: text.to_string(),
            reason,
        };
        let path = if let Some(rest) = text.strip_prefix("unix://") {
            rest
        } else if text.starts_with('/') {
            text
        } else if let Some((scheme, _)) = text.split_once("://") {
            return Err(invalid(format!(
                "scheme {scheme:?} is not supported; use unix:///path/to/runtime.sock"
            )));
        } else if text.is_empty() {
            return Err(invalid("empty endpoint".into()));
        } else {
            return Err(invalid("not a unix:// URL or an absolute path".into()));
        };
        if !path.starts_with('/') {
            return Err(invalid(format!(
                "socket path {path:?} is not absolute (write unix:///abs/path)"
            )));
        }
        if path.len() > MAX_SOCKET_PATH {
            return Err(invalid(format!(
                "socket path is {} bytes long; a unix socket path holds at most {MAX_SOCKET_PATH}",
                path.len()
            )));
        }
        if path.as_bytes().contains(&0) {
            return Err(invalid("socket path contains a NUL byte".into()));
        }
        Ok(Endpoint {
            text: text.to_string(),
            path: PathBuf::from(path),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// Why a socket path cannot be dialled, checked before connecting so the
/// error says "missing" or "not a socket" rather than a bare errno.
pub fn check_socket(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(std::io::Error::new(
            e.kind(),
            format!(
                "{} does not exist (is the runtime running?)",
                path.display()
            ),
        )),
        Err(e) => Err(std::io::Error::new(
            e.kind(),
            format!("cannot stat {}: {e}", path.display()),
        )),
        Ok(m) if !m.file_type().is_socket() => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} is not a unix socket", path.display()),
        )),
        Ok(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_unix_urls_and_absolute_paths() {
        let e = Endpoint::parse("unix:///run/containerd/containerd.sock").unwrap();
        assert_eq!(e.path(), Path::new("/run/containerd/containerd.sock"));
        assert_eq!(e.to_string(), "unix:///run/containerd/containerd.sock");
        let e = Endpoint::parse("/run/crio/crio.sock").unwrap();
        assert_eq!(e.path(), Path::new("/run/crio/crio.sock"));
    }

    #[test]
    fn refuses_bad_endpoints_naming_them() {
        let long = format!("unix:///{}", "a".repeat(MAX_SOCKET_PATH));
        let cases: &[(&str, &str)] = &[
            ("tcp://127.0.0.1:1234", "scheme \"tcp\" is not supported"),
            ("http://localhost", "scheme \"http\" is not supported"),
            ("unix://relative.sock", "is not absolute"),
            ("", "empty endpoint"),
            ("containerd.sock", "not a unix:// URL"),
            (&long, "at most 107"),
        ];
        for (text, want) in cases {
            let err = Endpoint::parse(text).unwrap_err().to_string();
            assert!(err.contains(want), "{text:?}: {err}");
            assert!(err.contains(&format!("{text:?}")), "{text:?}: {err}");
        }
    }

    #[test]
    fn longest_allowed_path_is_accepted() {
        let path = format!("/{}", "a".repeat(MAX_SOCKET_PATH - 1));
        assert!(Endpoint::parse(&format!("unix://{path}")).is_ok());
    }

    #[test]
    fn check_socket_says_missing_or_not_a_socket() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.sock");
        let err = check_socket(&missing).unwrap_err().to_string();
        assert!(err.contains("does not exist"), "{err}");
        let file = dir.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        let err = check_socket(&file).unwrap_err().to_string();
        assert!(err.contains("is not a unix socket"), "{err}");
        let sock = dir.path().join("s.sock");
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        check_socket(&sock).unwrap();
    }
}
