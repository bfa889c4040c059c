use super::*;

/// A self-signed pair for `cn`, written to `path` (through a new file
/// renamed in place, as the store switches pairs).
fn write_pair(dir: &Path, path: &Path, cn: &str) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec![]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    let cert = params.self_signed(&key).unwrap();
    let text = format!(
        "{}{}",
        pem::encode(&pem::Pem::new("CERTIFICATE", cert.der().to_vec())),
        pem::encode(&pem::Pem::new("PRIVATE KEY", key.serialize_der()))
    );
    let tmp = dir.join("tmp.pem");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A connector that counts the connections it is asked for.
fn counting() -> (
    impl tower::Service<http::Uri, Response = (), Error = io::Error, Future: Send>
    + Clone
    + Send
    + 'static,
    Arc<std::sync::atomic::AtomicUsize>,
) {
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = calls.clone();
    let inner = tower::service_fn(move |_uri: http::Uri| {
        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        async { Ok::<(), io::Error>(()) }
    });
    (inner, calls)
}

#[tokio::test(start_paused = true)]
async fn a_connection_waits_for_the_pair_the_bootstrap_is_writing() {
    use std::sync::atomic::Ordering::SeqCst;
    use tower::Service;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubelet-client-current.pem");
    let identity = FileIdentity::load(&path, &path).unwrap();
    assert!(identity.pending());
    let (inner, calls) = counting();
    let mut connector = RetiringConnector {
        inner,
        identity: identity.clone(),
    };
    let connecting = tokio::spawn(connector.call(http::Uri::from_static("https://127.0.0.1")));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        calls.load(SeqCst),
        0,
        "no anonymous connection while the pair is pending"
    );
    write_pair(dir.path(), &path, "system:node:a");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(calls.load(SeqCst), 1, "connected once the pair is there");
    assert!(connecting.await.unwrap().is_ok());
    assert!(!identity.pending());
    // With the pair there, a connection goes at once.
    let again = connector.call(http::Uri::from_static("https://127.0.0.1"));
    assert!(again.await.is_ok());
    assert_eq!(calls.load(SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn a_bootstrap_that_never_ends_lets_connections_go_after_a_while() {
    use std::sync::atomic::Ordering::SeqCst;
    use tower::Service;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("never.pem");
    let (inner, calls) = counting();
    let identity = FileIdentity::load(&path, &path).unwrap();
    let mut connector = RetiringConnector { inner, identity };
    let began = tokio::time::Instant::now();
    assert!(
        connector
            .call(http::Uri::from_static("https://127.0.0.1"))
            .await
            .is_ok()
    );
    assert_eq!(calls.load(SeqCst), 1);
    let waited = began.elapsed();
    assert!(
        waited >= PENDING_PAIR_WAIT && waited < PENDING_PAIR_WAIT + Duration::from_secs(1),
        "{waited:?}"
    );
}

#[test]
fn a_connection_retires_a_tenth_of_the_lifetime_before_expiry_at_most_a_minute() {
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let s = Duration::from_secs;
    // 8 minutes (a 3-minute certificate backdated 5): 48 s margin.
    assert_eq!(retire_after(t0 + s(60), t0, t0 + s(480)), s(480 - 60 - 48));
    // A year: the margin is a minute.
    let year = s(365 * 86400);
    assert_eq!(retire_after(t0, t0, t0 + year), year - s(60));
    // Past the mark, or expired: at once.
    assert_eq!(retire_after(t0 + s(470), t0, t0 + s(480)), Duration::ZERO);
    assert_eq!(retire_after(t0 + s(999), t0, t0 + s(480)), Duration::ZERO);
    // notAfter before notBefore: no margin, no panic.
    assert_eq!(retire_after(t0, t0 + s(10), t0), Duration::ZERO);
}

#[test]
fn without_a_file_there_is_no_certificate_and_connections_are_short() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("kubelet-client-current.pem");
    let identity = FileIdentity::load(&missing, &missing).unwrap();
    assert!(!identity.has_certs());
    assert!(identity.resolve(&[], &[]).is_none());
    assert_eq!(identity.retire_after(), NO_CERTIFICATE_LIFETIME);
    // A file that is there but is no certificate is an error naming it.
    std::fs::write(&missing, "junk").unwrap();
    let e = FileIdentity::load(&missing, &missing).unwrap_err();
    assert!(e.contains("kubelet-client-current.pem"), "{e}");
}

#[test]
fn a_changed_file_is_read_again_and_a_broken_one_keeps_the_last() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pair.pem");
    let write = |cn: &str| write_pair(dir.path(), &path, cn);
    write("a");
    let identity = FileIdentity::load(&path, &path).unwrap();
    let first = identity.resolve(&[], &[]).unwrap();
    assert!(
        Arc::ptr_eq(&first, &identity.resolve(&[], &[]).unwrap()),
        "unchanged: not read again"
    );
    write("b");
    let second = identity.resolve(&[], &[]).unwrap();
    assert_ne!(first.cert[0], second.cert[0]);
    std::fs::write(&path, "broken").unwrap();
    let third = identity.resolve(&[], &[]).unwrap();
    assert_eq!(third.cert[0], second.cert[0], "the last good one stays");
}
