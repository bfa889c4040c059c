//! The certificate manager with a fake API server: the store, the
//! kubeconfig it writes, when it asks and what it keeps.

use std::sync::Mutex;
use std::time::Duration;

use super::*;

/// Signs every request itself (self-signed, for the key the request was
/// made with) and authenticates every pair as `user`.
struct FakeApi {
    user: String,
    lifetime: Duration,
    /// The IP SANs it signs (none: a client certificate).
    ips: Vec<std::net::IpAddr>,
    requests: Mutex<Vec<CertificateSigningRequest>>,
}

impl FakeApi {
    fn new(user: &str) -> Arc<FakeApi> {
        Arc::new(FakeApi {
            user: user.into(),
            lifetime: Duration::from_secs(3600),
            ips: Vec::new(),
            requests: Mutex::new(Vec::new()),
        })
    }
}

fn certificate(key: &rcgen::KeyPair, cn: &str, from: SystemTime, lifetime: Duration) -> String {
    certificate_for(key, cn, &[], from, lifetime)
}

fn certificate_for(
    key: &rcgen::KeyPair,
    cn: &str,
    ips: &[std::net::IpAddr],
    from: SystemTime,
    lifetime: Duration,
) -> String {
    let mut params = rcgen::CertificateParams::default();
    for ip in ips {
        params
            .subject_alt_names
            .push(rcgen::SanType::IpAddress(*ip));
    }
    let t = |s: SystemTime| {
        let secs = s.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs() as i64;
        rcgen::date_time_ymd(1970, 1, 1) + Duration::from_secs(secs as u64)
    };
    params.not_before = t(from);
    params.not_after = t(from + lifetime);
    let mut dn = rcgen::DistinguishedName::new();
    dn.push(rcgen::DnType::CommonName, cn);
    params.distinguished_name = dn;
    let cert = params.self_signed(key).unwrap();
    pem::encode(&pem::Pem::new("CERTIFICATE", cert.der().to_vec()))
}

#[async_trait::async_trait]
impl CsrApi for FakeApi {
    async fn request(
        &self,
        csr: &CertificateSigningRequest,
        key: &rcgen::KeyPair,
    ) -> Result<String, String> {
        self.requests.lock().unwrap().push(csr.clone());
        let now = SystemTime::now() - Duration::from_secs(300);
        Ok(certificate_for(
            key,
            &self.user,
            &self.ips,
            now,
            self.lifetime,
        ))
    }
    async fn who_am_i(&self, pair_file: &Path) -> Result<String, String> {
        assert!(pair_file.exists());
        Ok(self.user.clone())
    }
}

fn setup(dir: &Path, rotate: bool) -> ClientCertificate {
    let bootstrap = dir.join("bootstrap.conf");
    std::fs::write(
        &bootstrap,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\n    certificate-authority-data: Q0E=\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: t\ncurrent-context: x\nusers:\n- name: t\n  user:\n    token: abcdef.0123456789abcdef\n",
    )
    .unwrap();
    ClientCertificate::new(
        "n1",
        &dir.join("kubelet.conf"),
        Some(&bootstrap),
        &dir.join("pki"),
        rotate,
    )
}

/// Runs the manager, `api` serving the bootstrap too, until `done`
/// holds, or 2 s.
async fn run_until(cert: &ClientCertificate, api: Arc<FakeApi>, done: impl Fn() -> bool) {
    run_with(cert, Some(api.clone()), api, done).await
}

async fn run_with(
    cert: &ClientCertificate,
    bootstrap: Option<Arc<FakeApi>>,
    api: Arc<FakeApi>,
    done: impl Fn() -> bool,
) {
    let cancel = CancellationToken::new();
    let bootstrap = bootstrap.map(|b| b as Arc<dyn CsrApi>);
    let task = tokio::spawn(run(cert.clone(), bootstrap, api, cancel.clone()));
    for _ in 0..200 {
        if done() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cancel.cancel();
    let _ = task.await;
}

#[test]
fn a_missing_kubeconfig_is_written_from_the_bootstrap_one() {
    let dir = tempfile::tempdir().unwrap();
    let cert = setup(dir.path(), false);
    assert!(!kubeconfig_still_valid(&cert.kubeconfig, SystemTime::now()));
    assert!(prepare(&cert, SystemTime::now()).unwrap());
    let k = kube::config::Kubeconfig::read_from(&cert.kubeconfig).unwrap();
    assert_eq!(k.current_context.as_deref(), Some("default-context"));
    let cluster = k.clusters[0].cluster.as_ref().unwrap();
    assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:6443"));
    assert_eq!(cluster.certificate_authority_data.as_deref(), Some("Q0E="));
    let user = k.auth_infos[0].auth_info.as_ref().unwrap();
    let current = cert.store.current_path().display().to_string();
    assert_eq!(user.client_certificate.as_deref(), Some(current.as_str()));
    assert_eq!(user.client_key.as_deref(), Some(current.as_str()));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&cert.kubeconfig)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn no_bootstrap_kubeconfig_leaves_the_kubeconfig_alone() {
    let dir = tempfile::tempdir().unwrap();
    let mut cert = setup(dir.path(), true);
    cert.bootstrap_kubeconfig = None;
    assert!(!prepare(&cert, SystemTime::now()).unwrap());
    assert!(!cert.kubeconfig.exists());
}

#[test]
fn a_bad_bootstrap_kubeconfig_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let cert = setup(dir.path(), false);
    std::fs::write(cert.bootstrap_kubeconfig.as_ref().unwrap(), "clusters: [").unwrap();
    let e = prepare(&cert, SystemTime::now()).unwrap_err();
    assert!(
        e.contains("--bootstrap-kubeconfig") && e.contains("bootstrap.conf"),
        "{e}"
    );
    std::fs::write(
        cert.bootstrap_kubeconfig.as_ref().unwrap(),
        "apiVersion: v1\nkind: Config\n",
    )
    .unwrap();
    let e = prepare(&cert, SystemTime::now()).unwrap_err();
    assert!(e.contains("no current-context"), "{e}");
}

#[test]
fn a_kubeconfig_is_valid_while_its_certificates_are() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.conf");
    let now = SystemTime::now();
    assert!(!kubeconfig_still_valid(&path, now), "missing");
    let write = |user: &str| {
        std::fs::write(
            &path,
            format!("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://h\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\nusers:\n- name: u\n  user:\n{user}"),
        )
        .unwrap()
    };
    write("    token: t\n");
    assert!(
        kubeconfig_still_valid(&path, now),
        "a token has no expiry here"
    );
    let key = rcgen::KeyPair::generate().unwrap();
    let pem_file = dir.path().join("c.pem");
    std::fs::write(
        &pem_file,
        certificate(
            &key,
            "system:node:n1",
            now - Duration::from_secs(60),
            Duration::from_secs(30),
        ),
    )
    .unwrap();
    write(&format!(
        "    client-certificate: {}\n    client-key: {}\n",
        pem_file.display(),
        pem_file.display()
    ));
    assert!(!kubeconfig_still_valid(&path, now), "expired");
    std::fs::write(
        &pem_file,
        certificate(
            &key,
            "system:node:n1",
            now - Duration::from_secs(60),
            Duration::from_secs(3600),
        ),
    )
    .unwrap();
    assert!(kubeconfig_still_valid(&path, now));
    std::fs::write(&pem_file, "not PEM").unwrap();
    assert!(!kubeconfig_still_valid(&path, now), "no certificate in it");
    std::fs::remove_file(&pem_file).unwrap();
    assert!(!kubeconfig_still_valid(&path, now), "its file is missing");
}

#[tokio::test]
async fn the_bootstrap_stores_a_0600_pair_names_its_csr_and_drops_the_temporary_key() {
    let dir = tempfile::tempdir().unwrap();
    let cert = setup(dir.path(), false);
    let api = FakeApi::new("system:node:n1");
    run_until(&cert, api.clone(), || {
        cert.store.current_validity().is_some()
    })
    .await;
    let current = std::fs::read_link(cert.store.current_path()).expect("a current pair");
    assert!(
        current
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("kubelet-client-20")
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&current).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let text = std::fs::read_to_string(&current).unwrap();
    assert!(text.contains("BEGIN CERTIFICATE") && text.contains("BEGIN PRIVATE KEY"));
    assert!(!cert.store.tmp_key_path().exists());
    let requests = api.requests.lock().unwrap();
    assert_eq!(requests.len(), 1);
    let name = requests[0].metadata.name.as_deref().unwrap();
    assert!(name.starts_with("node-csr-"), "{name}");
    assert_eq!(requests[0].spec.signer_name, CLIENT_SIGNER);
}

#[tokio::test]
async fn a_certificate_that_authenticates_as_someone_else_is_not_used() {
    let dir = tempfile::tempdir().unwrap();
    let cert = setup(dir.path(), false);
    let api = FakeApi::new("system:node:other");
    run_until(&cert, api.clone(), || {
        !api.requests.lock().unwrap().is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !cert.store.current_path().exists(),
        "no pair became current"
    );
    // The bootstrap key stays for the next try, so its CSR keeps its name.
    assert!(cert.store.tmp_key_path().exists());
}

#[tokio::test]
async fn the_bootstrap_key_survives_a_failed_try_and_names_the_same_csr() {
    let dir = tempfile::tempdir().unwrap();
    let cert = setup(dir.path(), false);
    let a = cert.store.load_or_generate_tmp_key().unwrap();
    let b = cert.store.load_or_generate_tmp_key().unwrap();
    assert_eq!(
        rcgen::PublicKeyData::subject_public_key_info(&a),
        rcgen::PublicKeyData::subject_public_key_info(&b)
    );
    std::fs::write(cert.store.tmp_key_path(), "garbage").unwrap();
    let c = cert.store.load_or_generate_tmp_key().unwrap();
    assert_ne!(
        rcgen::PublicKeyData::subject_public_key_info(&a),
        rcgen::PublicKeyData::subject_public_key_info(&c)
    );
}

#[tokio::test]
async fn with_rotation_a_certificate_past_its_deadline_is_replaced_and_the_old_pair_kept() {
    let dir = tempfile::tempdir().unwrap();
    let cert = setup(dir.path(), true);
    // A pair whose 70-90 % mark has passed: 10 of its 11 minutes are gone.
    let key = rcgen::KeyPair::generate().unwrap();
    let now = SystemTime::now();
    let old = certificate(
        &key,
        "system:node:n1",
        now - Duration::from_secs(600),
        Duration::from_secs(660),
    );
    let old_file = cert
        .store
        .write_pair(&old, &key, "2026-01-01-00-00-00")
        .unwrap();
    cert.store.make_current(&old_file).unwrap();
    let api = FakeApi::new("system:node:n1");
    run_until(&cert, api.clone(), || {
        std::fs::read_link(cert.store.current_path()).is_ok_and(|p| p != old_file)
    })
    .await;
    assert_ne!(
        std::fs::read_link(cert.store.current_path()).unwrap(),
        old_file
    );
    assert!(old_file.exists(), "the old pair stays on disk");
    let requests = api.requests.lock().unwrap();
    assert_eq!(
        requests[0].metadata.generate_name.as_deref(),
        Some("csr-"),
        "a rotation's CSR is csr-*"
    );
}

fn serving(dir: &Path, ip: &str) -> ClientCertificate {
    let ips = vec![ip.parse().unwrap()];
    ClientCertificate::serving(
        "n1",
        &dir.join("kubelet.conf"),
        &dir.join("pki"),
        Vec::new(),
        ips,
    )
}

#[tokio::test]
async fn a_serving_certificate_without_the_nodes_ip_is_replaced_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let cert = serving(dir.path(), "10.0.0.2");
    // Valid for an hour more, but for the node's old IP.
    let key = rcgen::KeyPair::generate().unwrap();
    let old_ip = ["10.0.0.1".parse().unwrap()];
    let now = SystemTime::now() - Duration::from_secs(60);
    let old = certificate_for(
        &key,
        "system:node:n1",
        &old_ip,
        now,
        Duration::from_secs(3600),
    );
    let old_file = cert
        .store
        .write_pair(&old, &key, "2026-01-01-00-00-00")
        .unwrap();
    cert.store.make_current(&old_file).unwrap();
    let api = Arc::new(FakeApi {
        ips: vec!["10.0.0.2".parse().unwrap()],
        ..Arc::into_inner(FakeApi::new("system:node:n1")).unwrap()
    });
    let current = || std::fs::read_link(cert.store.current_path()).ok();
    run_with(&cert, None, api.clone(), || {
        current().is_some_and(|p| p != old_file)
    })
    .await;
    assert_ne!(current(), Some(old_file), "replaced before its deadline");
    let requests = api.requests.lock().unwrap();
    assert_eq!(
        requests[0].spec.signer_name,
        crate::certificate::csr::SERVING_SIGNER
    );
}

#[tokio::test]
async fn an_issued_certificate_without_the_nodes_names_is_refused_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let cert = serving(dir.path(), "10.0.0.2");
    // The signer drops the IP: taking it would mean asking again at once.
    let api = FakeApi::new("system:node:n1");
    let errors = cert.renew_errors.clone();
    run_with(&cert, None, api.clone(), || {
        errors.load(std::sync::atomic::Ordering::Relaxed) > 0
    })
    .await;
    assert_eq!(
        cert.renew_errors.load(std::sync::atomic::Ordering::Relaxed),
        1,
        "one failure, then the back-off"
    );
    assert!(!cert.store.current_path().exists());
}
