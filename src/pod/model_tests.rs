use super::*;
use k8s_openapi::api::core::v1::{ContainerPort, HostPathVolumeSource, Volume, VolumeMount};
use proptest::prelude::*;

const ORIGIN: &str = "/etc/kubernetes/manifests/web.yaml";

const VALID: &str = "\
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: kube-system
spec:
  restartPolicy: Always
  volumes:
  - name: data
    emptyDir: {}
  initContainers:
  - name: init
    image: busybox
    volumeMounts:
    - name: data
      mountPath: /data
  containers:
  - name: app
    image: nginx:1.27
    ports:
    - name: http
      containerPort: 80
      hostPort: 8080
      protocol: TCP
    - name: metrics
      containerPort: 9090
    volumeMounts:
    - name: data
      mountPath: /data
";

fn valid_pod() -> Pod {
    parse_pod(ORIGIN, VALID.as_bytes()).expect("the base manifest is valid")
}

fn spec(pod: &mut Pod) -> &mut PodSpec {
    pod.spec.as_mut().unwrap()
}

fn port(pod: &mut Pod, j: usize) -> &mut ContainerPort {
    &mut spec(pod).containers[0].ports.as_mut().unwrap()[j]
}

/// The message names the origin and, when given, the field; returns it.
fn assert_names(err: &ManifestError, field: Option<&str>) -> String {
    let text = err.to_string();
    assert!(text.starts_with(&format!("{ORIGIN}: ")), "{text}");
    assert_eq!(err.origin, ORIGIN);
    if let Some(field) = field {
        assert_eq!(err.field.as_deref(), Some(field), "{text}");
        assert!(text.contains(&format!(": {field}: ")), "{text}");
    }
    text
}

fn parse_err(text: &str) -> ManifestError {
    parse_pod(ORIGIN, text.as_bytes()).expect_err("manifest should be refused")
}

#[test]
fn display_with_and_without_field() {
    let with = ManifestError::new("o", Some("spec".into()), "is required");
    assert_eq!(with.to_string(), "o: spec: is required");
    let without = ManifestError::new("o", None, "empty manifest");
    assert_eq!(without.to_string(), "o: empty manifest");
    assert_eq!(
        without.within("items[2]").to_string(),
        "o: items[2]: empty manifest"
    );
}

#[test]
fn parses_valid_yaml() {
    let pod = valid_pod();
    assert_eq!(pod.metadata.name.as_deref(), Some("web"));
    assert_eq!(
        pod.spec.unwrap().containers[0].image.as_deref(),
        Some("nginx:1.27")
    );
}

/// A manifest in the style kubeadm writes, exercising the types that
/// decode from several YAML shapes (int-or-string, quantities).
#[test]
fn parses_realistic_static_pod() {
    let text = "\
apiVersion: v1
kind: Pod
metadata:
  name: etcd
  namespace: kube-system
  creationTimestamp: null
  labels: {component: etcd, tier: control-plane}
  annotations:
    kubeadm.kubernetes.io/etcd.advertise-client-urls: https://10.0.0.1:2379
spec:
  hostNetwork: true
  priority: 2000001000
  priorityClassName: system-node-critical
  securityContext:
    seccompProfile: {type: RuntimeDefault}
  containers:
  - name: etcd
    image: registry.k8s.io/etcd:3.5.15-0
    command: [etcd, --data-dir=/var/lib/etcd]
    env:
    - {name: GOMAXPROCS, value: \"2\"}
    resources:
      requests: {cpu: 100m, memory: 100Mi}
      limits: {cpu: 1, memory: 1.5Gi}
    livenessProbe:
      httpGet: {host: 127.0.0.1, path: /livez, port: 2381, scheme: HTTP}
      failureThreshold: 8
    startupProbe:
      httpGet: {path: /readyz, port: metrics}
    ports:
    - {name: metrics, containerPort: 2381}
    volumeMounts:
    - {mountPath: /var/lib/etcd, name: etcd-data}
  volumes:
  - hostPath: {path: /var/lib/etcd, type: DirectoryOrCreate}
    name: etcd-data
status: {}
";
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    let pod = parse_pod(ORIGIN, text.as_bytes()).unwrap();
    let c = &pod.spec.as_ref().unwrap().containers[0];
    let limits = c.resources.as_ref().unwrap().limits.as_ref().unwrap();
    assert_eq!(limits["cpu"].0, "1");
    assert_eq!(limits["memory"].0, "1.5Gi");
    let live = c
        .liveness_probe
        .as_ref()
        .unwrap()
        .http_get
        .as_ref()
        .unwrap();
    assert_eq!(live.port, IntOrString::Int(2381));
    let startup = c.startup_probe.as_ref().unwrap().http_get.as_ref().unwrap();
    assert_eq!(startup.port, IntOrString::String("metrics".into()));
    assert_eq!(c.env.as_ref().unwrap()[0].value.as_deref(), Some("2"));
    // The same pod through JSON decodes to the same value.
    let json = serde_json::to_string(&pod).unwrap();
    assert_eq!(parse_pod(ORIGIN, json.as_bytes()).unwrap(), pod);
}

#[test]
fn parses_valid_json() {
    let json = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},
            "spec":{"containers":[{"name":"app","image":"nginx"}]}}"#;
    let pod = parse_pod(ORIGIN, json.as_bytes()).unwrap();
    assert_eq!(pod.metadata.name.as_deref(), Some("web"));
}

#[test]
fn tolerates_unknown_fields_bom_and_leading_separator() {
    let text = format!(
        "\u{feff}---\nfutureField: 1\n{}",
        VALID.replace(
            "  restartPolicy: Always\n",
            "  restartPolicy: Always\n  someNewSpecField: {a: b}\n",
        )
    );
    let pod = parse_pod(ORIGIN, text.as_bytes()).unwrap();
    assert_eq!(pod, valid_pod());
}

#[test]
fn refuses_oversized_manifest() {
    let mut big = VALID.as_bytes().to_vec();
    big.resize(MAX_MANIFEST_BYTES + 1, b' ');
    let text = assert_names(&parse_pod(ORIGIN, &big).unwrap_err(), None);
    assert!(text.contains(&MAX_MANIFEST_BYTES.to_string()), "{text}");
    assert!(
        text.contains(&(MAX_MANIFEST_BYTES + 1).to_string()),
        "{text}"
    );
    // Exactly at the limit is still parsed (the padding is whitespace).
    big.truncate(MAX_MANIFEST_BYTES);
    assert!(parse_pod(ORIGIN, &big).is_ok());
}

#[test]
fn refuses_binary_and_non_utf8() {
    let text = assert_names(&parse_pod(ORIGIN, b"kind: Pod\n\0\x01").unwrap_err(), None);
    assert!(
        text.contains("binary") && text.contains("offset 10"),
        "{text}"
    );
    let text = assert_names(&parse_pod(ORIGIN, b"kind: P\xffod\n").unwrap_err(), None);
    assert!(
        text.contains("UTF-8") && text.contains("offset 7"),
        "{text}"
    );
}

#[test]
fn refuses_empty_and_comment_only() {
    for empty in ["", "  \n\t\r\n", "\u{feff}"] {
        let text = assert_names(&parse_err(empty), None);
        assert!(text.contains("empty manifest"), "{text}");
    }
    for nothing in ["# just a comment\n", "---\n", "---\n...\n"] {
        let text = assert_names(&parse_err(nothing), None);
        assert!(text.contains("no YAML document"), "{text}");
    }
}

#[test]
fn refuses_several_documents() {
    let text = assert_names(&parse_err(&format!("{VALID}---\n{VALID}")), None);
    assert!(text.contains("2 YAML documents"), "{text}");
    let one = r#"{"apiVersion":"v1","kind":"Pod"}"#;
    let text = assert_names(&parse_err(&format!("{one}\n{one}")), None);
    assert!(text.contains("more than one JSON document"), "{text}");
}

#[test]
fn syntax_errors_carry_line_and_column() {
    let text = assert_names(&parse_err("kind: Pod\nmetadata: [\n"), None);
    assert!(
        text.contains("invalid YAML") && text.contains("line 2"),
        "{text}"
    );
    let text = assert_names(&parse_err("{\"kind\": \"Pod\",\n \"spec\": }"), None);
    assert!(
        text.contains("invalid JSON") && text.contains("line 2"),
        "{text}"
    );
    let text = assert_names(&parse_err("{\"kind\": \"Pod\"} trailing"), None);
    assert!(
        text.contains("invalid JSON") && text.contains("column"),
        "{text}"
    );
}

#[test]
fn type_errors_carry_line_and_column() {
    let yaml = "apiVersion: v1\nkind: Pod\nspec:\n  containers: nope\n";
    let text = assert_names(&parse_err(yaml), None);
    assert!(
        text.contains("invalid Pod") && text.contains("line 4"),
        "{text}"
    );
    let json = "{\"apiVersion\": \"v1\", \"kind\": \"Pod\",\n\"spec\": {\"containers\": 3}}";
    let text = assert_names(&parse_err(json), None);
    assert!(
        text.contains("invalid Pod") && text.contains("line 2"),
        "{text}"
    );
}

#[test]
fn refuses_non_object_top_level() {
    for (input, found) in [("hello\n", "a string"), ("- a\n- b\n", "a list")] {
        let text = assert_names(&parse_err(input), None);
        assert!(text.contains("top level") && text.contains(found), "{text}");
    }
}

#[test]
fn checks_kind_and_api_version() {
    let cases = [
        ("apiVersion: v1\nmetadata: {}\n", "kind", "missing"),
        ("apiVersion: v1\nkind: 7\n", "kind", "must be a string"),
        (
            "apiVersion: apps/v1\nkind: Deployment\n",
            "kind",
            "\"Deployment\"",
        ),
        (
            "apiVersion: v1\nkind: List\nitems: []\n",
            "kind",
            "\"List\"",
        ),
        (
            "apiVersion: v1\nkind: PodList\nitems: []\n",
            "kind",
            "\"PodList\"",
        ),
        ("kind: Pod\nmetadata: {name: a}\n", "apiVersion", "missing"),
        ("apiVersion: v2\nkind: Pod\n", "apiVersion", "\"v2\""),
        (
            "apiVersion: 1\nkind: Pod\n",
            "apiVersion",
            "1 is not supported",
        ),
    ];
    for (input, field, words) in cases {
        let text = assert_names(&parse_err(input), Some(field));
        assert!(text.contains(words), "{input:?}: {text}");
    }
}

#[test]
fn validation_errors_surface_through_parse() {
    let text = assert_names(
        &parse_err(&VALID.replace("image: nginx:1.27", "image: ''")),
        Some("spec.containers[0].image"),
    );
    assert!(text.contains("required"), "{text}");
}

#[test]
fn validate_accepts_edge_cases() {
    type Edit = fn(&mut Pod);
    let cases: [(&str, Edit); 7] = [
        ("empty namespace", |p| {
            p.metadata.namespace = Some(String::new())
        }),
        ("no namespace", |p| p.metadata.namespace = None),
        ("dotted name", |p| {
            p.metadata.name = Some("kube-apiserver.v1".into())
        }),
        ("no protocol", |p| port(p, 0).protocol = None),
        ("host network, equal ports", |p| {
            spec(p).host_network = Some(true);
            port(p, 0).host_port = Some(80);
        }),
        ("host network, no host port", |p| {
            spec(p).host_network = Some(true);
            port(p, 0).host_port = None;
        }),
        ("same port name in two containers", |p| {
            let mut sidecar = spec(p).containers[0].clone();
            sidecar.name = "sidecar".into();
            spec(p).containers.push(sidecar);
        }),
    ];
    for (what, edit) in cases {
        let mut pod = valid_pod();
        edit(&mut pod);
        assert_eq!(validate_pod(ORIGIN, &pod), Ok(()), "{what}");
    }
}

#[test]
fn validate_refuses_each_problem() {
    type Edit = fn(&mut Pod);
    let cases: Vec<(Edit, &str, &str)> = vec![
        (|p| p.metadata.name = None, "metadata.name", "required"),
        (
            |p| p.metadata.name = Some("Web".into()),
            "metadata.name",
            "DNS-1123 subdomain",
        ),
        (
            |p| p.metadata.name = Some("a..b".into()),
            "metadata.name",
            "DNS-1123 subdomain",
        ),
        (
            |p| p.metadata.name = Some("-web".into()),
            "metadata.name",
            "DNS-1123 subdomain",
        ),
        (
            |p| p.metadata.name = Some("a".repeat(254)),
            "metadata.name",
            "253",
        ),
        (
            |p| p.metadata.namespace = Some("kube.system".into()),
            "metadata.namespace",
            "DNS-1123 label",
        ),
        (|p| p.spec = None, "spec", "required"),
        (
            |p| spec(p).containers.clear(),
            "spec.containers",
            "at least one",
        ),
        (
            |p| spec(p).restart_policy = Some("Sometimes".into()),
            "spec.restartPolicy",
            "\"Sometimes\"",
        ),
        (
            |p| spec(p).volumes.as_mut().unwrap()[0].name = String::new(),
            "spec.volumes[0].name",
            "required",
        ),
        (
            |p| spec(p).volumes.as_mut().unwrap()[0].name = "Data".into(),
            "spec.volumes[0].name",
            "DNS-1123 label",
        ),
        (
            |p| {
                spec(p).volumes.as_mut().unwrap().push(Volume {
                    name: "data".into(),
                    ..Default::default()
                })
            },
            "spec.volumes[1].name",
            "duplicate volume name \"data\"",
        ),
        (
            |p| {
                let twin = spec(p).containers[0].clone();
                spec(p).containers.push(twin);
            },
            "spec.containers[1].name",
            "duplicate container name \"app\"",
        ),
        (
            |p| spec(p).containers[0].name = "init".into(),
            "spec.containers[0].name",
            "duplicate container name \"init\"",
        ),
        (
            |p| spec(p).containers[0].name = String::new(),
            "spec.containers[0].name",
            "required",
        ),
        (
            |p| spec(p).containers[0].name = "a".repeat(64),
            "spec.containers[0].name",
            "DNS-1123 label",
        ),
        (
            |p| spec(p).containers[0].name = "my_app".into(),
            "spec.containers[0].name",
            "DNS-1123 label",
        ),
        (
            |p| spec(p).init_containers.as_mut().unwrap()[0].name = "Init".into(),
            "spec.initContainers[0].name",
            "DNS-1123 label",
        ),
        (
            |p| spec(p).containers[0].image = None,
            "spec.containers[0].image",
            "required",
        ),
        (
            |p| spec(p).containers[0].image = Some(String::new()),
            "spec.containers[0].image",
            "required",
        ),
        (
            |p| spec(p).containers[0].image = Some(" nginx".into()),
            "spec.containers[0].image",
            "whitespace",
        ),
        (
            |p| spec(p).init_containers.as_mut().unwrap()[0].image = None,
            "spec.initContainers[0].image",
            "required",
        ),
        (
            |p| port(p, 0).container_port = 0,
            "spec.containers[0].ports[0].containerPort",
            "1..=65535",
        ),
        (
            |p| port(p, 1).container_port = 65536,
            "spec.containers[0].ports[1].containerPort",
            "65536",
        ),
        (
            |p| port(p, 0).host_port = Some(-1),
            "spec.containers[0].ports[0].hostPort",
            "0..=65535",
        ),
        (
            |p| port(p, 0).host_port = Some(70000),
            "spec.containers[0].ports[0].hostPort",
            "70000",
        ),
        (
            |p| port(p, 0).protocol = Some("ICMP".into()),
            "spec.containers[0].ports[0].protocol",
            "\"ICMP\"",
        ),
        (
            |p| port(p, 0).protocol = Some("tcp".into()),
            "spec.containers[0].ports[0].protocol",
            "\"tcp\"",
        ),
        (
            |p| port(p, 0).name = Some("HTTP".into()),
            "spec.containers[0].ports[0].name",
            "port name",
        ),
        (
            |p| port(p, 0).name = Some("a".repeat(16)),
            "spec.containers[0].ports[0].name",
            "port name",
        ),
        (
            |p| port(p, 0).name = Some("8080".into()),
            "spec.containers[0].ports[0].name",
            "port name",
        ),
        (
            |p| port(p, 0).name = Some("a--b".into()),
            "spec.containers[0].ports[0].name",
            "port name",
        ),
        (
            |p| port(p, 1).name = Some("http".into()),
            "spec.containers[0].ports[1].name",
            "duplicate port name \"http\"",
        ),
        (
            |p| spec(p).host_network = Some(true),
            "spec.containers[0].ports[0].hostPort",
            "hostNetwork",
        ),
        (
            |p| spec(p).containers[0].volume_mounts.as_mut().unwrap()[0].name = "cache".into(),
            "spec.containers[0].volumeMounts[0].name",
            "\"cache\" is not a volume",
        ),
        (
            |p| {
                spec(p).init_containers.as_mut().unwrap()[0].volume_mounts =
                    Some(vec![VolumeMount {
                        name: "nope".into(),
                        mount_path: "/x".into(),
                        ..Default::default()
                    }])
            },
            "spec.initContainers[0].volumeMounts[0].name",
            "\"nope\"",
        ),
        (
            |p| spec(p).volumes = None,
            "spec.initContainers[0].volumeMounts[0].name",
            "\"data\"",
        ),
        (
            |p| spec(p).containers[0].volume_mounts.as_mut().unwrap()[0].mount_path = String::new(),
            "spec.containers[0].volumeMounts[0].mountPath",
            "required",
        ),
    ];
    for (edit, field, words) in cases {
        let mut pod = valid_pod();
        edit(&mut pod);
        let err = validate_pod(ORIGIN, &pod).expect_err(field);
        let text = assert_names(&err, Some(field));
        assert!(text.contains(words), "{text}");
    }
}

#[test]
fn host_path_type_must_be_known() {
    let with_type = |kind: Option<&str>| {
        let mut pod = valid_pod();
        spec(&mut pod).volumes.as_mut().unwrap().push(Volume {
            name: "etc".into(),
            host_path: Some(HostPathVolumeSource {
                path: "/etc/kubernetes/admin.conf".into(),
                type_: kind.map(str::to_string),
            }),
            ..Default::default()
        });
        validate_pod(ORIGIN, &pod)
    };
    let known = [
        None,
        Some(""),
        Some("DirectoryOrCreate"),
        Some("Directory"),
        Some("FileOrCreate"),
        Some("File"),
        Some("Socket"),
        Some("CharDevice"),
        Some("BlockDevice"),
    ];
    for kind in known {
        assert_eq!(with_type(kind), Ok(()), "{kind:?}");
    }
    // Case matters, as in the API server; the field names the volume's index.
    for kind in ["directory", "Dir", "FIFO", " File", "Symlink"] {
        let err = with_type(Some(kind)).expect_err(kind);
        let text = assert_names(&err, Some("spec.volumes[1].hostPath.type"));
        assert!(text.contains(&format!("{kind:?} is not one of")), "{text}");
        assert!(text.contains("\"FileOrCreate\""), "{text}");
    }
}

#[test]
fn label_and_subdomain_rules() {
    assert!(dns1123_label_problem(&"a".repeat(63)).is_none());
    assert!(dns1123_label_problem(&"a".repeat(64)).is_some());
    assert!(dns1123_label_problem("a-b-0").is_none());
    assert!(dns1123_label_problem("a-").is_some());
    assert!(dns1123_label_problem("").is_some());
    let at_limit = format!(
        "{}.{}.{}.{}",
        "a".repeat(63),
        "b".repeat(63),
        "c".repeat(63),
        "d".repeat(61)
    );
    assert_eq!(at_limit.len(), 253);
    assert!(dns1123_subdomain_problem(&at_limit).is_none());
    assert!(dns1123_subdomain_problem(&format!("{at_limit}e")).is_some());
    assert!(dns1123_subdomain_problem("a.").is_some());
    assert!(iana_svc_name_problem("http-alt").is_none());
    assert!(iana_svc_name_problem("h2c").is_none());
}

#[test]
fn hostile_input_is_refused_not_crashed_on() {
    let deep_flow = format!("kind: {}", "[".repeat(200_000));
    let deep_json = format!("{}1", "{\"a\":[".repeat(100_000));
    let deep_block: String = (0..1_000)
        .map(|i| format!("{}- \n", " ".repeat(i)))
        .collect();
    let mut laughs = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..10 {
        let refs = vec![format!("*{}", (b'a' + i - 1) as char); 10].join(", ");
        laughs.push_str(&format!(
            "{}: &{} [{refs}]\n",
            (b'a' + i) as char,
            (b'a' + i) as char
        ));
    }
    for input in [deep_flow, deep_json, deep_block, laughs] {
        assert!(input.len() <= MAX_MANIFEST_BYTES);
        let err = parse_pod(ORIGIN, input.as_bytes()).expect_err("hostile input");
        assert_names(&err, None);
    }
}

const LIST: &str = "\
apiVersion: v1
kind: PodList
items:
- metadata: {name: one}
  spec: {containers: [{name: a, image: busybox}]}
- apiVersion: v1
  kind: Pod
  metadata: {name: two}
  spec: {containers: [{name: a, image: busybox}]}
";

#[test]
fn parse_pods_accepts_pod_and_pod_list() {
    let pods = parse_pods(ORIGIN, VALID.as_bytes()).unwrap();
    assert_eq!(pods, vec![valid_pod()]);
    let pods = parse_pods(ORIGIN, LIST.as_bytes()).unwrap();
    let names: Vec<_> = pods
        .iter()
        .map(|p| p.metadata.name.as_deref().unwrap())
        .collect();
    assert_eq!(names, ["one", "two"]);
    for empty in [
        "apiVersion: v1\nkind: PodList\nitems: []\n",
        "apiVersion: v1\nkind: PodList\n",
    ] {
        assert_eq!(
            parse_pods(ORIGIN, empty.as_bytes()).unwrap(),
            Vec::<Pod>::new()
        );
    }
    let json = r#"{"apiVersion":"v1","kind":"PodList","items":[
            {"metadata":{"name":"j"},"spec":{"containers":[{"name":"a","image":"b"}]}}]}"#;
    assert_eq!(parse_pods(ORIGIN, json.as_bytes()).unwrap().len(), 1);
}

#[test]
fn parse_pods_refuses_bad_lists() {
    let cases = [
        (
            "apiVersion: v1\nkind: List\nitems: []\n",
            "kind",
            "\"Pod\" or \"PodList\"",
        ),
        (
            "apiVersion: v2\nkind: PodList\nitems: []\n",
            "apiVersion",
            "\"v2\"",
        ),
        (
            "apiVersion: v1\nkind: PodList\nitems: {a: b}\n",
            "items",
            "must be a list",
        ),
        (
            "apiVersion: v1\nkind: PodList\nitems: [3]\n",
            "items[0]",
            "found a number",
        ),
        (
            "apiVersion: v1\nkind: PodList\nitems: [{kind: Service}]\n",
            "items[0].kind",
            "\"Service\"",
        ),
        (
            "apiVersion: v1\nkind: PodList\nitems: [{apiVersion: v2}]\n",
            "items[0].apiVersion",
            "\"v2\"",
        ),
        (
            "apiVersion: v1\nkind: PodList\nitems: [{spec: {containers: 1}}]\n",
            "items[0].spec.containers",
            "invalid Pod: expected a list, found a number (1)",
        ),
        (
            "apiVersion: v1\nkind: PodList\nitems: [{metadata: {name: x}}]\n",
            "items[0].spec",
            "required",
        ),
    ];
    for (input, field, words) in cases {
        let err = parse_pods(ORIGIN, input.as_bytes()).expect_err(input);
        let text = assert_names(&err, Some(field));
        assert!(text.contains(words), "{input:?}: {text}");
    }
    let bad_second = LIST.replace(
        "  metadata: {name: two}\n  spec: {containers: [{name: a, image: busybox}]}",
        "  metadata: {name: two}\n  spec: {containers: [{name: a}]}",
    );
    let err = parse_pods(ORIGIN, bad_second.as_bytes()).unwrap_err();
    assert_names(&err, Some("items[1].spec.containers[0].image"));
    // The byte-level checks apply to lists too.
    assert_names(&parse_pods(ORIGIN, b"").unwrap_err(), None);
}

/// Pieces of Pod-shaped YAML, glued at random: mostly near-miss manifests.
fn yamlish() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("apiVersion: v1\n".to_owned()),
        Just("kind: Pod\n".to_owned()),
        Just("kind: PodList\nitems:\n".to_owned()),
        Just("metadata:\n  name: web\n".to_owned()),
        Just("spec:\n  containers:\n".to_owned()),
        Just("  - name: app\n    image: nginx\n".to_owned()),
        Just("    ports:\n    - containerPort: 99999\n".to_owned()),
        Just("  volumes: [{name: data}]\n".to_owned()),
        Just("---\n".to_owned()),
        Just("&a ".to_owned()),
        Just("*a\n".to_owned()),
        Just("<<: *a\n".to_owned()),
        Just("!!binary ".to_owned()),
        Just("{".to_owned()),
        Just("}".to_owned()),
        Just("[".to_owned()),
        Just("]".to_owned()),
        Just(": ".to_owned()),
        Just("- ".to_owned()),
        Just("\"".to_owned()),
        Just("'".to_owned()),
        Just("\t".to_owned()),
        Just("\n".to_owned()),
        "[ a-zA-Z0-9:._#-]{0,12}",
    ];
    prop::collection::vec(piece, 0..40).prop_map(|pieces| pieces.concat())
}

proptest! {
    #[test]
    fn never_panics_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let _ = parse_pod(ORIGIN, &bytes);
        let _ = parse_pods(ORIGIN, &bytes);
    }

    #[test]
    fn never_panics_on_yamlish(text in yamlish()) {
        if let Ok(pod) = parse_pod(ORIGIN, text.as_bytes()) {
            prop_assert_eq!(validate_pod(ORIGIN, &pod), Ok(()));
        }
        if let Ok(pods) = parse_pods(ORIGIN, text.as_bytes()) {
            for pod in &pods {
                prop_assert_eq!(validate_pod(ORIGIN, pod), Ok(()));
            }
        }
    }

    #[test]
    fn errors_always_name_the_origin(text in yamlish()) {
        if let Err(err) = parse_pod(ORIGIN, text.as_bytes()) {
            prop_assert!(err.to_string().starts_with(ORIGIN));
        }
    }
}
