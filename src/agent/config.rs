//! `crilet run` settings: kubelet-style flags over an optional
//! KubeletConfiguration-style file. Flags win over the file; the file wins
//! over the defaults.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::cli::duration::parse_duration;
use crate::runtime::DEFAULT_ENDPOINT;

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
}

/// The fields of a KubeletConfiguration that crilet honours.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigFile {
    pub api_version: Option<String>,
    pub kind: Option<String>,
    pub static_pod_path: Option<PathBuf>,
    pub file_check_frequency: Option<String>,
    pub container_runtime_endpoint: Option<String>,
    pub runtime_request_timeout: Option<String>,
    pub cgroup_root: Option<String>,
    pub logging: Option<LoggingConfig>,
    #[serde(flatten)]
    pub image_gc: crate::images::policy::ImageGcFile,
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
    pub container_runtime_endpoint: String,
    pub runtime_request_timeout: Duration,
    pub hostname_override: Option<String>,
    pub node_ip: Option<String>,
    pub root_dir: PathBuf,
    pub cgroup_root: String,
    pub log_format: LogFormat,
    pub kubeconfig: Option<PathBuf>,
    pub image_gc: crate::images::policy::GcPolicy,
}

pub const DEFAULT_ROOT_DIR: &str = "/var/lib/crilet";
pub const DEFAULT_FILE_CHECK_FREQUENCY: Duration = Duration::from_secs(20);
pub const DEFAULT_RUNTIME_REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config file {path}: {message}")]
    File { path: String, message: String },
    #[error("{0}")]
    ImageGc(#[from] crate::images::policy::PolicyError),
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
    })
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
}
