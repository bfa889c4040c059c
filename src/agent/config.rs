//! `crilet run` settings: kubelet-style flags over an optional
//! KubeletConfiguration-style file. Flags win over the file; the file wins
//! over the defaults.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::cri::DEFAULT_ENDPOINT;
use crate::units::parse_duration;

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
    /// The CRI endpoint.
    #[arg(long, env = "CONTAINER_RUNTIME_ENDPOINT")]
    pub container_runtime_endpoint: Option<String>,
    /// Deadline of each CRI call (image pulls get longer).
    #[arg(long, value_parser = parse_duration)]
    pub runtime_request_timeout: Option<Duration>,
    /// The node name (default: the hostname, lowercased).
    #[arg(long)]
    pub hostname_override: Option<String>,
    /// The node's IP (default: the first non-loopback local IPv4).
    #[arg(long)]
    pub node_ip: Option<String>,
    /// Where crilet keeps pod logs and volumes.
    #[arg(long)]
    pub root_dir: Option<PathBuf>,
    /// cgroupfs path under which pod cgroups are made ("/" puts them in /kubepods).
    #[arg(long)]
    pub cgroup_root: Option<String>,
    /// Log format.
    #[arg(long, value_enum)]
    pub log_format: Option<LogFormat>,
    /// Kubeconfig with the node's credentials: register the Node and keep
    /// mirror pods on the API server. Without it crilet runs standalone.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Image garbage collection (`--image-gc-*`, `--pinned-image`, ...).
    #[command(flatten)]
    pub image_gc: Box<crate::images::policy::ImageGcArgs>,
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
    /// PEM certificate (chain) of the TCP gRPC listener.
    #[arg(long)]
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key of the TCP gRPC listener.
    #[arg(long)]
    pub tls_private_key_file: Option<PathBuf>,
    /// Require TCP gRPC clients to present a certificate signed by this CA.
    #[arg(long)]
    pub client_ca_file: Option<PathBuf>,
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
    pub cgroup_root: Option<String>,
    pub logging: Option<LoggingConfig>,
    #[serde(flatten)]
    pub image_gc: crate::images::policy::ImageGcFile,
    pub tls_cert_file: Option<PathBuf>,
    pub tls_private_key_file: Option<PathBuf>,
    pub authentication: Option<AuthenticationConfig>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct AuthenticationConfig {
    pub x509: Option<X509Config>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct X509Config {
    #[serde(rename = "clientCAFile")]
    pub client_ca_file: Option<PathBuf>,
}

/// Where and how crilet serves its APIs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeSettings {
    pub socket: PathBuf,
    pub stats_period: Duration,
    pub http_address: Option<std::net::SocketAddr>,
    pub grpc_address: Option<String>,
    pub tls_cert_file: Option<PathBuf>,
    pub tls_private_key_file: Option<PathBuf>,
    pub client_ca_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct LoggingConfig {
    pub format: Option<LogFormat>,
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
    pub container_runtime_endpoint: String,
    pub runtime_request_timeout: Duration,
    pub hostname_override: Option<String>,
    pub node_ip: Option<String>,
    pub root_dir: PathBuf,
    pub cgroup_root: String,
    pub log_format: LogFormat,
    pub kubeconfig: Option<PathBuf>,
    pub image_gc: crate::images::policy::GcPolicy,
    pub serve: ServeSettings,
}

pub const DEFAULT_ROOT_DIR: &str = "/var/lib/crilet";
pub const DEFAULT_FILE_CHECK_FREQUENCY: Duration = Duration::from_secs(20);
pub const DEFAULT_HTTP_CHECK_FREQUENCY: Duration =
    crate::config::http::DEFAULT_HTTP_CHECK_FREQUENCY;
pub const DEFAULT_RUNTIME_REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config file {path}: {message}")]
    File { path: String, message: String },
    #[error("{0}")]
    ImageGc(#[from] crate::images::policy::PolicyError),
    #[error("{message}")]
    Flag { message: String },
}

/// Parses a config file's text (pure); `origin` names it in errors.
pub fn parse_config_file(origin: &str, text: &str) -> Result<ConfigFile, ConfigError> {
    let err = |message: String| ConfigError::File {
        path: origin.to_string(),
        message,
    };
    let file: ConfigFile = serde_saphyr::from_str(text).map_err(|e| err(e.to_string()))?;
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

/// Flags over file over defaults (pure, given the parsed file).
pub fn resolve(args: &RunArgs, file: &ConfigFile, origin: &str) -> Result<Settings, ConfigError> {
    let dur = |field: &str, v: &Option<String>| -> Result<Option<Duration>, ConfigError> {
        v.as_deref()
            .map(parse_duration)
            .transpose()
            .map_err(|e| ConfigError::File {
                path: origin.to_string(),
                message: format!("{field}: {e}"),
            })
    };
    let file_check = dur("fileCheckFrequency", &file.file_check_frequency)?;
    let http_check = dur("httpCheckFrequency", &file.http_check_frequency)?;
    let request_timeout = dur("runtimeRequestTimeout", &file.runtime_request_timeout)?;
    Ok(Settings {
        pod_manifest_path: args
            .pod_manifest_path
            .clone()
            .or_else(|| file.static_pod_path.clone()),
        file_check_frequency: args
            .file_check_frequency
            .or(file_check)
            .unwrap_or(DEFAULT_FILE_CHECK_FREQUENCY),
        manifest_url: args
            .manifest_url
            .clone()
            .or_else(|| file.static_pod_url.clone()),
        manifest_url_headers: url_headers(args, file),
        http_check_frequency: args
            .http_check_frequency
            .or(http_check)
            .unwrap_or(DEFAULT_HTTP_CHECK_FREQUENCY),
        manifest_url_ca_file: args.manifest_url_ca_file.clone(),
        container_runtime_endpoint: args
            .container_runtime_endpoint
            .clone()
            .or_else(|| file.container_runtime_endpoint.clone())
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string()),
        runtime_request_timeout: args
            .runtime_request_timeout
            .or(request_timeout)
            .unwrap_or(DEFAULT_RUNTIME_REQUEST_TIMEOUT),
        hostname_override: args.hostname_override.clone(),
        node_ip: args.node_ip.clone(),
        root_dir: args
            .root_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_ROOT_DIR)),
        cgroup_root: args
            .cgroup_root
            .clone()
            .or_else(|| file.cgroup_root.clone())
            .unwrap_or_else(|| "/".to_string()),
        log_format: args
            .log_format
            .or(file.logging.as_ref().and_then(|l| l.format))
            .unwrap_or_default(),
        kubeconfig: args.kubeconfig.clone(),
        image_gc: crate::images::policy::resolve(&args.image_gc, &file.image_gc)?,
        serve: resolve_serve(args, file)?,
    })
}

fn flag_error(message: String) -> ConfigError {
    ConfigError::Flag { message }
}

/// The API settings: the TCP listener only with TLS, a sane stats period.
fn resolve_serve(args: &RunArgs, file: &ConfigFile) -> Result<ServeSettings, ConfigError> {
    let stats_period = args
        .stats_period
        .unwrap_or(crate::stats::collector::DEFAULT_STATS_PERIOD);
    if stats_period < Duration::from_millis(100) {
        return Err(flag_error(format!(
            "--stats-period {stats_period:?} is too short (at least 100ms)"
        )));
    }
    let http_address = args
        .http_address
        .as_deref()
        .map(|a| {
            crate::stats::http::parse_address(a)
                .map_err(|e| flag_error(format!("--http-address: {e}")))
        })
        .transpose()?;
    let tls_cert_file = args
        .tls_cert_file
        .clone()
        .or_else(|| file.tls_cert_file.clone());
    let tls_private_key_file = args
        .tls_private_key_file
        .clone()
        .or_else(|| file.tls_private_key_file.clone());
    let client_ca_file = args.client_ca_file.clone().or_else(|| {
        file.authentication
            .as_ref()
            .and_then(|a| a.x509.as_ref())
            .and_then(|x| x.client_ca_file.clone())
    });
    if let Some(addr) = &args.grpc_address {
        if tls_cert_file.is_none() || tls_private_key_file.is_none() {
            return Err(flag_error(format!(
                "--grpc-address {addr} serves TLS only: --tls-cert-file and --tls-private-key-file are required"
            )));
        }
    }
    Ok(ServeSettings {
        socket: args
            .socket
            .clone()
            .unwrap_or_else(|| PathBuf::from(crate::stats::grpc::DEFAULT_SOCKET)),
        stats_period,
        http_address,
        grpc_address: args.grpc_address.clone(),
        tls_cert_file,
        tls_private_key_file,
        client_ca_file,
    })
}

/// `--manifest-url-header` flags replace the file's `staticPodURLHeader`.
fn url_headers(args: &RunArgs, file: &ConfigFile) -> Vec<(String, String)> {
    if !args.manifest_url_header.is_empty() {
        return args.manifest_url_header.clone();
    }
    let map = file.static_pod_url_header.iter().flatten();
    map.flat_map(|(name, values)| values.iter().map(|v| (name.clone(), v.clone())))
        .collect()
}

/// Parses `--manifest-url-header 'Name: value'`: split at the first colon,
/// so a value may hold colons and commas.
pub fn parse_header(text: &str) -> Result<(String, String), String> {
    let Some((name, value)) = text.split_once(':') else {
        return Err(format!("{text:?} is not 'Name: value'"));
    };
    let name = name.trim();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(format!("{text:?}: the header name {name:?} is not valid"));
    }
    Ok((name.to_string(), value.trim().to_string()))
}

#[cfg(test)]
mod url_tests {
    use super::*;

    #[test]
    fn manifest_url_settings_from_flags_and_file() {
        let text = "staticPodURL: http://cfg/pods\nhttpCheckFrequency: 1m\nstaticPodURLHeader:\n  X-B: [b1, b2]\n  X-A: [a]\n";
        let f = parse_config_file("k.yaml", text).unwrap();
        let s = resolve(&RunArgs::default(), &f, "k.yaml").unwrap();
        assert_eq!(s.manifest_url.as_deref(), Some("http://cfg/pods"));
        assert_eq!(s.http_check_frequency, Duration::from_secs(60));
        let pairs = |p: &[(&str, &str)]| -> Vec<(String, String)> {
            p.iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            s.manifest_url_headers,
            pairs(&[("X-A", "a"), ("X-B", "b1"), ("X-B", "b2")])
        );

        let args = RunArgs {
            manifest_url: Some("https://other/pods".into()),
            manifest_url_header: pairs(&[("Authorization", "Bearer t")]),
            http_check_frequency: Some(Duration::from_secs(5)),
            manifest_url_ca_file: Some("/etc/ca.pem".into()),
            ..Default::default()
        };
        let s = resolve(&args, &f, "k.yaml").unwrap();
        assert_eq!(s.manifest_url.as_deref(), Some("https://other/pods"));
        assert_eq!(
            s.manifest_url_headers,
            pairs(&[("Authorization", "Bearer t")])
        );
        assert_eq!(s.http_check_frequency, Duration::from_secs(5));
        assert_eq!(s.manifest_url_ca_file, Some("/etc/ca.pem".into()));

        let s = resolve(&RunArgs::default(), &ConfigFile::default(), "").unwrap();
        assert_eq!(
            (s.manifest_url, s.http_check_frequency),
            (None, Duration::from_secs(20))
        );

        let f = parse_config_file("k.yaml", "httpCheckFrequency: often\n").unwrap();
        let err = resolve(&RunArgs::default(), &f, "k.yaml")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("httpCheckFrequency") && err.contains("k.yaml"),
            "{err}"
        );
    }

    #[test]
    fn header_flag_parsing() {
        let ok = |t: &str| parse_header(t).unwrap();
        assert_eq!(ok("X-Token: a:b, c"), ("X-Token".into(), "a:b, c".into()));
        assert_eq!(
            ok("Accept:application/json"),
            ("Accept".into(), "application/json".into())
        );
        assert_eq!(ok("X-Empty:"), ("X-Empty".into(), String::new()));
        for bad in ["no colon", ": value", "two words: v"] {
            assert!(parse_header(bad).is_err(), "{bad}");
        }
    }
}

/// Reads the config file named by the flags (if any) and resolves.
pub fn load(args: &RunArgs) -> Result<Settings, ConfigError> {
    let Some(path) = &args.config else {
        return resolve(args, &ConfigFile::default(), "");
    };
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError::File {
        path: origin.clone(),
        message: e.to_string(),
    })?;
    let file = parse_config_file(&origin, &text)?;
    resolve(args, &file, &origin)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nstaticPodPath: /etc/kubernetes/manifests\nfileCheckFrequency: 5s\ncontainerRuntimeEndpoint: unix:///run/x.sock\ncgroupRoot: /crilet\nlogging:\n  format: json\nauthentication: {}\n";

    #[test]
    fn defaults_without_file_or_flags() {
        let s = resolve(&RunArgs::default(), &ConfigFile::default(), "").unwrap();
        assert_eq!(s.pod_manifest_path, None);
        assert_eq!(s.file_check_frequency, Duration::from_secs(20));
        assert_eq!(s.container_runtime_endpoint, DEFAULT_ENDPOINT);
        assert_eq!(s.root_dir, PathBuf::from("/var/lib/crilet"));
        assert_eq!(s.cgroup_root, "/");
        assert_eq!(s.log_format, LogFormat::Text);
    }

    #[test]
    fn file_fields_apply_and_unknown_fields_are_tolerated() {
        let f = parse_config_file("k.yaml", FILE).unwrap();
        let s = resolve(&RunArgs::default(), &f, "k.yaml").unwrap();
        assert_eq!(
            s.pod_manifest_path,
            Some("/etc/kubernetes/manifests".into())
        );
        assert_eq!(s.file_check_frequency, Duration::from_secs(5));
        assert_eq!(s.container_runtime_endpoint, "unix:///run/x.sock");
        assert_eq!(s.cgroup_root, "/crilet");
        assert_eq!(s.log_format, LogFormat::Json);
    }

    #[test]
    fn flags_override_the_file() {
        let f = parse_config_file("k.yaml", FILE).unwrap();
        let args = RunArgs {
            pod_manifest_path: Some("/srv/pods".into()),
            file_check_frequency: Some(Duration::from_secs(1)),
            container_runtime_endpoint: Some("unix:///y.sock".into()),
            cgroup_root: Some("/other".into()),
            log_format: Some(LogFormat::Text),
            ..Default::default()
        };
        let s = resolve(&args, &f, "k.yaml").unwrap();
        assert_eq!(s.pod_manifest_path, Some("/srv/pods".into()));
        assert_eq!(s.file_check_frequency, Duration::from_secs(1));
        assert_eq!(s.container_runtime_endpoint, "unix:///y.sock");
        assert_eq!(s.cgroup_root, "/other");
        assert_eq!(s.log_format, LogFormat::Text);
    }

    #[test]
    fn bad_files_name_the_file_and_the_problem() {
        let cases = [
            ("kind: Pod\n", "expected KubeletConfiguration"),
            ("apiVersion: v1\n", "expected kubelet.config.k8s.io/v1beta1"),
            ("staticPodPath: [1, 2\n", "k.yaml"),
        ];
        for (text, want) in cases {
            let err = parse_config_file("k.yaml", text).unwrap_err().to_string();
            assert!(
                err.contains(want) && err.contains("k.yaml"),
                "{text:?}: {err}"
            );
        }
        let f = parse_config_file("k.yaml", "fileCheckFrequency: soon\n").unwrap();
        let err = resolve(&RunArgs::default(), &f, "k.yaml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("fileCheckFrequency"), "{err}");
    }

    #[test]
    fn image_gc_fields_come_from_the_file_and_bad_ones_name_the_flag() {
        let f = parse_config_file(
            "k.yaml",
            "imageGCHighThresholdPercent: 70\nimageGCLowThresholdPercent: 60\nimageMinimumGCAge: 1m\npinnedImages: [a:1]\n",
        )
        .unwrap();
        let s = resolve(&RunArgs::default(), &f, "k.yaml").unwrap();
        assert_eq!(
            (
                s.image_gc.high_threshold_percent,
                s.image_gc.low_threshold_percent
            ),
            (70, 60)
        );
        assert_eq!(s.image_gc.min_age, Duration::from_secs(60));
        assert_eq!(s.image_gc.pinned_images, ["a:1"]);
        let f = parse_config_file("k.yaml", "imageGCLowThresholdPercent: 95\n").unwrap();
        let err = resolve(&RunArgs::default(), &f, "k.yaml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("--image-gc-low-threshold"), "{err}");
    }

    #[test]
    fn missing_file_is_an_error_naming_it() {
        let args = RunArgs {
            config: Some("/no/such/crilet.yaml".into()),
            ..Default::default()
        };
        let err = load(&args).unwrap_err().to_string();
        assert!(err.contains("/no/such/crilet.yaml"), "{err}");
    }

    #[test]
    fn serve_settings_default_to_the_socket_only() {
        let s = resolve(&RunArgs::default(), &ConfigFile::default(), "")
            .unwrap()
            .serve;
        assert_eq!(s.socket, PathBuf::from("/run/crilet/crilet.sock"));
        assert_eq!(s.stats_period, Duration::from_secs(10));
        assert_eq!(s.http_address, None);
        assert_eq!(s.grpc_address, None);
    }

    #[test]
    fn the_tcp_listener_needs_tls_and_bad_serve_flags_are_named() {
        let no_tls = RunArgs {
            grpc_address: Some("127.0.0.1:10250".into()),
            ..Default::default()
        };
        let err = resolve(&no_tls, &ConfigFile::default(), "")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--grpc-address") && err.contains("--tls-cert-file"),
            "{err}"
        );

        let f = parse_config_file(
            "k.yaml",
            "tlsCertFile: /etc/crilet/tls.crt\ntlsPrivateKeyFile: /etc/crilet/tls.key\nauthentication:\n  x509:\n    clientCAFile: /etc/crilet/ca.crt\n",
        )
        .unwrap();
        let s = resolve(&no_tls, &f, "k.yaml").unwrap().serve;
        assert_eq!(s.tls_cert_file, Some("/etc/crilet/tls.crt".into()));
        assert_eq!(s.client_ca_file, Some("/etc/crilet/ca.crt".into()));

        let short = RunArgs {
            stats_period: Some(Duration::from_millis(10)),
            ..Default::default()
        };
        let err = resolve(&short, &ConfigFile::default(), "")
            .unwrap_err()
            .to_string();
        assert!(err.contains("--stats-period"), "{err}");
        let bad_http = RunArgs {
            http_address: Some("localhost".into()),
            ..Default::default()
        };
        let err = resolve(&bad_http, &ConfigFile::default(), "")
            .unwrap_err()
            .to_string();
        assert!(err.contains("--http-address"), "{err}");
        let http = RunArgs {
            http_address: Some(":10255".into()),
            ..Default::default()
        };
        let s = resolve(&http, &ConfigFile::default(), "").unwrap().serve;
        assert_eq!(s.http_address, Some("127.0.0.1:10255".parse().unwrap()));
    }
}
