//! `crilet run` settings: flags over an optional KubeletConfiguration-style file over defaults.
//! This file is the shared loader; each feature resolves its own fields in a file beside it.
//! May import `cri`, `units`, `config`, `images::policy`, `stats`, `mirror`, `kuberuntime` and
//! `logs::layout`;
//! never the rest of `agent`.

mod features;
mod image_gc;
mod kubelet_server;
mod log_dirs;
mod logs;
pub mod mirror;
mod node_status;
mod runtime;
mod servers;
mod sources;
mod taints;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::cri::CgroupDriver;
use crate::units::parse_duration;

pub use features::{EVENTED_PLEG, FeatureGates, parse_feature_gates};
pub use kubelet_server::{
    AuthorizationConfig, AuthorizationMode, DEFAULT_PORT as DEFAULT_KUBELET_PORT,
    KubeletServerSettings,
};
pub use logs::{ContainerLogArgs, ContainerLogFile, ContainerLogSettings};
pub use node_status::{NodeStatusArgs, NodeStatusFile, NodeStatusSettings};
pub use runtime::{DEFAULT_MAX_PARALLEL_RUNTIME_MUTATIONS, DEFAULT_RUNTIME_REQUEST_TIMEOUT};
pub use servers::{AuthenticationConfig, ServeSettings, X509Config};
pub use sources::{DEFAULT_FILE_CHECK_FREQUENCY, DEFAULT_HTTP_CHECK_FREQUENCY, parse_header};
pub use taints::{
    FileTaint, NodeTaint, RegisterWithTaints, STATIC_PODS_ONLY_TAINT_KEY,
    STATIC_PODS_ONLY_TAINT_VALUE, TaintEffect, default_register_with_taints,
    parse_register_with_taints,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// The flags of `crilet run` (names as the kubelet's).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RunArgs {
    /// A KubeletConfiguration-style YAML file; flags override its fields.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Static pod manifests: a file or a directory.
    #[arg(long)]
    pub pod_manifest_path: Option<PathBuf>,
    /// How often the manifest path is re-read in full (Go duration).
    #[arg(long, value_parser = parse_duration)]
    pub file_check_frequency: Option<Duration>,
    /// Static pods from a URL serving a v1 Pod or PodList (JSON or YAML).
    #[arg(long)]
    pub manifest_url: Option<String>,
    /// A header for the manifest URL requests, 'Name: value'; repeat the
    /// flag for more (one header per flag).
    #[arg(long = "manifest-url-header", value_name = "NAME: VALUE", value_parser = parse_header)]
    pub manifest_url_header: Vec<(String, String)>,
    /// How often the manifest URL is polled (Go duration).
    #[arg(long, value_parser = parse_duration)]
    pub http_check_frequency: Option<Duration>,
    /// PEM bundle of CAs trusted for an https manifest URL, besides the system's.
    #[arg(long)]
    pub manifest_url_ca_file: Option<PathBuf>,
    /// Manifests (or their directory) writable by group or others or owned
    /// by a user other than root or crilet's, and a manifest URL over plain
    /// http from a non-loopback host: `warn` once per file (the default) or
    /// refuse them (`strict`). Whoever can change them is root on the node.
    #[arg(long, value_enum)]
    pub manifest_trust: Option<crate::config::trust::ManifestTrust>,
    /// The CRI endpoint.
    #[arg(long, env = "CONTAINER_RUNTIME_ENDPOINT")]
    pub container_runtime_endpoint: Option<String>,
    /// Deadline of each CRI call (image pulls get longer).
    #[arg(long, value_parser = parse_duration)]
    pub runtime_request_timeout: Option<Duration>,
    /// At most this many CRI calls that change sandboxes and containers
    /// (RunPodSandbox, CreateContainer, StartContainer, StopPodSandbox,
    /// RemoveContainer, RemovePodSandbox) at once; 0 is no bound. A burst
    /// of pod starts finishes sooner when the runtime gets a few at a time.
    #[arg(long, value_name = "N")]
    pub max_parallel_runtime_mutations: Option<usize>,
    /// The node name (default: the hostname, lowercased).
    #[arg(long)]
    pub hostname_override: Option<String>,
    /// The node's IP (default: the first non-loopback local IPv4).
    #[arg(long)]
    pub node_ip: Option<String>,
    /// Where crilet keeps pod volumes, termination-message files and its
    /// serving certificate.
    #[arg(long)]
    pub root_dir: Option<PathBuf>,
    /// Container logs go to DIR/NAMESPACE_POD_UID/CONTAINER/RESTARTS.log,
    /// as the kubelet's podLogsDir (default /var/log/pods). An absolute,
    /// normalized, ASCII path.
    #[arg(long, value_name = "DIR")]
    pub pod_logs_dir: Option<String>,
    /// crilet's own (the kubelet hard-codes /var/log/containers): the
    /// directory of the symlinks DIR/POD_NAMESPACE_CONTAINER-ID.log that
    /// log shippers tail, one per container instance (default
    /// /var/log/containers). An absolute, normalized, ASCII path.
    #[arg(long, value_name = "DIR")]
    pub container_logs_dir: Option<String>,
    /// cgroupfs path under which pod cgroups are made ("/" puts them in /kubepods).
    #[arg(long)]
    pub cgroup_root: Option<String>,
    /// How pod cgroups are made: cgroupfs (the default) or systemd. Must
    /// match the runtime's driver.
    #[arg(long, value_name = "cgroupfs|systemd")]
    pub cgroup_driver: Option<CgroupDriver>,
    /// Raise every container's oom_score_adj to at least crilet's own, as
    /// containerd's restrict_oom_score_adj does: for a runtime that cannot
    /// lower scores (no CAP_SYS_RESOURCE, rootless) and does not restrict
    /// them itself (CRI-O), where a node-critical or Guaranteed pod's -997
    /// fails every CreateContainer.
    #[arg(long)]
    pub restrict_oom_score_adj: bool,
    /// Log format.
    #[arg(long, value_enum)]
    pub log_format: Option<LogFormat>,
    /// Log verbosity, as the kubelet's klog `--v`: 0-3 info; 4 and up add
    /// crilet's debug lines (each CRI call with its duration, each pod
    /// sync as a span: one pod's start step by step); 6 and up its trace
    /// lines. CRILET_LOG (an env-filter) overrides it.
    #[arg(long = "v", short = 'v', value_name = "LEVEL")]
    pub verbosity: Option<u8>,
    /// Feature gates, e.g. `EventedPLEG=false` (relist every second
    /// instead of following the runtime's container events).
    #[arg(long, value_name = "NAME=BOOL,...", value_parser = parse_feature_gates)]
    pub feature_gates: Option<FeatureGates>,
    /// Kubeconfig with the node's credentials: register the Node and keep
    /// mirror pods on the API server. Without it crilet runs standalone.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// A kubeconfig with a bootstrap token: when `--kubeconfig` is missing
    /// or its certificate has expired, ask for a client certificate with a
    /// CertificateSigningRequest and write `--kubeconfig` and the
    /// certificate (under `--cert-dir`) once it is issued.
    #[arg(long)]
    pub bootstrap_kubeconfig: Option<PathBuf>,
    /// Where the TLS bootstrap keeps the node's certificates (default
    /// `<root-dir>/pki`).
    #[arg(long)]
    pub cert_dir: Option<PathBuf>,
    /// Ask for a new client certificate at 70-90 % of the current one's
    /// lifetime (`rotateCertificates` in the config file).
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub rotate_certificates: Option<bool>,
    /// The kubelet server's certificate through a CSR to the
    /// `kubernetes.io/kubelet-serving` signer, for the node's name and IP,
    /// renewed as the client's (`serverTLSBootstrap` in the config file).
    /// Nothing approves those CSRs on its own: see docs/joining.md.
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub rotate_server_certificates: Option<bool>,
    /// Taints the Node is registered with, as the kubelet's flag
    /// (`key=value:Effect,key2:Effect`; effects NoSchedule,
    /// PreferNoSchedule, NoExecute). Replaces crilet's default
    /// `crilet.dev/static-pods-only=true:NoSchedule`; empty: no taint. Set
    /// only when the Node is created.
    #[arg(long, value_name = "KEY=VALUE:EFFECT,...", value_parser = parse_register_with_taints)]
    pub register_with_taints: Option<RegisterWithTaints>,
    /// Image garbage collection (`--image-gc-*`, `--pinned-image`, ...).
    #[command(flatten)]
    pub image_gc: Box<crate::images::policy::ImageGcArgs>,
    /// Container log rotation (`--container-log-*`).
    #[command(flatten)]
    pub container_logs: ContainerLogArgs,
    /// The Node's capacity, allocatable and conditions (`--kube-reserved`,
    /// `--eviction-hard`, `--max-pods`, ...).
    #[command(flatten)]
    pub node_status: NodeStatusArgs,
    /// crilet's gRPC API (stats, pods) on this unix socket, mode 0600.
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// How often pod, container and node stats are sampled (Go duration).
    #[arg(long, value_parser = parse_duration)]
    pub stats_period: Option<Duration>,
    /// Serve /stats/summary, /metrics, /healthz and /pods over plain HTTP on
    /// HOST:PORT (":PORT" means loopback). Off unless set.
    #[arg(long)]
    pub http_address: Option<String>,
    /// Also serve the gRPC API on this TCP HOST:PORT, with TLS only (needs
    /// --tls-cert-file and --tls-private-key-file).
    #[arg(long)]
    pub grpc_address: Option<String>,
    /// PEM certificate (chain) of the kubelet server and the TCP gRPC
    /// listener. Without it the kubelet server uses a self-signed one
    /// under `<root-dir>/pki/`.
    #[arg(long)]
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key of --tls-cert-file.
    #[arg(long)]
    pub tls_private_key_file: Option<PathBuf>,
    /// Client certificates signed by this CA authenticate (user = CN,
    /// groups = O): requested on the kubelet server, required on the TCP
    /// gRPC listener.
    #[arg(long)]
    pub client_ca_file: Option<PathBuf>,
    /// The kubelet server's IP address (all interfaces by default).
    #[arg(long, value_name = "IP")]
    pub address: Option<String>,
    /// The kubelet server's HTTPS port (logs, exec, attach, port-forward,
    /// /pods, /stats, /metrics); 0 turns it off. Default 10250.
    #[arg(long)]
    pub port: Option<u16>,
    /// Let requests without credentials through as system:anonymous.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub anonymous_auth: Option<bool>,
    /// AlwaysAllow or Webhook (SubjectAccessReviews; the default with
    /// --kubeconfig).
    #[arg(long, value_enum)]
    pub authorization_mode: Option<AuthorizationMode>,
    /// Check bearer tokens with TokenReviews (default: on with --kubeconfig).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub authentication_token_webhook: Option<bool>,
    /// How long TokenReview answers are cached (Go duration; default 2m).
    #[arg(long, value_parser = parse_duration)]
    pub authentication_token_webhook_cache_ttl: Option<Duration>,
    /// How long allowed SubjectAccessReview answers are cached (default 5m).
    #[arg(long, value_parser = parse_duration)]
    pub authorization_webhook_cache_authorized_ttl: Option<Duration>,
    /// How long denied SubjectAccessReview answers are cached (default 30s).
    #[arg(long, value_parser = parse_duration)]
    pub authorization_webhook_cache_unauthorized_ttl: Option<Duration>,
}

/// The fields of a KubeletConfiguration that crilet honours.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigFile {
    pub api_version: Option<String>,
    pub kind: Option<String>,
    pub static_pod_path: Option<PathBuf>,
    pub file_check_frequency: Option<String>,
    #[serde(rename = "staticPodURL")]
    pub static_pod_url: Option<String>,
    /// Header name → values, as the KubeletConfiguration field.
    #[serde(rename = "staticPodURLHeader")]
    pub static_pod_url_header: Option<BTreeMap<String, Vec<String>>>,
    pub http_check_frequency: Option<String>,
    pub container_runtime_endpoint: Option<String>,
    pub runtime_request_timeout: Option<String>,
    /// crilet's own field (no KubeletConfiguration has it), as the flag.
    pub max_parallel_runtime_mutations: Option<usize>,
    pub cgroup_root: Option<String>,
    /// The kubelet's field; relative: to the file's directory.
    pub pod_logs_dir: Option<String>,
    /// crilet's own field, as `--container-logs-dir`.
    pub container_logs_dir: Option<String>,
    /// `cgroupfs` or `systemd`; checked when resolved, naming the field.
    pub cgroup_driver: Option<String>,
    pub logging: Option<LoggingConfig>,
    #[serde(flatten)]
    pub image_gc: crate::images::policy::ImageGcFile,
    #[serde(flatten)]
    pub container_logs: ContainerLogFile,
    #[serde(flatten)]
    pub node_status: NodeStatusFile,
    pub tls_cert_file: Option<PathBuf>,
    pub tls_private_key_file: Option<PathBuf>,
    pub authentication: Option<AuthenticationConfig>,
    pub authorization: Option<AuthorizationConfig>,
    /// The kubelet server's IP address.
    pub address: Option<String>,
    /// The kubelet server's port (0: off).
    pub port: Option<i64>,
    /// Gate name → enabled, as the KubeletConfiguration field.
    pub feature_gates: Option<BTreeMap<String, bool>>,
    /// The Node's registration taints; `[]`: none.
    pub register_with_taints: Option<Vec<FileTaint>>,
    /// The client certificate's rotation, as `--rotate-certificates`.
    pub rotate_certificates: Option<bool>,
    /// As `--rotate-server-certificates`.
    #[serde(rename = "serverTLSBootstrap")]
    pub server_tls_bootstrap: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct LoggingConfig {
    pub format: Option<LogFormat>,
    pub verbosity: Option<u8>,
}

/// The log filter for a klog verbosity.
pub fn log_filter(verbosity: u8) -> &'static str {
    match verbosity {
        0..=3 => "info",
        4 | 5 => "info,crilet=debug",
        _ => "info,crilet=trace",
    }
}

/// Resolved settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub pod_manifest_path: Option<PathBuf>,
    pub file_check_frequency: Duration,
    pub manifest_url: Option<String>,
    pub manifest_url_headers: Vec<(String, String)>,
    pub http_check_frequency: Duration,
    pub manifest_url_ca_file: Option<PathBuf>,
    pub manifest_trust: crate::config::trust::ManifestTrust,
    pub container_runtime_endpoint: String,
    pub runtime_request_timeout: Duration,
    /// 0: unbounded.
    pub max_parallel_runtime_mutations: usize,
    pub hostname_override: Option<String>,
    pub node_ip: Option<String>,
    pub root_dir: PathBuf,
    /// `--pod-logs-dir` and `--container-logs-dir`.
    pub log_dirs: crate::logs::layout::LogDirs,
    pub cgroup_root: String,
    pub cgroup_driver: CgroupDriver,
    pub restrict_oom_score_adj: bool,
    pub log_format: LogFormat,
    /// `--v` / `logging.verbosity` (0 unless given).
    pub verbosity: u8,
    /// The `EventedPLEG` gate as set by the flag or the file; `None`: not
    /// set, on unless the runtime has a known bug with subscribers
    /// (`pleg::event_choice`).
    pub evented_pleg: Option<bool>,
    pub kubeconfig: Option<PathBuf>,
    /// The TLS bootstrap and the client certificate's rotation.
    pub certificates: mirror::CertificateSettings,
    /// The taints the Node is created with (default: static pods only).
    pub register_with_taints: Vec<NodeTaint>,
    pub image_gc: crate::images::policy::GcPolicy,
    pub container_logs: ContainerLogSettings,
    pub node_status: NodeStatusSettings,
    pub serve: ServeSettings,
    pub kubelet_server: KubeletServerSettings,
}

pub const DEFAULT_ROOT_DIR: &str = "/var/lib/crilet";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config file {path}: {message}")]
    File { path: String, message: String },
    #[error("{0}")]
    ImageGc(#[from] crate::images::policy::PolicyError),
    #[error("{message}")]
    Flag { message: String },
}

/// Largest config file read (1 MiB, as a manifest): a KubeletConfiguration
/// is a few kilobytes, and `--config /dev/zero` must not fill the memory.
pub const MAX_CONFIG_FILE_BYTES: usize = crate::pod::document::MAX_MANIFEST_BYTES;

/// Parses a config file's text (pure); `origin` names it in errors. The
/// size and the YAML limits (nesting, aliases) are those of a manifest.
pub fn parse_config_file(origin: &str, text: &str) -> Result<ConfigFile, ConfigError> {
    let err = |message: String| ConfigError::File {
        path: origin.to_string(),
        message,
    };
    if text.len() > MAX_CONFIG_FILE_BYTES {
        return Err(err(too_large()));
    }
    let file: ConfigFile =
        serde_saphyr::from_str_with_options(text, crate::pod::document::yaml_options())
            .map_err(|e| err(crate::pod::document::yaml_error(&e)))?;
    if let Some(kind) = &file.kind {
        if kind != "KubeletConfiguration" {
            return Err(err(format!(
                "kind is {kind:?}, expected KubeletConfiguration"
            )));
        }
    }
    if let Some(v) = &file.api_version {
        if !v.starts_with("kubelet.config.k8s.io/") {
            return Err(err(format!(
                "apiVersion is {v:?}, expected kubelet.config.k8s.io/v1beta1"
            )));
        }
    }
    Ok(file)
}

/// A Go-duration field of the config file; an error names the file and the field.
fn file_duration(
    origin: &str,
    field: &str,
    value: Option<&str>,
) -> Result<Option<Duration>, ConfigError> {
    value
        .map(parse_duration)
        .transpose()
        .map_err(|e| ConfigError::File {
            path: origin.to_string(),
            message: format!("{field}: {e}"),
        })
}

/// Flags over file over defaults (pure, given the parsed file).
pub fn resolve(args: &RunArgs, file: &ConfigFile, origin: &str) -> Result<Settings, ConfigError> {
    // The order of the fallible steps fixes which error is reported first.
    let sources = sources::resolve_sources(args, file, origin)?;
    let runtime = runtime::resolve_runtime(args, file, origin)?;
    Ok(Settings {
        pod_manifest_path: sources.pod_manifest_path,
        file_check_frequency: sources.file_check_frequency,
        manifest_url: sources.manifest_url,
        manifest_url_headers: sources.manifest_url_headers,
        http_check_frequency: sources.http_check_frequency,
        manifest_url_ca_file: sources.manifest_url_ca_file,
        manifest_trust: args.manifest_trust.unwrap_or_default(),
        container_runtime_endpoint: runtime.container_runtime_endpoint,
        runtime_request_timeout: runtime.runtime_request_timeout,
        max_parallel_runtime_mutations: runtime.max_parallel_runtime_mutations,
        hostname_override: args.hostname_override.clone(),
        node_ip: args.node_ip.clone(),
        root_dir: args
            .root_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_ROOT_DIR)),
        log_dirs: log_dirs::resolve_log_dirs(args, file, origin)?,
        cgroup_root: runtime.cgroup_root,
        cgroup_driver: runtime.cgroup_driver,
        restrict_oom_score_adj: args.restrict_oom_score_adj,
        log_format: args
            .log_format
            .or(file.logging.as_ref().and_then(|l| l.format))
            .unwrap_or_default(),
        verbosity: args
            .verbosity
            .or(file.logging.as_ref().and_then(|l| l.verbosity))
            .unwrap_or(0),
        evented_pleg: features::resolve_gate(args, file, origin, EVENTED_PLEG)?,
        kubeconfig: mirror::resolve_kubeconfig(args),
        certificates: mirror::resolve_certificates(
            args,
            file,
            args.root_dir
                .as_deref()
                .unwrap_or(Path::new(DEFAULT_ROOT_DIR)),
        )?,
        register_with_taints: taints::resolve_register_with_taints(args, file, origin)?,
        image_gc: image_gc::resolve_image_gc(args, file)?,
        container_logs: logs::resolve_container_logs(args, file, origin)?,
        node_status: node_status::resolve_node_status(args, file, origin)?,
        serve: servers::resolve_serve(args, file)?,
        kubelet_server: kubelet_server::resolve_kubelet_server(args, file, origin)?,
    })
}

/// Reads the config file named by the flags (if any) and resolves.
pub fn load(args: &RunArgs) -> Result<Settings, ConfigError> {
    let Some(path) = &args.config else {
        return resolve(args, &ConfigFile::default(), "");
    };
    let origin = path.display().to_string();
    let text = read_config_file(path).map_err(|message| ConfigError::File {
        path: origin.clone(),
        message,
    })?;
    let file = parse_config_file(&origin, &text)?;
    resolve(args, &file, &origin)
}

/// The file's text, reading at most one byte past [`MAX_CONFIG_FILE_BYTES`].
fn read_config_file(path: &std::path::Path) -> Result<String, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() > MAX_CONFIG_FILE_BYTES {
        return Err(too_large());
    }
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "not valid UTF-8 (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })
}

fn too_large() -> String {
    format!("larger than the {MAX_CONFIG_FILE_BYTES}-byte limit of a config file; refused")
}

/// `crilet run`'s flags alone, parsed as clap parses them (for tests).
#[cfg(test)]
pub(crate) fn try_parse_flags(args: &[&str]) -> Result<RunArgs, clap::Error> {
    use clap::Parser;
    #[derive(Debug, Parser)]
    struct Flags {
        #[command(flatten)]
        run: RunArgs,
    }
    Flags::try_parse_from(std::iter::once("crilet").chain(args.iter().copied())).map(|f| f.run)
}

/// As [`try_parse_flags`], for flags that parse.
#[cfg(test)]
pub(crate) fn parse_flags(args: &[&str]) -> RunArgs {
    try_parse_flags(args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

#[cfg(test)]
mod tests;
