//! The TLS bootstrap on the real kube-apiserver and the real
//! kube-controller-manager (its CSR signer and approver, started by
//! `scripts/apiserver-env.sh`), set up as `kubeadm join` finds it: a
//! bootstrap-token Secret and kubeadm's three ClusterRoleBindings. A node
//! with only the token joins, its mirror pod runs, it rotates its client
//! certificate while the mirror pod stays Running and it keeps reporting;
//! and a node restarted with an expired certificate bootstraps again and
//! finds its mirror pod as it left it.
//!
//! The controller manager signs 3-minute certificates, backdated 5
//! minutes, so a node rotates 0.6 to 2.2 minutes after each issue. These
//! tests do not depend on the runtime, so they run in the containerd 1.6
//! pass only (the other passes return at once, saying so).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
use kube::api::{Api, ListParams, ObjectMeta, PostParams};

use crate::agent::*;
use crate::kube::{ADMIN_ENV, Lab};
use crate::mirror::{mirror_of, phase};
use crate::support::{RuntimeKind, eventually, runtime_kind};

const DEFAULT_NODE_TOKEN_GROUP: &str = "system:bootstrappers:kubeadm:default-node-token";
const JOIN_LIMIT: Duration = Duration::from_secs(60);
/// A rotation comes at most 2.2 min after an issue; the CSR round trip on top.
const ROTATION_LIMIT: Duration = Duration::from_secs(240);

fn only_on_containerd1(test: &str) -> bool {
    if runtime_kind() != RuntimeKind::Containerd1 {
        eprintln!("{test}: runs in the containerd 1.6 pass only (no runtime behaviour in it)");
        return false;
    }
    true
}

/// kubeadm's bindings for joining nodes (`kubeadm init` phase
/// bootstrap-token): CSRs by the token's group, their auto-approval, and
/// the auto-approval of nodes renewing their own certificate.
async fn kubeadm_join_rbac(lab: &Lab) {
    let bindings: Api<ClusterRoleBinding> = Api::all(lab.admin());
    let group = |name: &str| Subject {
        kind: "Group".into(),
        api_group: Some("rbac.authorization.k8s.io".into()),
        name: name.into(),
        namespace: None,
    };
    for (name, role, subject) in [
        (
            "kubeadm:kubelet-bootstrap",
            "system:node-bootstrapper",
            DEFAULT_NODE_TOKEN_GROUP,
        ),
        (
            "kubeadm:node-autoapprove-bootstrap",
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            DEFAULT_NODE_TOKEN_GROUP,
        ),
        (
            "kubeadm:node-autoapprove-certificate-rotation",
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            "system:nodes",
        ),
    ] {
        let binding = ClusterRoleBinding {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "ClusterRole".into(),
                name: role.into(),
            },
            subjects: Some(vec![group(subject)]),
        };
        match bindings.create(&PostParams::default(), &binding).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("creating ClusterRoleBinding {name}: {e}"),
        }
    }
}

fn base36(mut n: u128, len: usize) -> String {
    let digits = b"0123456789abcdefghijklmnopqrstuvwxyz";
    (0..len)
        .map(|_| {
            let d = digits[(n % 36) as usize] as char;
            n /= 36;
            d
        })
        .collect()
}

/// A new bootstrap token (`<id>.<secret>`) as `kubeadm token create` makes
/// it: its Secret in kube-system, valid for an hour.
async fn bootstrap_token(lab: &Lab) -> (String, String) {
    let seed = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
        ^ (u128::from(std::process::id()) << 64);
    let id = base36(seed, 6);
    let secret = base36(
        seed.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835),
        16,
    );
    let expiration = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(1);
    let data = [
        ("token-id", id.clone()),
        ("token-secret", secret.clone()),
        ("expiration", expiration.to_string()),
        ("usage-bootstrap-authentication", "true".into()),
        ("usage-bootstrap-signing", "true".into()),
        ("auth-extra-groups", DEFAULT_NODE_TOKEN_GROUP.into()),
    ];
    let object = Secret {
        metadata: ObjectMeta {
            name: Some(format!("bootstrap-token-{id}")),
            namespace: Some("kube-system".into()),
            ..Default::default()
        },
        type_: Some("bootstrap.kubernetes.io/token".into()),
        string_data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        ),
        ..Default::default()
    };
    let secrets: Api<Secret> = Api::namespaced(lab.admin(), "kube-system");
    secrets
        .create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("creating the bootstrap token Secret: {e}"));
    (id.clone(), format!("{id}.{secret}"))
}

/// kubeadm's `bootstrap-kubelet.conf`: the lab's server and CA, the token.
fn bootstrap_kubeconfig(dir: &Path, token: &str) -> PathBuf {
    let admin = std::env::var(ADMIN_ENV).expect("the lab's admin kubeconfig");
    let k = kube::config::Kubeconfig::read_from(&admin).expect("the admin kubeconfig");
    let cluster = k.clusters[0].cluster.as_ref().expect("a cluster");
    let server = cluster.server.clone().expect("a server");
    let ca = cluster.certificate_authority_data.clone().expect("CA data");
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: kubernetes\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\ncontexts:\n- name: tls-bootstrap-token-user@kubernetes\n  context:\n    cluster: kubernetes\n    user: tls-bootstrap-token-user\ncurrent-context: tls-bootstrap-token-user@kubernetes\nusers:\n- name: tls-bootstrap-token-user\n  user:\n    token: {token}\n"
    );
    let path = dir.join("bootstrap-kubelet.conf");
    std::fs::write(&path, text).unwrap();
    path
}

fn join_args(dir: &Path, bootstrap: &Path) -> Vec<String> {
    let s = |p: PathBuf| p.to_string_lossy().into_owned();
    vec![
        "--kubeconfig".into(),
        s(dir.join("kubelet.conf")),
        "--bootstrap-kubeconfig".into(),
        s(bootstrap.to_path_buf()),
        "--cert-dir".into(),
        s(dir.join("pki")),
    ]
}

fn current_pair(dir: &Path) -> PathBuf {
    let current = dir.join("pki/kubelet-client-current.pem");
    std::fs::read_link(&current).unwrap_or_else(|e| panic!("{}: {e}", current.display()))
}

/// The CSRs `user` sent.
async fn csrs_of(lab: &Lab, user: &str) -> Vec<CertificateSigningRequest> {
    let api: Api<CertificateSigningRequest> = Api::all(lab.admin());
    let list = api
        .list(&ListParams::default())
        .await
        .expect("listing the CSRs");
    list.items
        .into_iter()
        .filter(|c| c.spec.username.as_deref() == Some(user))
        .collect()
}

fn issued(c: &CertificateSigningRequest) -> bool {
    c.status
        .as_ref()
        .and_then(|s| s.certificate.as_ref())
        .is_some()
}

async fn lease_renewed_after(lab: &Lab, node: &str, after: jiff::Timestamp) -> Option<()> {
    let leases: Api<Lease> = Api::namespaced(lab.admin(), "kube-node-lease");
    let lease = leases.get_opt(node).await.ok()??;
    let renewed = lease.spec?.renew_time?.0;
    (renewed > after).then_some(())
}

/// A node about to join: its directory (`kubelet.conf`, `pki/`), its claim,
/// and a bootstrap kubeconfig with `token`, or with a new token of a
/// cluster set up as `kubeadm join` finds it (then `id` is the token's).
struct Joining {
    dir: tempfile::TempDir,
    node: crate::kube::NodeClaim,
    id: String,
    bootstrap: PathBuf,
}

async fn joining(lab: &Lab, name: &str, token: Option<&str>) -> Joining {
    let dir = tempfile::Builder::new()
        .prefix("crilet-join-")
        .tempdir()
        .unwrap();
    let node = lab
        .claim_joining(name, dir.path().join("kubelet.conf"))
        .await;
    let (id, token) = match token {
        Some(t) => (String::new(), t.to_string()),
        None => {
            kubeadm_join_rbac(lab).await;
            bootstrap_token(lab).await
        }
    };
    let bootstrap = bootstrap_kubeconfig(dir.path(), &token);
    Joining {
        dir,
        node,
        id,
        bootstrap,
    }
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd, the real kube-apiserver and its controller manager (scripts/test.sh)"]
async fn a_node_joins_with_a_bootstrap_token_and_rotates_its_certificate_while_its_pods_run() {
    if !only_on_containerd1("tls_bootstrap::joins") {
        return;
    }
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let lab = Lab::connect().await;
    let Joining {
        dir,
        node,
        id,
        bootstrap,
    } = joining(&lab, "crilet-join-1", None).await;
    let mut args = join_args(dir.path(), &bootstrap);
    args.push("--rotate-certificates".into());
    let mut agent = AgentProcess::prepare_on(&node.name, &args);
    agent.write("web.yaml", &busybox_pod("web", "Always", "sleep 3600"));
    agent.spawn();

    let mirror = mirror_of(&lab, &agent, "web", "Running", |p| {
        phase(p) == Some("Running")
    })
    .await;
    let uid = mirror.metadata.uid.clone();
    // What the bootstrap left: the kubeconfig naming the current pair, the
    // pair 0600, the temporary key gone, and the CSR the token sent.
    let kubeconfig = std::fs::read_to_string(dir.path().join("kubelet.conf")).unwrap();
    assert!(
        kubeconfig.contains("kubelet-client-current.pem"),
        "{kubeconfig}"
    );
    let first = current_pair(dir.path());
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&first).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", first.display());
    assert!(!dir.path().join("pki/kubelet-client.key.tmp").exists());
    let by_token = csrs_of(&lab, &format!("system:bootstrap:{id}")).await;
    assert!(
        by_token.iter().any(|c| issued(c)
            && c.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("node-csr-"))
            && c.spec.signer_name == "kubernetes.io/kube-apiserver-client-kubelet"),
        "no issued node-csr-* CSR by the token: {by_token:#?}\n{}",
        agent.logs()
    );

    // The rotation: a new pair becomes current, asked for by the node itself.
    let rotated = eventually(ROTATION_LIMIT, || async {
        let now = current_pair(dir.path());
        (now != first).then_some(now)
    })
    .await;
    let Some(second) = rotated else {
        panic!("no rotation within {ROTATION_LIMIT:?}:\n{}", agent.logs());
    };
    let at = jiff::Timestamp::now();
    assert!(first.exists(), "the old pair stays on disk");
    let by_node = csrs_of(&lab, &format!("system:node:{}", node.name)).await;
    assert!(
        by_node.iter().any(issued),
        "no CSR issued to the node itself: {by_node:#?}"
    );
    // The node keeps reporting on the new certificate, and its pod never
    // stopped: same mirror pod, still Running.
    let renewed = eventually(JOIN_LIMIT, || lease_renewed_after(&lab, &node.name, at)).await;
    assert!(
        renewed.is_some(),
        "no Lease renewal after the rotation to {}:\n{}",
        second.display(),
        agent.logs()
    );
    let after = mirror_of(&lab, &agent, "web", "Running", |p| {
        phase(p) == Some("Running")
    })
    .await;
    assert_eq!(after.metadata.uid, uid, "the mirror pod was recreated");
    assert!(!agent.logs().contains("panicked"), "{}", agent.logs());
    agent.terminate();
}

/// A pair that expired in 2020, for node `node`.
fn expired_pair(node: &str) -> String {
    let mut params = rcgen::CertificateParams::default();
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    params.not_after = rcgen::date_time_ymd(2020, 1, 2);
    let mut dn = rcgen::DistinguishedName::new();
    dn.push(rcgen::DnType::OrganizationName, "system:nodes");
    dn.push(rcgen::DnType::CommonName, format!("system:node:{node}"));
    params.distinguished_name = dn;
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    format!("{}{}", cert.pem(), key.serialize_pem())
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd, the real kube-apiserver and its controller manager (scripts/test.sh)"]
async fn a_node_restarted_with_an_expired_certificate_bootstraps_again_and_keeps_its_mirror_pod() {
    if !only_on_containerd1("tls_bootstrap::expired") {
        return;
    }
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let lab = Lab::connect().await;
    let Joining {
        dir,
        node,
        bootstrap,
        ..
    } = joining(&lab, "crilet-join-2", None).await;
    let mut agent = AgentProcess::prepare_on(&node.name, &join_args(dir.path(), &bootstrap));
    agent.write("web.yaml", &busybox_pod("web", "Always", "sleep 3600"));
    agent.spawn();
    let mirror = mirror_of(&lab, &agent, "web", "Running", |p| {
        phase(p) == Some("Running")
    })
    .await;
    agent.terminate();

    // While it is down, its certificate expires.
    let expired = dir
        .path()
        .join("pki/kubelet-client-2020-01-01-00-00-00.pem");
    std::fs::write(&expired, expired_pair(&node.name)).unwrap();
    let current = dir.path().join("pki/kubelet-client-current.pem");
    std::fs::remove_file(&current).unwrap();
    std::os::unix::fs::symlink(&expired, &current).unwrap();
    agent.spawn();

    let renewed = eventually(JOIN_LIMIT, || async {
        let now = current_pair(dir.path());
        (now != expired).then_some(now)
    })
    .await;
    assert!(
        renewed.is_some(),
        "no new certificate after the expired one:\n{}",
        agent.logs()
    );
    let at = jiff::Timestamp::now();
    let reported = eventually(JOIN_LIMIT, || lease_renewed_after(&lab, &node.name, at)).await;
    assert!(
        reported.is_some(),
        "the node does not report again:\n{}",
        agent.logs()
    );
    let after = mirror_of(&lab, &agent, "web", "Running", |p| {
        phase(p) == Some("Running")
    })
    .await;
    assert_eq!(
        after.metadata.uid, mirror.metadata.uid,
        "the mirror pod was recreated"
    );
    agent.terminate();
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd, the real kube-apiserver and its controller manager (scripts/test.sh)"]
async fn a_bad_bootstrap_token_is_named_and_the_static_pods_run_without_the_api_server() {
    if !only_on_containerd1("tls_bootstrap::bad_token") {
        return;
    }
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let lab = Lab::connect().await;
    // A token of the right shape whose Secret does not exist.
    let Joining {
        dir,
        node,
        bootstrap,
        ..
    } = joining(&lab, "crilet-join-3", Some("zzzzzz.zzzzzzzzzzzzzzzz")).await;
    let mut agent = AgentProcess::prepare_on(&node.name, &join_args(dir.path(), &bootstrap));
    agent.write("web.yaml", &busybox_pod("web", "Always", "sleep 3600"));
    agent.spawn();
    wait_for(
        &rt,
        &agent,
        "web",
        JOIN_LIMIT,
        "its container running",
        |v| v.running("main").is_some(),
    )
    .await;
    let named = eventually(JOIN_LIMIT, || async {
        let logs = agent.logs();
        (logs.contains("asking for a certificate")
            && logs.contains("creating a CertificateSigningRequest: 401 Unauthorized"))
        .then_some(())
    })
    .await;
    assert!(
        named.is_some(),
        "no error naming the refused CSR:\n{}",
        agent.logs()
    );
    assert!(!dir.path().join("pki/kubelet-client-current.pem").exists());
    assert!(
        lab.node(&node.name).await.is_none(),
        "no Node without credentials"
    );
    agent.terminate();
}

/// A TLS handshake with the kubelet server at `port`, trusting only the
/// lab's CA, for IP 127.0.0.1: the subject of the certificate it shows.
async fn serving_subject(port: u16) -> Result<String, String> {
    let admin = PathBuf::from(std::env::var(ADMIN_ENV).expect("the lab's admin kubeconfig"));
    let ca_file = admin.parent().unwrap().join("pki/ca.crt");
    let ca = std::fs::read(&ca_file).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    use rustls::pki_types::pem::PemObject;
    for c in rustls::pki_types::CertificateDer::pem_slice_iter(&ca) {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| e.to_string())?;
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let tls = connector
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    let cert = tls.get_ref().1.peer_certificates().unwrap()[0].clone();
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).unwrap();
    Ok(parsed.subject().to_string())
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd, the real kube-apiserver and its controller manager (scripts/test.sh)"]
async fn the_kubelet_servers_certificate_comes_through_a_csr_once_an_operator_approves_it() {
    if !only_on_containerd1("tls_bootstrap::serving") {
        return;
    }
    let _guard = AGENT_LOCK.lock().await;
    let lab = Lab::connect().await;
    let Joining {
        dir,
        node,
        bootstrap,
        ..
    } = joining(&lab, "crilet-join-4", None).await;
    let port = crate::support::free_port();
    let mut args = join_args(dir.path(), &bootstrap);
    args.extend([
        "--rotate-server-certificates".into(),
        "--port".into(),
        port.to_string(),
    ]);
    args.extend(["--address".into(), "127.0.0.1".into()]);
    let agent = AgentProcess::start_on(&node.name, &args);

    // The CSR waits: nothing approves kubelet-serving CSRs on its own.
    let user = format!("system:node:{}", node.name);
    let pending = eventually(JOIN_LIMIT, || async {
        csrs_of(&lab, &user)
            .await
            .into_iter()
            .find(|c| c.spec.signer_name == "kubernetes.io/kubelet-serving")
    })
    .await;
    let Some(csr) = pending else {
        panic!("no kubelet-serving CSR from {user}:\n{}", agent.logs());
    };
    assert!(!issued(&csr), "{csr:#?}");
    let request = String::from_utf8(csr.spec.request.0.clone()).unwrap();
    let der = pem::parse(&request).unwrap();
    use x509_parser::prelude::FromDer;
    let (_, parsed) =
        x509_parser::certification_request::X509CertificationRequest::from_der(der.contents())
            .unwrap();
    let sans = format!(
        "{:?}",
        parsed.requested_extensions().map(|e| e.collect::<Vec<_>>())
    );
    assert!(
        sans.contains("crilet-join-4") && sans.contains("[127, 0, 0, 1]"),
        "{sans}"
    );
    let refused = serving_subject(port).await;
    assert!(
        refused.is_err(),
        "a handshake before the certificate: {refused:?}"
    );

    // The operator approves it, as the README says.
    let name = csr.metadata.name.clone().unwrap();
    let admin = std::env::var(ADMIN_ENV).unwrap();
    let kubectl =
        std::env::var("CRILET_KUBECTL").expect("CRILET_KUBECTL (scripts/test.sh sets it)");
    let out = std::process::Command::new(kubectl)
        .args(["--kubeconfig", &admin, "certificate", "approve", &name])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl certificate approve: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let subject = eventually(JOIN_LIMIT, || async { serving_subject(port).await.ok() }).await;
    let Some(subject) = subject else {
        panic!(
            "the server shows no certificate the CA signed:\n{}",
            agent.logs()
        );
    };
    assert!(
        subject.contains("CN=system:node:crilet-join-4"),
        "{subject}"
    );
    assert!(dir.path().join("pki/kubelet-server-current.pem").exists());
}
