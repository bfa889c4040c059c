//! Entry points of the fuzz targets (`fuzz/fuzz_targets/*.rs`) and of the
//! corpus replay test: one function per target, taking raw bytes and running
//! the same code the agent runs on such input. Not an API.
//!
//! Invariant: an entry function panics only when crilet's code does (or when
//! one of the properties checked here, each a documented invariant of the
//! code under test, is broken); every error is an expected outcome. Nothing
//! here reads files or clocks: the time is a fixed instant.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::agent::config::{RunArgs, parse_config_file, resolve};
use crate::config::file::load_manifest;
use crate::config::http::read_body;
use crate::config::merge::{PodConfig, SourcePod};
use crate::cri::CgroupDriver;
use crate::cri::types::DnsConfig;
use crate::kuberuntime::labels::{ContainerLabels, Labels, PodSandboxLabels};
use crate::kuberuntime::mapping::{
    ContainerStart, NodeAllocatable, NodeCgroups, NodeContext, container_config, etc_hosts_file,
    host_name_and_domain, pod_cgroup_parent, qos_class, sandbox_config, service_env,
};
use crate::logs::{LogDecoder, LogOptions, TailScanner, ends_logical_line, parse_cri_line};

/// A target's entry function: raw bytes in, a panic only on a bug.
pub type Entry = fn(&[u8]);

/// Every target: its name (the file under `fuzz/fuzz_targets/` and the
/// folder under `fuzz/corpus/`) and its entry function.
pub const TARGETS: &[(&str, Entry)] = &[
    ("manifest_file", manifest_file),
    ("manifest_url", manifest_url),
    ("config_file", config_file),
    ("runtime_labels", runtime_labels),
    ("cri_log", cri_log),
];

const NODE: &str = "fuzz-node";
/// The instant every entry function takes as "now" (2026-01-01T00:00:00Z).
const NOW_SECONDS: i64 = 1_767_225_600;

fn now() -> jiff::Timestamp {
    jiff::Timestamp::from_second(NOW_SECONDS).expect("a valid instant")
}

/// A manifest file's bytes through the file source's parse and defaulting,
/// the merge, and the runtime mapping the pod worker does at sync.
pub fn manifest_file(bytes: &[u8]) {
    let origin = "/etc/kubernetes/manifests/fuzz.yaml";
    if let Ok(pod) = load_manifest(origin, bytes, NODE, now()) {
        after_source("file", vec![pod]);
    }
}

/// A manifest URL's body (Pod or PodList) through the URL source's parse
/// and defaulting, then as [`manifest_file`].
pub fn manifest_url(bytes: &[u8]) {
    if let Ok(pods) = read_body("http://127.0.0.1/pods", NODE, bytes, now()) {
        after_source("http", pods);
    }
}

fn after_source(source: &'static str, pods: Vec<SourcePod>) {
    let mut config = PodConfig::new([source]);
    config.set(source, pods.clone());
    // The same SET again changes nothing.
    let again = config.set(source, pods);
    assert!(
        again.is_empty(),
        "a repeated SET changed the merge: {again:?}"
    );
    let ctx = node_context();
    for pod in &config.pods() {
        let _ = qos_class(pod);
        let _ = pod_cgroup_parent(&ctx, pod);
        if sandbox_config(&ctx, pod, 0).is_err() {
            continue;
        }
        let spec = pod.spec.as_ref().expect("validated pods have a spec");
        let hosts = etc_hosts_file(&ctx, pod.metadata.uid.as_deref().unwrap_or_default());
        let _ = host_name_and_domain(pod);
        // The master Service and one of the pod's namespace, as a node on
        // an API server sees them: the manifest's env merges with theirs.
        let services = services_of(pod.metadata.namespace.as_deref().unwrap_or("default"));
        let service_env = service_env(pod, &services);
        for container in spec
            .init_containers
            .iter()
            .flatten()
            .chain(&spec.containers)
        {
            let start = ContainerStart {
                pod_ip: "10.88.0.2",
                image_ref: "sha256:0123",
                etc_hosts: Some(&hosts),
                service_env: &service_env,
                ..ContainerStart::default()
            };
            let _ = container_config(&ctx, pod, container, &start);
        }
    }
}

fn services_of(namespace: &str) -> Vec<k8s_openapi::api::core::v1::Service> {
    let service = |ns: &str, name: &str, ip: &str| {
        serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": ns, "name": name},
            "spec": {"clusterIP": ip, "ports": [
                {"name": "https", "port": 443, "protocol": "TCP"},
                {"name": "dns", "port": 53, "protocol": "UDP"}]}
        }))
        .expect("a Service")
    };
    vec![
        service("default", "kubernetes", "10.96.0.1"),
        service(namespace, "web-front", "fd00::10"),
    ]
}

fn node_context() -> NodeContext {
    NodeContext {
        node_name: NODE.into(),
        root_dir: PathBuf::from("/var/lib/crilet"),
        log_dirs: Default::default(),
        cgroup_root: "/".into(),
        cgroup_driver: CgroupDriver::Cgroupfs,
        host_dns: DnsConfig {
            servers: vec!["10.0.0.2".into()],
            searches: vec!["lan".into()],
            options: vec!["ndots:1".into()],
        },
        host_ip: "192.168.1.10".into(),
        memory_capacity: 8 << 30,
        oom_score_adj_floor: None,
        hugepage_sizes: vec!["2MB".into(), "1GB".into()],
        cgroups: NodeCgroups::default(),
        allocatable: NodeAllocatable {
            cpu_millicores: 4000,
            memory_bytes: 8 << 30,
            ephemeral_storage_bytes: Some(100 << 30),
            pods: 110,
        },
        recursive_read_only_mounts: false,
    }
}

/// A `--config` file's bytes through parsing and resolution against no flags.
pub fn config_file(bytes: &[u8]) {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    if let Ok(file) = parse_config_file("fuzz.yaml", text) {
        let _ = resolve(&RunArgs::default(), &file, "fuzz.yaml");
    }
}

/// Labels and annotations of a runtime sandbox or container, as crilet reads
/// them back after a restart. Input: `key=value` lines for the labels, a
/// line `---`, then those of the annotations. Checks the module's round
/// trip: what was read back writes out and reads back the same.
pub fn runtime_labels(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let (labels, annotations) = label_maps(&text);
    if let Ok(sandbox) = PodSandboxLabels::from_labels(&labels, &annotations) {
        let back = PodSandboxLabels::from_labels(&sandbox.to_labels(), &sandbox.to_annotations());
        assert_eq!(back.as_ref(), Ok(&sandbox), "sandbox labels round trip");
        let _ = sandbox.full_name();
    }
    if let Ok(container) = ContainerLabels::from_labels(&labels, &annotations) {
        let back =
            ContainerLabels::from_labels(&container.to_labels(), &container.to_annotations());
        assert_eq!(back.as_ref(), Ok(&container), "container labels round trip");
    }
}

/// The two maps of [`runtime_labels`]' input; a line without `=` is a key
/// with an empty value.
pub fn label_maps(text: &str) -> (Labels, Labels) {
    let mut maps = [BTreeMap::new(), BTreeMap::new()];
    let mut which = 0;
    for line in text.lines() {
        if line == "---" {
            which = 1;
            continue;
        }
        let (key, value) = line.split_once('=').unwrap_or((line, ""));
        maps[which].insert(key.to_owned(), value.to_owned());
    }
    let [labels, annotations] = maps;
    (
        labels.into_iter().collect(),
        annotations.into_iter().collect(),
    )
}

/// A log request and a CRI log file. Input: the query string
/// (`tailLines=2&timestamps=true`) on the first line, the file's bytes after
/// it. Every line goes through the CRI line parser; the file through the
/// decoder (whole, and cut in two: the output must not depend on where
/// the bytes were cut) and the tail scanner (likewise).
pub fn cri_log(bytes: &[u8]) {
    let (query, file) = match bytes.iter().position(|&b| b == b'\n') {
        Some(nl) => (&bytes[..nl], &bytes[nl + 1..]),
        None => (bytes, &[][..]),
    };
    for line in file.split(|&b| b == b'\n') {
        if let Some(entry) = parse_cri_line(line) {
            assert!(entry.stream == "stdout" || entry.stream == "stderr");
        }
        let _ = ends_logical_line(line);
    }
    let Ok(options) = LogOptions::from_query(&String::from_utf8_lossy(query)) else {
        return;
    };
    let since = options.since(now());
    let cut = file.len() / 2;
    let whole = decode(&options, since, &[file]);
    let halves = decode(&options, since, &[&file[..cut], &file[cut..]]);
    assert_eq!(whole, halves, "decoder output depends on the cut");
    if let Some(limit) = options.limit_bytes {
        assert!(whole.len() as u64 <= limit as u64, "limitBytes exceeded");
    }
    if let Some(lines) = options.tail_lines {
        let lines = lines as u64;
        let len = file.len() as u64;
        let at_once = tail(&mut TailScanner::new(len, lines), &[file]);
        let in_two = tail(
            &mut TailScanner::new(len, lines),
            &[&file[cut..], &file[..cut]],
        );
        assert_eq!(at_once, in_two, "tail start depends on the chunks");
        assert!(at_once <= len, "tail start past the end");
    }
}

fn decode(options: &LogOptions, since: Option<jiff::Timestamp>, chunks: &[&[u8]]) -> Vec<u8> {
    let mut decoder = LogDecoder::new(options, since);
    let mut out = Vec::new();
    for chunk in chunks {
        decoder.feed(chunk, &mut out);
    }
    decoder.finish(&mut out);
    out
}

/// Feeds `chunks` (last chunk of the file first) until an answer.
fn tail(scanner: &mut TailScanner, chunks: &[&[u8]]) -> u64 {
    for chunk in chunks {
        if let Some(answer) = scanner.feed_back(chunk) {
            return answer;
        }
    }
    scanner.finish()
}

#[cfg(test)]
#[path = "replay_tests.rs"]
mod replay_tests;
