use super::*;
use crate::pod::model::parse_pod;
use k8s_openapi::api::core::v1::{
    ContainerPort, HostPathVolumeSource, PodSpec, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use proptest::prelude::*;

const NODE: &str = "Node-1";
const PATH: &str = "/etc/kubernetes/manifests/web.yaml";

fn small_pod() -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("web".into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "app".into(),
                image: Some("nginx".into()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: None,
    }
}

fn seen() -> jiff::Timestamp {
    jiff::Timestamp::new(1_700_000_000, 123).unwrap()
}

fn static_pod(source: PodSource) -> Pod {
    let mut pod = small_pod();
    apply_static_defaults(&mut pod, NODE, &source, seen());
    pod
}

#[test]
fn pull_policy_table() {
    let cases = [
        ("nginx", "Always"),
        ("nginx:latest", "Always"),
        ("nginx:1.27", "IfNotPresent"),
        ("docker.io/library/nginx", "Always"),
        ("registry.k8s.io/pause:3.10", "IfNotPresent"),
        ("127.0.0.1:5000/x", "Always"),
        ("127.0.0.1:5000/x:latest", "Always"),
        ("127.0.0.1:5000/x:v1", "IfNotPresent"),
        ("localhost:5000/team/app", "Always"),
        ("nginx@sha256:0123abcd", "IfNotPresent"),
        ("127.0.0.1:5000/x@sha256:0123abcd", "IfNotPresent"),
        ("nginx:latest@sha256:0123abcd", "IfNotPresent"),
        ("nginx:Latest", "IfNotPresent"),
        ("", "Always"),
    ];
    for (image, want) in cases {
        assert_eq!(default_pull_policy(image), want, "{image}");
    }
}

#[test]
fn api_defaults_fill_every_absent_field() {
    let mut pod = small_pod();
    let spec = pod.spec.as_mut().unwrap();
    spec.init_containers = Some(vec![Container {
        name: "init".into(),
        image: Some("busybox:1.36".into()),
        ..Container::default()
    }]);
    spec.containers[0].ports = Some(vec![ContainerPort {
        container_port: 80,
        ..ContainerPort::default()
    }]);
    apply_api_defaults(&mut pod);
    let spec = pod.spec.as_ref().unwrap();
    let app = &spec.containers[0];
    let init = &spec.init_containers.as_ref().unwrap()[0];
    let port = &app.ports.as_ref().unwrap()[0];
    let table: [(&str, String, &str); 14] = [
        (
            "restartPolicy",
            format!("{:?}", spec.restart_policy),
            "Some(\"Always\")",
        ),
        (
            "terminationGracePeriodSeconds",
            format!("{:?}", spec.termination_grace_period_seconds),
            "Some(30)",
        ),
        (
            "dnsPolicy",
            format!("{:?}", spec.dns_policy),
            "Some(\"ClusterFirst\")",
        ),
        (
            "schedulerName",
            format!("{:?}", spec.scheduler_name),
            "Some(\"default-scheduler\")",
        ),
        (
            "enableServiceLinks",
            format!("{:?}", spec.enable_service_links),
            "Some(true)",
        ),
        (
            "securityContext",
            format!(
                "{:?}",
                spec.security_context == Some(PodSecurityContext::default())
            ),
            "true",
        ),
        (
            "app imagePullPolicy",
            format!("{:?}", app.image_pull_policy),
            "Some(\"Always\")",
        ),
        (
            "app terminationMessagePath",
            format!("{:?}", app.termination_message_path),
            "Some(\"/dev/termination-log\")",
        ),
        (
            "app terminationMessagePolicy",
            format!("{:?}", app.termination_message_policy),
            "Some(\"File\")",
        ),
        (
            "init imagePullPolicy",
            format!("{:?}", init.image_pull_policy),
            "Some(\"IfNotPresent\")",
        ),
        (
            "init terminationMessagePath",
            format!("{:?}", init.termination_message_path),
            "Some(\"/dev/termination-log\")",
        ),
        (
            "init terminationMessagePolicy",
            format!("{:?}", init.termination_message_policy),
            "Some(\"File\")",
        ),
        (
            "port protocol",
            format!("{:?}", port.protocol),
            "Some(\"TCP\")",
        ),
        (
            "port hostPort (no hostNetwork)",
            format!("{:?}", port.host_port),
            "None",
        ),
    ];
    for (what, got, want) in table {
        assert_eq!(got, want, "{what}");
    }
}

#[test]
fn api_defaults_keep_explicit_values() {
    let mut pod = small_pod();
    let spec = pod.spec.as_mut().unwrap();
    spec.restart_policy = Some("Never".into());
    spec.termination_grace_period_seconds = Some(5);
    spec.dns_policy = Some("Default".into());
    spec.scheduler_name = Some("mine".into());
    spec.enable_service_links = Some(false);
    spec.security_context = Some(PodSecurityContext {
        run_as_user: Some(1000),
        ..PodSecurityContext::default()
    });
    let app = &mut spec.containers[0];
    app.image_pull_policy = Some("Never".into());
    app.termination_message_path = Some("/tmp/msg".into());
    app.termination_message_policy = Some("FallbackToLogsOnError".into());
    app.ports = Some(vec![ContainerPort {
        container_port: 53,
        protocol: Some("UDP".into()),
        ..ContainerPort::default()
    }]);
    let before = pod.clone();
    apply_api_defaults(&mut pod);
    assert_eq!(pod, before);
}

#[test]
fn api_defaults_are_idempotent_and_skip_specless_pods() {
    let mut once = small_pod();
    apply_api_defaults(&mut once);
    let mut twice = once.clone();
    apply_api_defaults(&mut twice);
    assert_eq!(once, twice);
    let mut bare = Pod::default();
    apply_api_defaults(&mut bare);
    assert_eq!(bare, Pod::default());
}

#[test]
fn sourceless_volume_becomes_empty_dir() {
    let mut pod = small_pod();
    let host = Volume {
        name: "host".into(),
        host_path: Some(HostPathVolumeSource {
            path: "/var/log".into(),
            type_: None,
        }),
        ..Volume::default()
    };
    let bare = Volume {
        name: "scratch".into(),
        ..Volume::default()
    };
    pod.spec.as_mut().unwrap().volumes = Some(vec![host.clone(), bare]);
    apply_api_defaults(&mut pod);
    let volumes = pod.spec.unwrap().volumes.unwrap();
    assert_eq!(volumes[0], host);
    assert_eq!(volumes[1].empty_dir, Some(EmptyDirVolumeSource::default()));
}

#[test]
fn requests_default_to_limits() {
    let q = |s: &str| Quantity(s.into());
    let mut pod = small_pod();
    pod.spec.as_mut().unwrap().containers[0].resources = Some(ResourceRequirements {
        limits: Some(BTreeMap::from([
            ("cpu".into(), q("1")),
            ("memory".into(), q("1Gi")),
        ])),
        requests: Some(BTreeMap::from([("cpu".into(), q("500m"))])),
        ..ResourceRequirements::default()
    });
    apply_api_defaults(&mut pod);
    let resources = pod.spec.unwrap().containers[0].resources.clone().unwrap();
    let want = BTreeMap::from([("cpu".into(), q("500m")), ("memory".into(), q("1Gi"))]);
    assert_eq!(resources.requests, Some(want));
}

#[test]
fn host_network_host_port_defaults_to_container_port() {
    let mut pod = small_pod();
    let spec = pod.spec.as_mut().unwrap();
    spec.host_network = Some(true);
    spec.containers[0].ports = Some(vec![
        ContainerPort {
            container_port: 80,
            ..ContainerPort::default()
        },
        ContainerPort {
            container_port: 81,
            host_port: Some(0),
            ..ContainerPort::default()
        },
    ]);
    apply_api_defaults(&mut pod);
    let ports = pod.spec.unwrap().containers[0].ports.clone().unwrap();
    assert_eq!(ports[0].host_port, Some(80));
    assert_eq!(ports[1].host_port, Some(81));
}

#[test]
fn uid_recipe_is_pinned() {
    let pod = small_pod();
    // The serialization is part of the recipe: pin it byte for byte.
    let json = concat!(
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"#,
        r#""spec":{"containers":[{"image":"nginx","name":"app"}]}}"#,
    );
    assert_eq!(
        String::from_utf8(serde_json::to_vec(&pod).unwrap()).unwrap(),
        json
    );
    let mut md5 = Md5::new();
    md5.update(format!("host:{NODE}file:{PATH}{json}"));
    let independent = hex::encode(md5.finalize());
    let uid = static_pod_uid(&pod, NODE, &PodSource::File(PATH));
    assert_eq!(uid, independent);
    // Computed outside Rust (Python hashlib) from the same bytes.
    assert_eq!(uid, "389179ea46ff29c9eb54755a9e524124");
    let mut md5 = Md5::new();
    md5.update(format!("host:{NODE}url:http://cfg/pods{json}"));
    let uid = static_pod_uid(&pod, NODE, &PodSource::Url("http://cfg/pods"));
    assert_eq!(uid, hex::encode(md5.finalize()));
    assert_eq!(uid.len(), 32);
    assert!(
        uid.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    );
}

#[test]
fn serialization_is_deterministic() {
    // Maps built in opposite insertion orders serialize identically.
    let mut a = small_pod();
    let mut b = small_pod();
    let keys = ["z", "a", "m", "b", "y"];
    a.metadata.labels = Some(
        keys.iter()
            .map(|k| (k.to_string(), k.to_string()))
            .collect(),
    );
    b.metadata.labels = Some(
        keys.iter()
            .rev()
            .map(|k| (k.to_string(), k.to_string()))
            .collect(),
    );
    assert_eq!(
        serde_json::to_vec(&a).unwrap(),
        serde_json::to_vec(&b).unwrap()
    );
    // And manifests that differ only in key order hash the same.
    let one = "apiVersion: v1\nkind: Pod\nmetadata: {name: web, labels: {b: '2', a: '1'}}\n\
                   spec: {containers: [{name: app, image: nginx}]}\n";
    let two = "kind: Pod\nspec: {containers: [{image: nginx, name: app}]}\n\
                   metadata: {labels: {a: '1', b: '2'}, name: web}\napiVersion: v1\n";
    let uid = |text: &str| {
        let mut pod = parse_pod(PATH, text.as_bytes()).unwrap();
        apply_api_defaults(&mut pod);
        static_pod_uid(&pod, NODE, &PodSource::File(PATH))
    };
    assert_eq!(uid(one), uid(two));
}

#[test]
fn uid_changes_with_every_input() {
    let pod = small_pod();
    let base = static_pod_uid(&pod, NODE, &PodSource::File(PATH));
    let mut edited = pod.clone();
    edited.spec.as_mut().unwrap().containers[0].image = Some("nginx:1.27".into());
    let variants = [
        static_pod_uid(&edited, NODE, &PodSource::File(PATH)),
        static_pod_uid(&pod, "node-2", &PodSource::File(PATH)),
        static_pod_uid(
            &pod,
            NODE,
            &PodSource::File("/etc/kubernetes/manifests/other.yaml"),
        ),
        static_pod_uid(&pod, NODE, &PodSource::Url(PATH)),
    ];
    for variant in variants {
        assert_ne!(variant, base);
    }
    assert_eq!(
        static_pod_uid(&pod.clone(), NODE, &PodSource::File(PATH)),
        base
    );
}

#[test]
fn static_defaults_table() {
    let pod = static_pod(PodSource::File(PATH));
    let mut api_defaulted = small_pod();
    apply_api_defaults(&mut api_defaulted);
    let uid = static_pod_uid(&api_defaulted, NODE, &PodSource::File(PATH));
    let annotation = |key| crate::pod::annotation(&pod, key).map(str::to_owned);
    let spec = pod.spec.as_ref().unwrap();
    let table: [(&str, Option<String>, Option<&str>); 8] = [
        ("uid", pod.metadata.uid.clone(), Some(&uid)),
        ("name", pod.metadata.name.clone(), Some("web-node-1")),
        ("namespace", pod.metadata.namespace.clone(), Some("default")),
        ("nodeName", spec.node_name.clone(), Some(NODE)),
        (
            "config.source",
            annotation(CONFIG_SOURCE_ANNOTATION),
            Some("file"),
        ),
        (
            "config.hash",
            annotation(CONFIG_HASH_ANNOTATION),
            Some(&uid),
        ),
        (
            "config.seen",
            annotation(CONFIG_SEEN_ANNOTATION),
            Some("2023-11-14T22:13:20.000000123Z"),
        ),
        (
            "restartPolicy (API default)",
            spec.restart_policy.clone(),
            Some("Always"),
        ),
    ];
    for (what, got, want) in table {
        assert_eq!(got.as_deref(), want, "{what}");
    }
    let tolerations = spec.tolerations.as_ref().unwrap();
    assert_eq!(tolerations.len(), 1);
    assert_eq!(tolerations[0].operator.as_deref(), Some("Exists"));
    assert_eq!(tolerations[0].effect.as_deref(), Some("NoExecute"));
    assert_eq!(tolerations[0].key, None);
    assert!(crate::pod::is_static_pod(&pod));
    assert_eq!(crate::pod::full_name(&pod), "web-node-1_default");
}

#[test]
fn seen_is_rfc3339_nano() {
    let at = |secs, nanos| format_seen(jiff::Timestamp::new(secs, nanos).unwrap());
    assert_eq!(at(1_700_000_000, 123), "2023-11-14T22:13:20.000000123Z");
    assert_eq!(at(1_700_000_000, 500_000_000), "2023-11-14T22:13:20.5Z");
    assert_eq!(at(1_700_000_000, 0), "2023-11-14T22:13:20Z");
}

#[test]
fn static_defaults_for_url_source() {
    let pod = static_pod(PodSource::Url("http://cfg/pods"));
    assert_eq!(
        crate::pod::annotation(&pod, CONFIG_SOURCE_ANNOTATION),
        Some("http")
    );
    assert!(crate::pod::is_static_pod(&pod));
    assert_ne!(
        pod.metadata.uid,
        static_pod(PodSource::File(PATH)).metadata.uid
    );
}

#[test]
fn static_defaults_keep_what_the_manifest_set() {
    let mut pod = small_pod();
    pod.metadata.uid = Some("my-own-uid".into());
    pod.metadata.namespace = Some("kube-system".into());
    pod.metadata.annotations = Some(BTreeMap::from([("team".into(), "infra".into())]));
    let other = Toleration {
        key: Some("dedicated".into()),
        operator: Some("Equal".into()),
        value: Some("infra".into()),
        effect: Some("NoSchedule".into()),
        ..Toleration::default()
    };
    let no_execute = Toleration {
        operator: Some("Exists".into()),
        effect: Some("NoExecute".into()),
        ..Toleration::default()
    };
    pod.spec.as_mut().unwrap().tolerations = Some(vec![other.clone(), no_execute.clone()]);
    apply_static_defaults(&mut pod, NODE, &PodSource::File(PATH), seen());
    assert_eq!(pod.metadata.uid.as_deref(), Some("my-own-uid"));
    assert_eq!(
        crate::pod::annotation(&pod, CONFIG_HASH_ANNOTATION),
        Some("my-own-uid")
    );
    assert_eq!(pod.metadata.namespace.as_deref(), Some("kube-system"));
    assert_eq!(crate::pod::annotation(&pod, "team"), Some("infra"));
    assert_eq!(pod.spec.unwrap().tolerations, Some(vec![other, no_execute]));
}

#[test]
fn static_defaults_treat_empty_uid_and_namespace_as_unset() {
    let mut pod = small_pod();
    pod.metadata.uid = Some(String::new());
    pod.metadata.namespace = Some(String::new());
    apply_static_defaults(&mut pod, NODE, &PodSource::File(PATH), seen());
    assert_eq!(pod.metadata.uid.as_ref().map(String::len), Some(32));
    assert_eq!(pod.metadata.namespace.as_deref(), Some("default"));
}

#[test]
fn static_defaults_are_not_idempotent() {
    // Documented: the sources apply them once per read.
    let mut pod = static_pod(PodSource::File(PATH));
    apply_static_defaults(&mut pod, NODE, &PodSource::File(PATH), seen());
    assert_eq!(pod.metadata.name.as_deref(), Some("web-node-1-node-1"));
}

#[test]
fn content_equality_ignores_only_seen() {
    let a = static_pod(PodSource::File(PATH));
    let mut b = a.clone();
    b.metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(CONFIG_SEEN_ANNOTATION.into(), "later".into());
    assert!(pod_content_equal(&a, &b));
    let mut no_seen = a.clone();
    no_seen
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .remove(CONFIG_SEEN_ANNOTATION);
    assert!(pod_content_equal(&a, &no_seen));
    // Only-seen versus no annotations at all is the same content.
    let mut only_seen = small_pod();
    only_seen.metadata.annotations = Some(BTreeMap::from([(
        CONFIG_SEEN_ANNOTATION.into(),
        "t".into(),
    )]));
    assert!(pod_content_equal(&only_seen, &small_pod()));

    let mut hash = a.clone();
    hash.metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(CONFIG_HASH_ANNOTATION.into(), "x".into());
    assert!(!pod_content_equal(&a, &hash));
    let mut image = a.clone();
    image.spec.as_mut().unwrap().containers[0].image = Some("nginx:2".into());
    assert!(!pod_content_equal(&a, &image));
    let mut label = a.clone();
    label.metadata.labels = Some(BTreeMap::from([("x".into(), "y".into())]));
    assert!(!pod_content_equal(&a, &label));
}

/// etcd's container as kubeadm writes it: every defaultable probe field
/// omitted, an init container with a probe-less spec, hooks without path.
const KUBEADM_PROBES: &str = "\
apiVersion: v1
kind: Pod
metadata: {name: etcd, namespace: kube-system}
spec:
  hostNetwork: true
  initContainers:
  - name: init
    image: busybox
    restartPolicy: Always
    readinessProbe:
      tcpSocket: {port: 2381}
  containers:
  - name: etcd
    image: registry.k8s.io/etcd:3.5.15-0
    livenessProbe:
      httpGet: {host: 127.0.0.1, path: /livez, port: 2381, scheme: HTTP}
      initialDelaySeconds: 10
      timeoutSeconds: 15
      failureThreshold: 8
    readinessProbe:
      httpGet: {host: 127.0.0.1, port: 2381}
      periodSeconds: 1
    startupProbe:
      exec: {command: [etcdctl, endpoint, health]}
      failureThreshold: 24
    lifecycle:
      postStart:
        httpGet: {port: 2381}
      preStop:
        exec: {command: [sh, -c, sleep 1]}
";

fn probes(pod: &Pod) -> Vec<Probe> {
    let spec = pod.spec.as_ref().unwrap();
    let init = spec.init_containers.iter().flatten();
    init.chain(&spec.containers)
        .flat_map(|c| [&c.liveness_probe, &c.readiness_probe, &c.startup_probe])
        .flatten()
        .cloned()
        .collect()
}

#[test]
fn probe_defaults_fill_omitted_fields() {
    let mut pod = parse_pod(PATH, KUBEADM_PROBES.as_bytes()).unwrap();
    apply_api_defaults(&mut pod);
    // (period, timeout, success, failure, initialDelay) per probe, init first.
    let got: Vec<_> = probes(&pod)
        .iter()
        .map(|p| {
            (
                p.period_seconds,
                p.timeout_seconds,
                p.success_threshold,
                p.failure_threshold,
                p.initial_delay_seconds,
            )
        })
        .collect();
    let want = vec![
        (Some(10), Some(1), Some(1), Some(3), None), // init readiness
        (Some(10), Some(15), Some(1), Some(8), Some(10)), // liveness
        (Some(1), Some(1), Some(1), Some(3), None),  // readiness
        (Some(10), Some(1), Some(1), Some(24), None), // startup
    ];
    assert_eq!(got, want);
    let etcd = &pod.spec.as_ref().unwrap().containers[0];
    let http = |p: &Option<Probe>| {
        let h = p.as_ref().unwrap().http_get.clone().unwrap();
        (h.path, h.scheme)
    };
    let path_scheme = |path: &str| (Some(path.to_string()), Some("HTTP".to_string()));
    assert_eq!(http(&etcd.liveness_probe), path_scheme("/livez"));
    assert_eq!(http(&etcd.readiness_probe), path_scheme("/"));
    let lifecycle = etcd.lifecycle.as_ref().unwrap();
    let post_start = lifecycle
        .post_start
        .as_ref()
        .unwrap()
        .http_get
        .clone()
        .unwrap();
    assert_eq!((post_start.path, post_start.scheme), path_scheme("/"));
    assert_eq!(lifecycle.pre_stop.as_ref().unwrap().http_get, None);
}

#[test]
fn probe_defaults_treat_zero_and_empty_as_absent() {
    // The API server's fields are plain ints and strings: 0 and "" are unset.
    let zeros = KUBEADM_PROBES
        .replace("periodSeconds: 1", "periodSeconds: 0")
        .replace("failureThreshold: 8", "failureThreshold: 0")
        .replace("path: /livez, ", "path: '', ")
        .replace("scheme: HTTP", "scheme: ''");
    let mut pod = parse_pod(PATH, zeros.as_bytes()).unwrap();
    apply_api_defaults(&mut pod);
    let etcd = &pod.spec.as_ref().unwrap().containers[0];
    let live = etcd.liveness_probe.as_ref().unwrap();
    assert_eq!(live.failure_threshold, Some(3));
    let http = live.http_get.as_ref().unwrap();
    assert_eq!(http.path.as_deref(), Some("/"));
    assert_eq!(http.scheme.as_deref(), Some("HTTP"));
    let ready = etcd.readiness_probe.as_ref().unwrap();
    assert_eq!(ready.period_seconds, Some(10));
    // An explicit initialDelaySeconds: 0 is kept as written (no default).
    let explicit = KUBEADM_PROBES.replace("initialDelaySeconds: 10", "initialDelaySeconds: 0");
    let mut pod = parse_pod(PATH, explicit.as_bytes()).unwrap();
    apply_api_defaults(&mut pod);
    assert_eq!(probes(&pod)[1].initial_delay_seconds, Some(0));
}

#[test]
fn probe_defaults_are_idempotent_and_keep_given_values() {
    let mut once = parse_pod(PATH, KUBEADM_PROBES.as_bytes()).unwrap();
    apply_api_defaults(&mut once);
    let mut twice = once.clone();
    apply_api_defaults(&mut twice);
    assert_eq!(once, twice);
    let mut https = once.clone();
    let c = &mut https.spec.as_mut().unwrap().containers[0];
    let h = c
        .liveness_probe
        .as_mut()
        .unwrap()
        .http_get
        .as_mut()
        .unwrap();
    h.scheme = Some("HTTPS".into());
    let before = https.clone();
    apply_api_defaults(&mut https);
    assert_eq!(https, before);
}

/// The kubelet hashes the decoded, defaulted pod: a manifest that spells out
/// the probe defaults is the same pod as one that omits them.
#[test]
fn uid_is_the_same_for_omitted_and_spelled_out_probe_defaults() {
    let uid = |text: &str| {
        let mut pod = parse_pod(PATH, text.as_bytes()).unwrap();
        apply_static_defaults(&mut pod, NODE, &PodSource::File(PATH), seen());
        pod.metadata.uid.unwrap()
    };
    let spelled = KUBEADM_PROBES.replace(
        "periodSeconds: 1",
        "periodSeconds: 1\n      timeoutSeconds: 1\n      successThreshold: 1\n      \
         failureThreshold: 3",
    );
    let zero = KUBEADM_PROBES.replace(
        "periodSeconds: 1",
        "periodSeconds: 1\n      timeoutSeconds: 0",
    );
    assert_ne!(spelled, KUBEADM_PROBES);
    assert_eq!(uid(&spelled), uid(KUBEADM_PROBES));
    assert_eq!(uid(&zero), uid(KUBEADM_PROBES));
    let edited = KUBEADM_PROBES.replace("periodSeconds: 1", "periodSeconds: 2");
    assert_ne!(uid(&edited), uid(KUBEADM_PROBES));
}

fn arb_pod() -> impl Strategy<Value = Pod> {
    (
        "[a-z]{1,8}",
        "[a-z]{1,8}(:[a-z0-9.]{1,5})?",
        prop::option::of(0i64..100),
    )
        .prop_map(|(name, image, grace)| {
            let mut pod = small_pod();
            pod.metadata.name = Some(name);
            let spec = pod.spec.as_mut().unwrap();
            spec.containers[0].image = Some(image);
            spec.termination_grace_period_seconds = grace;
            apply_api_defaults(&mut pod);
            pod
        })
}

proptest! {
    #[test]
    fn uid_is_a_function_of_its_inputs(
        pod in arb_pod(),
        other in arb_pod(),
        node in "[a-z0-9-]{1,10}",
        other_node in "[a-z0-9-]{1,10}",
        path in "/[a-z/]{1,20}",
        other_path in "/[a-z/]{1,20}",
    ) {
        let source = PodSource::File(&path);
        let uid = static_pod_uid(&pod, &node, &source);
        // A round trip through JSON (what a re-read does) keeps the UID.
        let reread: Pod = serde_json::from_slice(&serde_json::to_vec(&pod).unwrap()).unwrap();
        prop_assert_eq!(&static_pod_uid(&reread, &node, &source), &uid);
        if other != pod {
            prop_assert_ne!(&static_pod_uid(&other, &node, &source), &uid);
        }
        if other_node != node {
            prop_assert_ne!(&static_pod_uid(&pod, &other_node, &source), &uid);
        }
        if other_path != path {
            prop_assert_ne!(&static_pod_uid(&pod, &node, &PodSource::File(&other_path)), &uid);
        }
        prop_assert_ne!(&static_pod_uid(&pod, &node, &PodSource::Url(&path)), &uid);
    }
}

#[test]
fn display_defaults_fill_field_ref_versions_and_host_path_types_only() {
    let mut pod = parse_pod(
        "display.json",
        br#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}, "spec": {
            "containers": [{"name": "app", "image": "nginx", "env": [
                {"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "B", "valueFrom": {"fieldRef": {"apiVersion": "v2", "fieldPath": "metadata.uid"}}},
                {"name": "C", "value": "c"}]}],
            "initContainers": [{"name": "init", "image": "nginx", "env": [
                {"name": "D", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]}],
            "volumes": [{"name": "h", "hostPath": {"path": "/x"}},
                        {"name": "t", "hostPath": {"path": "/y", "type": "Directory"}},
                        {"name": "e", "emptyDir": {}}]}}"#,
    )
    .unwrap();
    let before = pod.clone();
    apply_display_defaults(&mut pod);
    let spec = pod.spec.as_ref().unwrap();
    let version = |c: &Container, i: usize| {
        let env = &c.env.as_ref().unwrap()[i];
        env.value_from
            .as_ref()
            .unwrap()
            .field_ref
            .as_ref()
            .unwrap()
            .api_version
            .clone()
    };
    assert_eq!(version(&spec.containers[0], 0).as_deref(), Some("v1"));
    assert_eq!(version(&spec.containers[0], 1).as_deref(), Some("v2"));
    assert_eq!(
        version(&spec.init_containers.as_ref().unwrap()[0], 0).as_deref(),
        Some("v1")
    );
    let volumes = spec.volumes.as_ref().unwrap();
    assert_eq!(
        volumes[0].host_path.as_ref().unwrap().type_.as_deref(),
        Some("")
    );
    assert_eq!(
        volumes[1].host_path.as_ref().unwrap().type_.as_deref(),
        Some("Directory")
    );
    assert_eq!(
        volumes[2],
        before.spec.as_ref().unwrap().volumes.as_ref().unwrap()[2]
    );
    // Applying them again changes nothing.
    let once = pod.clone();
    apply_display_defaults(&mut pod);
    assert_eq!(pod, once);
}

#[test]
fn display_defaults_write_an_absent_divisor_as_zero_and_keep_a_given_one() {
    let mut pod: Pod = serde_json::from_str(
        r#"{"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "nginx", "env": [
                {"name": "A", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
                {"name": "B", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}}]}]}}"#,
    )
    .unwrap();
    apply_display_defaults(&mut pod);
    let env = pod.spec.as_ref().unwrap().containers[0]
        .env
        .clone()
        .unwrap();
    let divisor = |i: usize| {
        let r = env[i].value_from.as_ref().unwrap();
        r.resource_field_ref
            .as_ref()
            .unwrap()
            .divisor
            .clone()
            .unwrap()
            .0
    };
    assert_eq!(divisor(0), "0");
    assert_eq!(divisor(1), "1Mi");
}
