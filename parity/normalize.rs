//! What must differ between two agents' runs is made equal before the
//! comparison: IDs the runtime or the API server hands out, times, each
//! agent's own directories, ports and version string. Everything else is
//! compared as it was captured.
//!
//! Invariant: pure, and placeholders only. A value is replaced by a
//! placeholder naming what it was (`<time>`, `<id>`, `<uid>`, `<root-dir>`),
//! never removed, so a field present in one run and absent in the other is
//! still a difference.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value as Json;

/// Keys whose values are times, in the API's camelCase and the CRI's
/// snake_case.
const TIME_KEYS: [&str; 17] = [
    "creationTimestamp",
    "deletionTimestamp",
    "startedAt",
    "finishedAt",
    "startTime",
    "lastTransitionTime",
    "lastProbeTime",
    "lastHeartbeatTime",
    "firstTimestamp",
    "lastTimestamp",
    "eventTime",
    "renewTime",
    "acquireTime",
    "created_at",
    "started_at",
    "finished_at",
    "createdAt",
];

/// Keys whose values the API server or the runtime assigns (versions,
/// process IDs).
const ASSIGNED_KEYS: [&str; 4] = ["resourceVersion", "pid", "managedFields", "bootID"];

static RFC3339: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?").unwrap()
});
/// A 64-hex ID (container, sandbox) not preceded by `sha256:` (an image's
/// ID or digest, the same for both agents on one runtime).
static ID64: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(sha256:)?\b[0-9a-f]{64}\b").unwrap());
/// What the kernel, CNI and the API server name per run: UUIDs (object
/// UIDs, network namespaces), MAC addresses, veth names, process IDs in
/// /proc paths, and an admission refusal's shortfall (what the pods
/// admitted before it use depends on the order a run admits them in).
static ASSIGNED: LazyLock<[(Regex, &str); 5]> = LazyLock::new(|| {
    [
        (
            Regex::new(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
                .unwrap(),
            "<uuid>",
        ),
        (
            Regex::new(r"\b([0-9a-f]{2}:){5}[0-9a-f]{2}\b").unwrap(),
            "<mac>",
        ),
        (Regex::new(r"\bveth[0-9a-f]{8}\b").unwrap(), "veth<id>"),
        (Regex::new(r"/proc/\d+/").unwrap(), "/proc/<pid>/"),
        (
            Regex::new(r"\(res: ([a-z-]+), q: \d+\)").unwrap(),
            "(res: $1, q: <n>)",
        ),
    ]
});

/// The substitutions of one comparison.
#[derive(Debug, Clone, Default)]
pub struct Normalizer {
    /// (literal, placeholder), applied longest literal first.
    literals: Vec<(String, String)>,
    /// Whole addresses (not inside a longer one): (address, placeholder,
    /// its matcher).
    addresses: Vec<(String, String, Regex)>,
}

impl Normalizer {
    /// Replaces every occurrence of `literal` in strings (and object keys)
    /// with `placeholder`. Empty literals are ignored.
    pub fn literal(&mut self, literal: impl Into<String>, placeholder: impl Into<String>) {
        let literal = literal.into();
        if literal.is_empty() {
            return;
        }
        self.literals.push((literal, placeholder.into()));
        self.literals
            .sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
    }

    /// Replaces the IP address `ip` where it stands whole (so 10.0.0.2 is
    /// not found inside 10.0.0.29).
    pub fn address(&mut self, ip: &str, placeholder: impl Into<String>) {
        if ip.is_empty() {
            return;
        }
        let re = Regex::new(&format!(r"(^|[^0-9.]){}($|[^0-9])", regex::escape(ip))).unwrap();
        self.addresses
            .push((ip.to_string(), placeholder.into(), re));
    }

    /// The substitutions as JSON, kept beside a raw snapshot so that it can
    /// be compared again later ([`Normalizer::from_json`]).
    pub fn to_json(&self) -> Json {
        let pairs = |v: Vec<(&String, &String)>| -> Json {
            v.into_iter().map(|(a, b)| json_pair(a, b)).collect()
        };
        serde_json::json!({
            "literals": pairs(self.literals.iter().map(|(a, b)| (a, b)).collect()),
            "addresses": pairs(self.addresses.iter().map(|(a, b, _)| (a, b)).collect()),
        })
    }

    pub fn from_json(v: &Json) -> Normalizer {
        let mut n = Normalizer::default();
        let pairs = |key: &str| -> Vec<(String, String)> {
            (v[key].as_array().into_iter().flatten())
                .filter_map(|p| Some((p[0].as_str()?.to_string(), p[1].as_str()?.to_string())))
                .collect()
        };
        for (a, b) in pairs("literals") {
            n.literal(a, b);
        }
        for (a, b) in pairs("addresses") {
            n.address(&a, b);
        }
        n
    }

    pub fn normalize(&self, value: &mut Json) {
        match value {
            Json::Object(map) => {
                let entries = std::mem::take(map);
                for (key, mut v) in entries {
                    if TIME_KEYS.contains(&key.as_str()) {
                        if !is_zero(&v) {
                            v = Json::String("<time>".into());
                        }
                    } else if ASSIGNED_KEYS.contains(&key.as_str()) {
                        v = Json::String(format!("<{key}>"));
                    } else {
                        self.normalize(&mut v);
                    }
                    map.insert(self.text(&key), v);
                }
            }
            Json::Array(items) => items.iter_mut().for_each(|v| self.normalize(v)),
            Json::String(s) => *s = self.text(&canonical_json(s)),
            _ => {}
        }
    }

    /// A string with the literals, times and IDs replaced.
    pub fn text(&self, s: &str) -> String {
        let mut out = s.to_string();
        for (literal, placeholder) in &self.literals {
            if out.contains(literal.as_str()) {
                out = out.replace(literal.as_str(), placeholder);
            }
        }
        for (_, placeholder, re) in &self.addresses {
            out = re
                .replace_all(&out, format!("${{1}}{placeholder}${{2}}"))
                .into_owned();
        }
        let mut out = RFC3339.replace_all(&out, "<time>").into_owned();
        out = ID64
            .replace_all(&out, |c: &regex::Captures| match c.get(1) {
                Some(_) => c[0].to_string(),
                None => "<id>".to_string(),
            })
            .into_owned();
        for (re, placeholder) in ASSIGNED.iter() {
            out = re.replace_all(&out, *placeholder).into_owned();
        }
        out
    }
}

/// A string that holds a JSON object or list (the kubelet's
/// `io.kubernetes.container.ports` and `preStopHandler` annotations) with
/// its keys sorted: Go writes a struct's fields in their declared order,
/// crilet's k8s-openapi types in alphabetical order, and a reader of the
/// JSON sees no difference. Any other string is left as it is.
fn canonical_json(s: &str) -> String {
    let t = s.trim_start();
    if !(t.starts_with('{') || t.starts_with('[')) {
        return s.to_string();
    }
    match serde_json::from_str::<Json>(s) {
        // serde_json's map keeps its keys sorted.
        Ok(v) => v.to_string(),
        Err(_) => s.to_string(),
    }
}

fn json_pair(a: &str, b: &str) -> Json {
    Json::Array(vec![Json::String(a.into()), Json::String(b.into())])
}

/// The API's JSON objects (`/pods`, mirror pods, the Node) as their
/// readers see them: Go's encoder writes an empty struct as `{}` and a nil
/// pointer as `null` where crilet's writes nothing, and a reader decodes
/// all three alike, so nulls, empty objects and empty lists are dropped
/// (deepest first). Not for CRI requests, where an empty message present
/// can mean something an absent one does not.
pub fn prune_empty(value: &mut Json) {
    match value {
        Json::Object(map) => {
            map.values_mut().for_each(prune_empty);
            map.retain(|_, v| !is_empty(v));
        }
        Json::Array(items) => items.iter_mut().for_each(prune_empty),
        _ => {}
    }
}

fn is_empty(v: &Json) -> bool {
    match v {
        Json::Null => true,
        Json::Object(m) => m.is_empty(),
        Json::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// The environment in the OCI spec a runtime built (`crictl inspect`'s
/// `info.runtimeSpec.process.env`), sorted: the kubelet builds a
/// container's environment from Go maps, so its order changes from one
/// container to the next; what each variable holds is still compared (and
/// CreateContainer's own `envs` are compared entry by entry, their order
/// apart).
pub fn sort_process_env(value: &mut Json) {
    let env = value.pointer_mut("/info/runtimeSpec/process/env");
    if let Some(Json::Array(items)) = env {
        items.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
    }
}

/// Every DNS config's `options` (`dns_config`, `dnsConfig`), anywhere in
/// `value`, sorted: the kubelet merges a pod's options with the resolver's
/// in a Go map (`mergeDNSOptions` in `pkg/kubelet/network/dns`), so their
/// order changes from one call to the next, even between a pod's
/// RunPodSandbox and its CreateContainer; the resolver reads them in any
/// order.
pub fn sort_dns_options(value: &mut Json) {
    match value {
        Json::Object(map) => {
            for (key, child) in map.iter_mut() {
                if key == "dns_config" || key == "dnsConfig" {
                    if let Some(Json::Array(options)) = child.get_mut("options") {
                        options.sort_by_key(|a| a.to_string());
                    }
                }
                sort_dns_options(child);
            }
        }
        Json::Array(items) => items.iter_mut().for_each(sort_dns_options),
        _ => {}
    }
}

/// The Node's `status.runtimeHandlers`, sorted by name: both agents copy
/// them in the order of the runtime's `RuntimeStatus.handlers`, and CRI-O
/// builds that list from a Go map, so its order changes from one call to
/// the next. Each handler's features are still compared.
pub fn sort_runtime_handlers(node: &mut Json) {
    if let Some(Json::Array(handlers)) = node.pointer_mut("/status/runtimeHandlers") {
        handlers.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    }
}

/// Zero times stay as they are: "never" is not a time to hide.
fn is_zero(v: &Json) -> bool {
    match v {
        Json::Null => true,
        Json::Number(n) => n.as_i64() == Some(0),
        Json::String(s) => s.is_empty() || s.starts_with("0001-01-01"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn normalizer() -> Normalizer {
        let mut n = Normalizer::default();
        n.literal("/tmp/p/kubelet", "<root-dir>");
        n.literal("/tmp/p/kubelet/pods", "<pods>");
        n.literal("f6da4e7cd57d5407c59167bddf999398", "<uid>");
        n.literal("", "<nothing>");
        n
    }

    #[test]
    fn literals_apply_longest_first_in_values_and_keys() {
        let n = normalizer();
        assert_eq!(
            n.text("/tmp/p/kubelet/pods/f6da4e7cd57d5407c59167bddf999398/etc-hosts"),
            "<pods>/<uid>/etc-hosts"
        );
        let mut v = json!({"/tmp/p/kubelet/x": "/tmp/p/kubelet/logs"});
        n.normalize(&mut v);
        assert_eq!(v, json!({"<root-dir>/x": "<root-dir>/logs"}));
    }

    #[test]
    fn times_ids_and_assigned_values_become_placeholders_but_stay_present() {
        let n = normalizer();
        let id = "a".repeat(64);
        let mut v = json!({
            "metadata": {"creationTimestamp": "2026-12-02T14:47:57Z", "resourceVersion": "42"},
            "status": {"startedAt": 1764686877000000000u64, "finishedAt": 0,
                       "containerID": format!("containerd://{id}"),
                       "imageID": format!("sha256:{id}")},
            "annotations": {"kubernetes.io/config.seen": "2026-12-02T14:47:57.123456789+00:00"},
            "list": [{"pid": 7}],
        });
        n.normalize(&mut v);
        assert_eq!(
            v,
            json!({
                "metadata": {"creationTimestamp": "<time>", "resourceVersion": "<resourceVersion>"},
                "status": {"startedAt": "<time>", "finishedAt": 0,
                           "containerID": "containerd://<id>",
                           "imageID": format!("sha256:{id}")},
                "annotations": {"kubernetes.io/config.seen": "<time>"},
                "list": [{"pid": "<pid>"}],
            })
        );
    }

    #[test]
    fn api_objects_lose_nulls_and_empty_values_deepest_first() {
        let mut v = json!({"a": null, "b": {}, "c": [], "d": {"e": {"f": null}}, "g": [{}, 1], "h": 0, "i": ""});
        prune_empty(&mut v);
        assert_eq!(v, json!({"g": [{}, 1], "h": 0, "i": ""}));
    }

    #[test]
    fn addresses_are_replaced_whole_and_run_assigned_names_generally() {
        let mut n = Normalizer::default();
        n.address("10.108.0.2", "<pod-ip>");
        assert_eq!(n.text("10.108.0.2"), "<pod-ip>");
        assert_eq!(n.text("ip=10.108.0.2/16"), "ip=<pod-ip>/16");
        assert_eq!(n.text("10.108.0.29 110.108.0.2"), "10.108.0.29 110.108.0.2");
        assert_eq!(
            n.text("/var/run/netns/cni-5e000db3-61f3-4ca3-a549-031fa3238076"),
            "/var/run/netns/cni-<uuid>"
        );
        assert_eq!(n.text("2a:4b:00:1f:ee:01 vethf870416b"), "<mac> veth<id>");
        assert_eq!(
            n.text("resources: [(res: cpu, q: 62100), (res: ephemeral-storage, q: 7), ]"),
            "resources: [(res: cpu, q: <n>), (res: ephemeral-storage, q: <n>), ]"
        );
        assert_eq!(n.text("/proc/28955/ns/ipc"), "/proc/<pid>/ns/ipc");
    }

    #[test]
    fn the_substitutions_survive_a_round_trip_through_json() {
        let mut n = normalizer();
        n.address("10.0.0.2", "<pod-ip>");
        let back = Normalizer::from_json(&n.to_json());
        let text = "/tmp/p/kubelet/pods/f6da4e7cd57d5407c59167bddf999398 10.0.0.2";
        assert_eq!(back.text(text), n.text(text));
        assert_eq!(back.text(text), "<pods>/<uid> <pod-ip>");
    }

    #[test]
    fn json_held_in_a_string_compares_with_its_keys_sorted() {
        let n = Normalizer::default();
        let mut go = json!({"a": r#"[{"name":"http","containerPort":8080,"protocol":"TCP"}]"#});
        let mut rust = json!({"a": r#"[{"containerPort":8080,"name":"http","protocol":"TCP"}]"#});
        n.normalize(&mut go);
        n.normalize(&mut rust);
        assert_eq!(go, rust);
        let mut text = json!({"a": "[not json", "b": "{\"x\": 1} trailing"});
        let before = text.clone();
        n.normalize(&mut text);
        assert_eq!(text, before);
    }

    #[test]
    fn the_oci_environment_is_compared_sorted() {
        let mut v =
            json!({"info": {"runtimeSpec": {"process": {"env": ["B=2", "A=1", "PATH=/bin"]}}}});
        sort_process_env(&mut v);
        assert_eq!(
            v["info"]["runtimeSpec"]["process"]["env"],
            json!(["A=1", "B=2", "PATH=/bin"])
        );
        let mut other = json!({"status": {}});
        sort_process_env(&mut other);
        assert_eq!(other, json!({"status": {}}));
    }

    #[test]
    fn unset_times_are_not_hidden() {
        let n = Normalizer::default();
        let mut v =
            json!({"startedAt": null, "finishedAt": "", "lastProbeTime": "0001-01-01T00:00:00Z"});
        let before = v.clone();
        n.normalize(&mut v);
        assert_eq!(v, before);
    }

    #[test]
    fn dns_options_are_sorted_wherever_a_dns_config_holds_them() {
        let mut v = serde_json::json!({
            "config": {"dns_config": {"options": ["ndots:2", "edns0"], "servers": ["b", "a"]}},
            "spec": {"dnsConfig": {"options": [{"name": "ndots"}, {"name": "edns0"}]}},
            "other": {"options": ["b", "a"]}
        });
        sort_dns_options(&mut v);
        assert_eq!(
            v["config"]["dns_config"]["options"],
            serde_json::json!(["edns0", "ndots:2"])
        );
        assert_eq!(
            v["config"]["dns_config"]["servers"],
            serde_json::json!(["b", "a"])
        );
        assert_eq!(v["spec"]["dnsConfig"]["options"][0]["name"], "edns0");
        assert_eq!(v["other"]["options"], serde_json::json!(["b", "a"]));
    }

    #[test]
    fn runtime_handlers_in_either_order_compare_equal_with_their_features() {
        let handler = |name: &str, rro: bool| json!({"name": name, "features": {"recursiveReadOnlyMounts": rro}});
        let mut kubelet = json!({"status": {"runtimeHandlers": [
            handler("runc-restrict-oom", true), handler("", true), handler("runc", true)]}});
        let mut crilet = json!({"status": {"runtimeHandlers": [
            handler("runc", true), handler("runc-restrict-oom", true), handler("", true)]}});
        sort_runtime_handlers(&mut kubelet);
        sort_runtime_handlers(&mut crilet);
        assert_eq!(kubelet, crilet);
        assert_eq!(kubelet["status"]["runtimeHandlers"][0]["name"], "");
        crilet["status"]["runtimeHandlers"][1] = handler("runc", false);
        assert_ne!(kubelet, crilet, "a handler's features are still compared");
    }
}
