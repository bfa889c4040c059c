//! The stats API's transport, with no runtime behind it: the agent serves
//! from its start even while its runtime socket is dead, so these run
//! everywhere. The socket's mode and replacement rules, the CLI's messages
//! when no agent runs, the TLS-only TCP listener and client certificates,
//! health and reflection.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crilet::api::stats::v1 as pb;
use crilet::cli::agent_client;
use pb::stats_client::StatsClient;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

use crate::support::{cli, eventually, free_port};

/// `crilet run` against a runtime socket that does not exist.
struct DeadRuntimeAgent {
    child: Child,
    dir: tempfile::TempDir,
}

impl DeadRuntimeAgent {
    fn start(extra: &[String]) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("crilet-api-")
            .tempdir()
            .unwrap();
        let child = Self::spawn(dir.path(), extra);
        DeadRuntimeAgent { child, dir }
    }

    fn spawn(dir: &Path, extra: &[String]) -> Child {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("crilet.log"))
            .unwrap();
        Command::new(env!("CARGO_BIN_EXE_crilet"))
            .arg("run")
            .arg("--container-runtime-endpoint")
            .arg(format!("unix://{}/no-runtime.sock", dir.display()))
            .arg("--root-dir")
            .arg(dir.join("root"))
            .args(crate::support::private_log_dirs(dir))
            .arg("--socket")
            .arg(dir.join("crilet.sock"))
            .args(["--hostname-override", "api-node"])
            .args(extra)
            .args(crate::support::no_kubelet_port(extra))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap()
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("crilet.sock")
    }

    fn logs(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("crilet.log")).unwrap_or_default()
    }

    async fn serving(&self) {
        let ok = eventually(Duration::from_secs(20), || async {
            agent_client::pods(&self.socket()).await.ok()
        })
        .await;
        assert!(
            ok.is_some(),
            "the socket never answered; log:\n{}",
            self.logs()
        );
    }
}

impl Drop for DeadRuntimeAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn the_socket_is_private_and_answers_while_the_runtime_is_dead() {
    let agent = DeadRuntimeAgent::start(&[]);
    agent.serving().await;
    let mode = std::fs::metadata(agent.socket())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "socket mode {:o}", mode & 0o777);

    let sock = agent.socket();
    let sock = sock.to_str().unwrap();
    let (ok, out, err) = cli(&["pods", "--socket", sock]);
    assert!(ok, "{err}");
    assert_eq!(
        out.trim(),
        "NAMESPACE   NAME   READY   UID   MIRROR UID   PHASE   RESTARTS   AGE"
    );
    // Nothing sampled from a dead runtime: said so, not an empty success.
    let (ok, _, err) = cli(&["summary", "--socket", sock]);
    assert!(!ok);
    assert!(
        err.contains("Unavailable") && err.contains("no stats sample yet"),
        "{err}"
    );
    let (ok, _, err) = cli(&["stats", "default/nope", "--socket", sock]);
    assert!(!ok);
    assert!(
        err.contains("NotFound") && err.contains("pod default/nope"),
        "{err}"
    );
    let (ok, _, err) = cli(&["stats", "a/b/c", "--socket", sock]);
    assert!(!ok);
    assert!(err.contains("invalid pod reference"), "{err}");

    // Malformed refs over gRPC: INVALID_ARGUMENT; unknown: NOT_FOUND naming it.
    let mut c = agent_client::connect(&agent.socket()).await.unwrap();
    let e = c
        .get_pod_stats(pb::GetPodStatsRequest { pod: None })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    let e = c
        .get_pod_stats(pb::GetPodStatsRequest {
            pod: Some(pb::PodRef {
                r#ref: Some(pb::pod_ref::Ref::Uid("0".repeat(32))),
            }),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound);
    assert!(e.message().contains(&"0".repeat(32)), "{}", e.message());
    let e = c
        .get_container_stats(pb::GetContainerStatsRequest {
            pod: Some(pb::PodRef {
                r#ref: Some(pb::pod_ref::Ref::Uid("x".into())),
            }),
            container: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
}

#[tokio::test]
async fn the_cli_says_when_no_agent_runs() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("crilet.sock");
    let (ok, _, err) = cli(&["pods", "--socket", missing.to_str().unwrap()]);
    assert!(!ok);
    assert!(
        err.contains("crilet is not running: no socket at")
            && err.contains(missing.to_str().unwrap()),
        "{err}"
    );
    // A socket file nobody listens on (an agent killed with -9).
    let stale = dir.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    let (ok, _, err) = cli(&["stats", "--socket", stale.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("nothing answers on"), "{err}");
}

#[tokio::test]
async fn a_stale_socket_is_replaced_a_live_one_and_other_files_are_not() {
    let agent = DeadRuntimeAgent::start(&[]);
    agent.serving().await;
    // A second agent on the same socket refuses to start.
    let mut second = DeadRuntimeAgent::spawn(agent.dir.path(), &[]);
    let status = tokio::task::spawn_blocking(move || second.wait().unwrap())
        .await
        .unwrap();
    assert!(!status.success());
    assert!(
        agent.logs().contains("another process is serving on it"),
        "{}",
        agent.logs()
    );
    agent_client::pods(&agent.socket())
        .await
        .expect("the first still serves");

    // A stale socket (left by a killed agent) is replaced.
    let dir = tempfile::tempdir().unwrap();
    drop(std::os::unix::net::UnixListener::bind(dir.path().join("crilet.sock")).unwrap());
    let mut child = DeadRuntimeAgent::spawn(dir.path(), &[]);
    let served = eventually(Duration::from_secs(20), || async {
        agent_client::pods(&dir.path().join("crilet.sock"))
            .await
            .ok()
    })
    .await;
    let _ = child.kill();
    let _ = child.wait();
    assert!(served.is_some(), "the stale socket was not replaced");

    // A regular file at the path is left alone and named in the error.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("crilet.sock"), "keep me").unwrap();
    let mut child = DeadRuntimeAgent::spawn(dir.path(), &[]);
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert!(!status.success());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("crilet.sock")).unwrap(),
        "keep me"
    );
    let log = std::fs::read_to_string(dir.path().join("crilet.log")).unwrap();
    assert!(log.contains("is not a socket"), "{log}");
}

#[tokio::test]
async fn health_and_reflection_are_served() {
    let agent = DeadRuntimeAgent::start(&[]);
    agent.serving().await;
    let channel = unix_channel(&agent.socket()).await;

    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
    let reply = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "crilet.stats.v1.Stats".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        reply.status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );

    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    let mut reflection = ServerReflectionClient::new(channel);
    let request = |m| ServerReflectionRequest {
        host: String::new(),
        message_request: Some(m),
    };
    let mut replies = reflection
        .server_reflection_info(futures::stream::iter([
            request(MessageRequest::ListServices(String::new())),
            request(MessageRequest::FileContainingSymbol(
                "crilet.stats.v1.Stats".into(),
            )),
        ]))
        .await
        .unwrap()
        .into_inner();
    let Some(MessageResponse::ListServicesResponse(list)) =
        replies.message().await.unwrap().unwrap().message_response
    else {
        panic!("no list of services");
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    assert!(
        names.contains(&"crilet.stats.v1.Stats".to_string()),
        "{names:?}"
    );
    let Some(MessageResponse::FileDescriptorResponse(files)) =
        replies.message().await.unwrap().unwrap().message_response
    else {
        panic!("no file descriptor for the service");
    };
    let file: prost_types::FileDescriptorProto =
        prost::Message::decode(files.file_descriptor_proto[0].as_slice()).unwrap();
    assert_eq!(file.package(), "crilet.stats.v1");
    let methods: Vec<&str> = file.service[0].method.iter().map(|m| m.name()).collect();
    assert_eq!(
        methods,
        [
            "GetPodStats",
            "ListPodStats",
            "GetContainerStats",
            "GetSummary",
            "ListPods",
            "WatchPodStats"
        ]
    );
}

async fn unix_channel(path: &Path) -> tonic::transport::Channel {
    let path = path.to_path_buf();
    Endpoint::from_static("http://crilet.local")
        .connect_with_connector(tower::service_fn(move |_| {
            let p = path.clone();
            async move {
                let s = tokio::net::UnixStream::connect(&p).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(s))
            }
        }))
        .await
        .unwrap()
}

/// A CA and a certificate it signed for `san`, with the given usage.
struct Pki {
    ca: CertifiedIssuer<'static, KeyPair>,
}

impl Pki {
    fn new(name: &str) -> Pki {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        Pki {
            ca: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap(),
        }
    }

    /// (certificate PEM, key PEM)
    fn issue(&self, san: &str, usage: ExtendedKeyUsagePurpose) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec![san.to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, san);
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &self.ca).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

async fn tls_call(port: u16, ca: &str, identity: Option<&(String, String)>) -> Result<(), String> {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca))
        .domain_name("127.0.0.1");
    if let Some((cert, key)) = identity {
        tls = tls.identity(Identity::from_pem(cert, key));
    }
    let endpoint = Endpoint::from_shared(format!("https://127.0.0.1:{port}"))
        .unwrap()
        .tls_config(tls)
        .map_err(|e| e.to_string())?
        .timeout(Duration::from_secs(5));
    let channel = endpoint.connect().await.map_err(|e| format!("{e:?}"))?;
    StatsClient::new(channel)
        .list_pods(pb::ListPodsRequest {})
        .await
        .map(|_| ())
        .map_err(|e| format!("{e:?}"))
}

#[tokio::test]
async fn the_tcp_listener_is_tls_only_and_checks_client_certificates() {
    let pki = Pki::new("crilet test CA");
    let other = Pki::new("some other CA");
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = pki.issue("127.0.0.1", ExtendedKeyUsagePurpose::ServerAuth);
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_string_lossy().into_owned()
    };
    let port = free_port();
    let args = vec![
        "--grpc-address".to_string(),
        format!("127.0.0.1:{port}"),
        "--tls-cert-file".into(),
        write("tls.crt", &cert),
        "--tls-private-key-file".into(),
        write("tls.key", &key),
        "--client-ca-file".into(),
        write("ca.crt", &pki.ca.pem()),
    ];
    let agent = DeadRuntimeAgent::start(&args);
    agent.serving().await;
    let ca = pki.ca.pem();
    let client = pki.issue("operator", ExtendedKeyUsagePurpose::ClientAuth);
    let stranger = other.issue("stranger", ExtendedKeyUsagePurpose::ClientAuth);

    tls_call(port, &ca, Some(&client))
        .await
        .unwrap_or_else(|e| panic!("a client with a good certificate: {e}\n{}", agent.logs()));
    assert!(
        tls_call(port, &ca, None).await.is_err(),
        "no client certificate accepted"
    );
    assert!(
        tls_call(port, &ca, Some(&stranger)).await.is_err(),
        "a foreign CA's client accepted"
    );

    // Plain text on the TLS port gets nowhere.
    let plain = Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
        .unwrap()
        .timeout(Duration::from_secs(5));
    let refused = match plain.connect().await {
        Ok(ch) => StatsClient::new(ch)
            .list_pods(pb::ListPodsRequest {})
            .await
            .is_err(),
        Err(_) => true,
    };
    assert!(refused, "a plain-text client got an answer");
}

#[test]
fn a_tcp_listener_without_tls_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, _, err) = cli(&[
        "run",
        "--root-dir",
        dir.path().to_str().unwrap(),
        "--socket",
        dir.path().join("s.sock").to_str().unwrap(),
        "--grpc-address",
        "127.0.0.1:1",
    ]);
    assert!(!ok);
    assert!(
        err.contains("--grpc-address") && err.contains("--tls-cert-file"),
        "{err}"
    );
}
