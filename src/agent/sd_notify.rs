//! systemd's readiness protocol (`sd_notify(3)`): with `Type=notify`,
//! systemd passes a datagram socket in `NOTIFY_SOCKET` and waits for
//! `READY=1` before it counts the service as started. crilet sends
//! `READY=1` once its listeners are bound and the runtime has answered,
//! `STATUS=` lines while it waits, and `STOPPING=1` when it shuts down, as
//! the kubelet sends `READY=1` through go-systemd's `SdNotify`.
//! Invariant: without `NOTIFY_SOCKET` nothing is sent, and a failed send is
//! logged, never fatal (the agent runs the same under any supervisor).

use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// Where `NOTIFY_SOCKET` points: a path, or a name in Linux's abstract
/// socket namespace (`@name`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotifyAddr {
    Path(std::path::PathBuf),
    Abstract(Vec<u8>),
}

/// Parses `NOTIFY_SOCKET`'s value; `None` for an empty value or a form
/// systemd does not use (`vsock:` addresses, relative paths).
pub fn parse_notify_socket(value: &str) -> Option<NotifyAddr> {
    if let Some(name) = value.strip_prefix('@') {
        return (!name.is_empty()).then(|| NotifyAddr::Abstract(name.as_bytes().to_vec()));
    }
    value
        .starts_with('/')
        .then(|| NotifyAddr::Path(value.into()))
}

/// The systemd notifier of this process: `None` inside when
/// `NOTIFY_SOCKET` is unset or unusable.
#[derive(Debug, Clone, Default)]
pub struct Notifier {
    addr: Option<NotifyAddr>,
}

impl Notifier {
    /// From the environment, as systemd sets it. The variable is left in
    /// place: crilet starts no child that could inherit it by mistake.
    pub fn from_env() -> Notifier {
        let addr = std::env::var("NOTIFY_SOCKET").ok();
        let parsed = addr.as_deref().and_then(parse_notify_socket);
        if let (Some(raw), None) = (&addr, &parsed) {
            tracing::warn!(notify_socket = %raw, "NOTIFY_SOCKET is not a path or @name; not notifying systemd");
        }
        Notifier { addr: parsed }
    }

    pub fn new(addr: Option<NotifyAddr>) -> Notifier {
        Notifier { addr }
    }

    /// Whether a supervisor listens.
    pub fn enabled(&self) -> bool {
        self.addr.is_some()
    }

    /// `READY=1` (with a status line for `systemctl status`).
    pub fn ready(&self, status: &str) {
        self.notify(&format!("READY=1\nSTATUS={}", one_line(status)));
    }

    /// A status line for `systemctl status`.
    pub fn status(&self, status: &str) {
        self.notify(&format!("STATUS={}", one_line(status)));
    }

    /// `STOPPING=1`: the agent is shutting down.
    pub fn stopping(&self) {
        self.notify("STOPPING=1");
    }

    fn notify(&self, message: &str) {
        let Some(addr) = &self.addr else { return };
        if let Err(e) = send(addr, message) {
            tracing::warn!(error = %e, ?addr, "could not notify systemd");
        }
    }
}

/// A status line may not span lines: each line of the datagram is one
/// assignment.
fn one_line(status: &str) -> String {
    status.replace('\n', " ")
}

/// Sends one datagram from an unbound socket.
pub fn send(addr: &NotifyAddr, message: &str) -> io::Result<()> {
    let socket = UnixDatagram::unbound()?;
    let target = match addr {
        NotifyAddr::Path(path) => SocketAddr::from_pathname(path)?,
        NotifyAddr::Abstract(name) => {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(name)?
        }
    };
    let sent = socket.send_to_addr(message.as_bytes(), &target)?;
    if sent != message.len() {
        return Err(io::Error::other(format!(
            "sent {sent} of {} bytes",
            message.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notify_socket_values() {
        let table = [
            (
                "/run/systemd/notify",
                Some(NotifyAddr::Path("/run/systemd/notify".into())),
            ),
            (
                "@/org/systemd/x",
                Some(NotifyAddr::Abstract(b"/org/systemd/x".to_vec())),
            ),
            ("", None),
            ("@", None),
            ("relative/path", None),
            ("vsock:2:1234", None),
        ];
        for (value, want) in table {
            assert_eq!(parse_notify_socket(value), want, "{value:?}");
        }
    }

    #[test]
    fn ready_status_and_stopping_reach_a_bound_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let listener = UnixDatagram::bind(&path).unwrap();
        let notifier = Notifier::new(Some(NotifyAddr::Path(path)));
        assert!(notifier.enabled());
        notifier.status("waiting for\nthe runtime");
        notifier.ready("running 3 pods");
        notifier.stopping();
        let mut buf = [0u8; 256];
        let mut got = Vec::new();
        for _ in 0..3 {
            let n = listener.recv(&mut buf).unwrap();
            got.push(String::from_utf8(buf[..n].to_vec()).unwrap());
        }
        assert_eq!(
            got,
            [
                "STATUS=waiting for the runtime",
                "READY=1\nSTATUS=running 3 pods",
                "STOPPING=1"
            ]
        );
    }

    #[test]
    fn an_abstract_socket_is_reached() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("crilet-test-notify-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let listener = UnixDatagram::bind_addr(&addr).unwrap();
        Notifier::new(parse_notify_socket(&format!("@{name}"))).ready("up");
        let mut buf = [0u8; 64];
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=up");
    }

    #[test]
    fn a_dead_socket_is_an_error_naming_it_and_no_socket_sends_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let err = send(&NotifyAddr::Path(dir.path().join("gone")), "READY=1").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
        // Not fatal through the notifier, and nothing without an address.
        Notifier::new(Some(NotifyAddr::Path(dir.path().join("gone")))).ready("x");
        let none = Notifier::new(None);
        assert!(!none.enabled());
        none.ready("x");
    }
}
