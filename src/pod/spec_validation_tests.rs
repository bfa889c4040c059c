//! One row per rule of `spec_validation`: a manifest fragment that passes
//! and one that fails, with the field path and message the failure gives.

use serde_json::{Value, json};

use crate::pod::field_validation::tests::{check, check_rows, container};

fn volume(v: Value) -> Value {
    json!({"spec": {"volumes": [v]}})
}

fn env(e: Value) -> Value {
    container(json!({"env": [e]}))
}

fn resource_ref(selector: Value) -> Value {
    json!({"name": "X", "valueFrom": {"resourceFieldRef": selector}})
}

fn field_ref(path: &str) -> Value {
    json!({"name": "X", "valueFrom": {"fieldRef": {"fieldPath": path}}})
}

#[test]
fn dns_rows() {
    check_rows(vec![
        (
            "dnsPolicy",
            json!({"spec": {"dnsPolicy": "ClusterFirstWithHostNet"}}),
            json!({"spec": {"dnsPolicy": "Cluster"}}),
            "spec.dnsPolicy: Unsupported value: \"Cluster\": supported values: \"ClusterFirst\", \"ClusterFirstWithHostNet\", \"Default\", \"None\"",
        ),
        (
            "dnsConfig required with None",
            json!({"spec": {"dnsPolicy": "None", "dnsConfig": {"nameservers": ["1.1.1.1"]}}}),
            json!({"spec": {"dnsPolicy": "None"}}),
            "spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None",
        ),
        (
            "a nameserver with None",
            json!({"spec": {"dnsPolicy": "None", "dnsConfig": {"nameservers": ["::1"]}}}),
            json!({"spec": {"dnsPolicy": "None", "dnsConfig": {"searches": ["a.b"]}}}),
            "spec.dnsConfig.nameservers: Required value: must provide at least one DNS nameserver",
        ),
        (
            "three nameservers",
            json!({"spec": {"dnsConfig": {"nameservers": ["1.1.1.1", "1.0.0.1", "8.8.8.8"]}}}),
            json!({"spec": {"dnsConfig": {"nameservers": ["1.1.1.1", "1.0.0.1", "8.8.8.8", "9.9.9.9"]}}}),
            "spec.dnsConfig.nameservers: Invalid value: must not have more than 3 nameservers",
        ),
        (
            "nameserver IP",
            json!({"spec": {"dnsConfig": {"nameservers": ["10.9.8.7"]}}}),
            json!({"spec": {"dnsConfig": {"nameservers": ["dns.local"]}}}),
            "spec.dnsConfig.nameservers[0]: Invalid value: \"dns.local\": must be a valid IP address",
        ),
        (
            "32 search paths",
            json!({"spec": {"dnsConfig": {"searches": vec!["a.b"; 32]}}}),
            json!({"spec": {"dnsConfig": {"searches": vec!["a.b"; 33]}}}),
            "spec.dnsConfig.searches: Invalid value: must not have more than 32 search paths",
        ),
        (
            "search list length",
            // 8 names of 253 characters, one of 16 or 17, and 8 spaces:
            // 2048, then 2049.
            json!({"spec": {"dnsConfig": {"searches": searches(16)}}}),
            json!({"spec": {"dnsConfig": {"searches": searches(17)}}}),
            "spec.dnsConfig.searches: Invalid value: must not have more than 2048 characters",
        ),
        (
            "search domain",
            json!({"spec": {"dnsConfig": {"searches": [".", "svc.cluster.local."]}}}),
            json!({"spec": {"dnsConfig": {"searches": ["Bad_Domain"]}}}),
            "spec.dnsConfig.searches[0]: \"Bad_Domain\" is not a DNS-1123 subdomain",
        ),
        (
            "option name",
            json!({"spec": {"dnsConfig": {"options": [{"name": "ndots", "value": "2"}]}}}),
            json!({"spec": {"dnsConfig": {"options": [{"value": "2"}]}}}),
            "spec.dnsConfig.options[0]: Required value: Option.Name must not be empty",
        ),
    ]);
}

/// Eight search domains of 253 characters and one of `last`.
fn searches(last: usize) -> Vec<String> {
    let mut all = vec![long_domain(253); 8];
    all.push(long_domain(last));
    all
}

/// A valid search domain of `len` (≤ 253) characters: labels of at most
/// 50 letters between dots.
fn long_domain(len: usize) -> String {
    (0..len)
        .map(|i| {
            if (i + 1) % 51 == 0 && i + 1 != len {
                '.'
            } else {
                'a'
            }
        })
        .collect()
}

#[test]
fn security_context_rows() {
    let sc = |v: Value| container(json!({"securityContext": v}));
    check_rows(vec![
        (
            "pod runAsUser",
            json!({"spec": {"securityContext": {"runAsUser": 0}}}),
            json!({"spec": {"securityContext": {"runAsUser": -1}}}),
            "spec.securityContext.runAsUser: Invalid value: -1: must be between 0 and 2147483647, inclusive",
        ),
        (
            "pod runAsGroup",
            json!({"spec": {"securityContext": {"runAsGroup": 2147483647}}}),
            json!({"spec": {"securityContext": {"runAsGroup": 2147483648_i64}}}),
            "spec.securityContext.runAsGroup: Invalid value: 2147483648: must be between 0",
        ),
        (
            "fsGroup",
            json!({"spec": {"securityContext": {"fsGroup": 2000}}}),
            json!({"spec": {"securityContext": {"fsGroup": -2}}}),
            "spec.securityContext.fsGroup: Invalid value: -2",
        ),
        (
            "fsGroupChangePolicy",
            json!({"spec": {"securityContext": {"fsGroup": 2000, "fsGroupChangePolicy": "OnRootMismatch"}}}),
            json!({"spec": {"securityContext": {"fsGroup": 2000, "fsGroupChangePolicy": "Sometimes"}}}),
            "spec.securityContext.fsGroupChangePolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnRootMismatch\"",
        ),
        (
            "supplementalGroups",
            json!({"spec": {"securityContext": {"supplementalGroups": [1, 2]}}}),
            json!({"spec": {"securityContext": {"supplementalGroups": [1, -2]}}}),
            "spec.securityContext.supplementalGroups[1]: Invalid value: -2",
        ),
        (
            "sysctl name",
            json!({"spec": {"securityContext": {"sysctls": [{"name": "net.ipv4.ip_forward", "value": "1"}]}}}),
            json!({"spec": {"securityContext": {"sysctls": [{"name": "net..x", "value": "1"}]}}}),
            "spec.securityContext.sysctls[0].name: Invalid value: \"net..x\"",
        ),
        (
            "container runAsUser",
            sc(json!({"runAsUser": 65534})),
            sc(json!({"runAsUser": -5})),
            "spec.containers[0].securityContext.runAsUser: Invalid value: -5",
        ),
        (
            "container runAsGroup",
            sc(json!({"runAsGroup": 1})),
            sc(json!({"runAsGroup": -1})),
            "spec.containers[0].securityContext.runAsGroup: Invalid value: -1",
        ),
        (
            "procMount",
            sc(json!({"procMount": "Default"})),
            sc(json!({"procMount": "Host"})),
            "spec.containers[0].securityContext.procMount: Unsupported value: \"Host\"",
        ),
        (
            "privileged without escalation",
            sc(json!({"privileged": true, "allowPrivilegeEscalation": true})),
            sc(json!({"privileged": true, "allowPrivilegeEscalation": false})),
            "spec.containers[0].securityContext: Invalid value: cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
        ),
        (
            "CAP_SYS_ADMIN without escalation",
            sc(json!({"allowPrivilegeEscalation": false, "capabilities": {"add": ["NET_ADMIN"]}})),
            sc(
                json!({"allowPrivilegeEscalation": false, "capabilities": {"add": ["CAP_SYS_ADMIN"]}}),
            ),
            "`capabilities.Add` CAP_SYS_ADMIN",
        ),
    ]);
}

#[test]
fn volume_and_env_source_rows() {
    check_rows(vec![
        (
            "emptyDir sizeLimit",
            volume(json!({"name": "v", "emptyDir": {"sizeLimit": "1Gi"}})),
            volume(json!({"name": "v", "emptyDir": {"sizeLimit": "big"}})),
            "spec.volumes[0].emptyDir.sizeLimit: Invalid value: \"big\": quantities must match",
        ),
        (
            "negative emptyDir sizeLimit",
            volume(json!({"name": "v", "emptyDir": {"medium": "Memory"}})),
            volume(json!({"name": "v", "emptyDir": {"sizeLimit": "-1Mi"}})),
            "spec.volumes[0].emptyDir.sizeLimit: Invalid value: \"-1Mi\": must be greater than or equal to 0",
        ),
        (
            "configMap volume",
            volume(json!({"name": "v"})),
            volume(json!({"name": "v", "configMap": {"name": "cm"}})),
            "spec.volumes[0].configMap: Forbidden: static pods cannot use it: it needs objects from the API server",
        ),
        (
            "secret volume",
            volume(json!({"name": "v", "hostPath": {"path": "/etc/kubernetes/pki"}})),
            volume(json!({"name": "v", "secret": {"secretName": "s"}})),
            "spec.volumes[0].secret: Forbidden: static pods cannot use it",
        ),
        (
            "projected token volume",
            volume(json!({"name": "v", "emptyDir": {}})),
            volume(
                json!({"name": "v", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}),
            ),
            "spec.volumes[0].projected: Forbidden: static pods cannot use it",
        ),
        (
            "nfs volume",
            volume(json!({"name": "v", "emptyDir": {}})),
            volume(json!({"name": "v", "nfs": {"server": "s", "path": "/x"}})),
            "spec.volumes[0].nfs: Forbidden: crilet mounts only hostPath and emptyDir volumes",
        ),
        (
            "ephemeral containers",
            json!({"spec": {"ephemeralContainers": []}}),
            json!({"spec": {"ephemeralContainers": [{"name": "debug", "image": "busybox"}]}}),
            "spec.ephemeralContainers: Forbidden: cannot be set on create",
        ),
        (
            "envFrom",
            container(json!({"envFrom": []})),
            container(json!({"envFrom": [{"configMapRef": {"name": "cm"}}]})),
            "spec.containers[0].envFrom: Forbidden: static pods cannot use it",
        ),
        (
            "valueFrom without a source",
            env(field_ref("metadata.name")),
            env(json!({"name": "X", "valueFrom": {}})),
            "spec.containers[0].env[0].valueFrom: Invalid value: \"\": must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
        ),
        (
            "value and valueFrom",
            env(
                json!({"name": "X", "value": "", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}),
            ),
            env(
                json!({"name": "X", "value": "v", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}),
            ),
            "spec.containers[0].env[0].valueFrom: Invalid value: \"\": may not be specified when `value` is not empty",
        ),
        (
            "two sources",
            env(field_ref("status.podIP")),
            env(
                json!({"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"},
                                                   "secretKeyRef": {"name": "s", "key": "k"}}}),
            ),
            "spec.containers[0].env[0].valueFrom: Invalid value: \"\": may not have more than one field specified at a time",
        ),
        (
            "secretKeyRef",
            env(field_ref("metadata.labels['app']")),
            env(json!({"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}})),
            "spec.containers[0].env[0].valueFrom.secretKeyRef: Forbidden: static pods cannot use it",
        ),
        (
            "configMapKeyRef",
            env(field_ref("metadata.annotations['a.b/c']")),
            env(json!({"name": "X", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}})),
            "spec.containers[0].env[0].valueFrom.configMapKeyRef: Forbidden: static pods cannot use it",
        ),
        (
            "resourceFieldRef resource",
            env(resource_ref(json!({"resource": "limits.cpu"}))),
            env(resource_ref(json!({"resource": "limits.pods"}))),
            "spec.containers[0].env[0].valueFrom.resourceFieldRef.resource: Unsupported value: \"limits.pods\": supported values: \"limits.cpu\", \"limits.ephemeral-storage\", \"limits.memory\", \"requests.cpu\", \"requests.ephemeral-storage\", \"requests.memory\"",
        ),
        (
            "resourceFieldRef resource required",
            env(resource_ref(json!({"resource": "requests.hugepages-2Mi"}))),
            env(resource_ref(json!({"resource": ""}))),
            "spec.containers[0].env[0].valueFrom.resourceFieldRef.resource: Required value",
        ),
        (
            "cpu divisor",
            env(resource_ref(
                json!({"resource": "limits.cpu", "divisor": "1000m"}),
            )),
            env(resource_ref(
                json!({"resource": "limits.cpu", "divisor": "10m"}),
            )),
            "spec.containers[0].env[0].valueFrom.resourceFieldRef.divisor: Invalid value: \"limits.cpu\": only divisor's values 1m and 1 are supported with the cpu resource",
        ),
        (
            "memory divisor",
            env(resource_ref(
                json!({"resource": "requests.memory", "divisor": "1024Ki"}),
            )),
            env(resource_ref(
                json!({"resource": "requests.memory", "divisor": "1024"}),
            )),
            "spec.containers[0].env[0].valueFrom.resourceFieldRef.divisor: Invalid value: \"requests.memory\": only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei are supported with the memory resource",
        ),
        (
            "ephemeral-storage divisor",
            env(resource_ref(
                json!({"resource": "limits.ephemeral-storage", "divisor": "1G"}),
            )),
            env(resource_ref(
                json!({"resource": "limits.ephemeral-storage", "divisor": "1m"}),
            )),
            "spec.containers[0].env[0].valueFrom.resourceFieldRef.divisor: Invalid value: \"limits.ephemeral-storage\": only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei are supported with the local ephemeral storage resource",
        ),
        (
            "hugepages divisor",
            env(resource_ref(
                json!({"resource": "limits.hugepages-1Gi", "divisor": "0"}),
            )),
            env(resource_ref(
                json!({"resource": "limits.hugepages-1Gi", "divisor": "2Mi"}),
            )),
            "spec.containers[0].env[0].valueFrom.resourceFieldRef.divisor: Invalid value: \"limits.hugepages-1Gi\": only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei are supported with the hugepages resource",
        ),
        (
            "divisor quantity",
            env(resource_ref(
                json!({"resource": "limits.memory", "divisor": "1Mi"}),
            )),
            env(resource_ref(
                json!({"resource": "limits.memory", "divisor": "1x"}),
            )),
            "spec.containers[0].env[0].valueFrom.resourceFieldRef.divisor: Invalid value: \"1x\": quantities must match",
        ),
        (
            "fieldRef path",
            env(field_ref("spec.serviceAccountName")),
            env(field_ref("spec.hostname")),
            "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: Unsupported value: \"spec.hostname\"",
        ),
        (
            "fieldRef subscript",
            env(field_ref("metadata.uid")),
            env(field_ref("metadata.labels['']")),
            "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: Unsupported value",
        ),
    ]);
}

#[test]
fn mount_and_container_rows() {
    let vol = json!([{"name": "v", "emptyDir": {}}]);
    let mounts = |m: Value| {
        let mut p = container(json!({"volumeMounts": m}));
        p["spec"]["volumes"] = vol.clone();
        p
    };
    check_rows(vec![
        (
            "unique mountPath",
            mounts(json!([{"name": "v", "mountPath": "/a"}, {"name": "v", "mountPath": "/b"}])),
            mounts(json!([{"name": "v", "mountPath": "/a"}, {"name": "v", "mountPath": "/a"}])),
            "spec.containers[0].volumeMounts[1].mountPath: Invalid value: \"/a\": must be unique",
        ),
        (
            "subPath relative",
            mounts(json!([{"name": "v", "mountPath": "/a", "subPath": "x/y"}])),
            mounts(json!([{"name": "v", "mountPath": "/a", "subPath": "/x"}])),
            "spec.containers[0].volumeMounts[0].subPath: Invalid value: \"/x\": must be a relative path",
        ),
        (
            "subPath backsteps",
            mounts(json!([{"name": "v", "mountPath": "/a", "subPath": "x..y"}])),
            mounts(json!([{"name": "v", "mountPath": "/a", "subPath": "x/../../etc"}])),
            "spec.containers[0].volumeMounts[0].subPath: Invalid value: \"x/../../etc\": must not contain '..'",
        ),
        (
            "subPath and subPathExpr",
            mounts(json!([{"name": "v", "mountPath": "/a", "subPathExpr": "$(POD)"}])),
            mounts(json!([{"name": "v", "mountPath": "/a", "subPath": "x", "subPathExpr": "y"}])),
            "spec.containers[0].volumeMounts[0].subPathExpr: Invalid value: \"y\": subPathExpr and subPath are mutually exclusive",
        ),
        (
            "mountPropagation",
            mounts(
                json!([{"name": "v", "mountPath": "/a", "mountPropagation": "HostToContainer"}]),
            ),
            mounts(json!([{"name": "v", "mountPath": "/a", "mountPropagation": "Shared"}])),
            "spec.containers[0].volumeMounts[0].mountPropagation: Unsupported value: \"Shared\"",
        ),
        (
            "recursiveReadOnly mode",
            mounts(
                json!([{"name": "v", "mountPath": "/a", "readOnly": true, "recursiveReadOnly": "Disabled"}]),
            ),
            mounts(
                json!([{"name": "v", "mountPath": "/a", "readOnly": true, "recursiveReadOnly": "Bogus"}]),
            ),
            "spec.containers[0].volumeMounts[0].recursiveReadOnly: Unsupported value: \"Bogus\": supported values: \"Disabled\", \"Enabled\", \"IfPossible\"",
        ),
        (
            "recursiveReadOnly needs readOnly",
            mounts(json!([{"name": "v", "mountPath": "/a", "recursiveReadOnly": "Disabled"}])),
            mounts(json!([{"name": "v", "mountPath": "/a", "recursiveReadOnly": "IfPossible"}])),
            "spec.containers[0].volumeMounts[0].recursiveReadOnly: Forbidden: may only be specified when readOnly is true",
        ),
        (
            "recursiveReadOnly without propagation",
            mounts(
                json!([{"name": "v", "mountPath": "/a", "readOnly": true, "recursiveReadOnly": "IfPossible", "mountPropagation": "None"}]),
            ),
            mounts(
                json!([{"name": "v", "mountPath": "/a", "readOnly": true, "recursiveReadOnly": "IfPossible", "mountPropagation": "HostToContainer"}]),
            ),
            "spec.containers[0].volumeMounts[0].recursiveReadOnly: Forbidden: may only be specified when mountPropagation is None or not specified",
        ),
        (
            "recursiveReadOnly Enabled only read-only",
            mounts(
                json!([{"name": "v", "mountPath": "/a", "readOnly": true, "recursiveReadOnly": "Enabled"}]),
            ),
            mounts(json!([{"name": "v", "mountPath": "/a", "recursiveReadOnly": "Enabled"}])),
            "spec.containers[0].volumeMounts[0].recursiveReadOnly: Forbidden: may only be specified when readOnly is true",
        ),
        (
            "Bidirectional needs privileged",
            {
                let mut p = mounts(
                    json!([{"name": "v", "mountPath": "/a", "mountPropagation": "Bidirectional"}]),
                );
                p["spec"]["containers"][0]["securityContext"] = json!({"privileged": true});
                p
            },
            mounts(json!([{"name": "v", "mountPath": "/a", "mountPropagation": "Bidirectional"}])),
            "spec.containers[0].volumeMounts[0].mountPropagation: Forbidden: Bidirectional mount propagation is available only to privileged containers",
        ),
        (
            "terminationMessagePolicy",
            container(json!({"terminationMessagePolicy": "FallbackToLogsOnError"})),
            container(json!({"terminationMessagePolicy": "Logs"})),
            "spec.containers[0].terminationMessagePolicy: Unsupported value: \"Logs\": supported values: \"FallbackToLogsOnError\", \"File\"",
        ),
        (
            "restartPolicy on a container",
            json!({"spec": {"initContainers": [{"name": "side", "image": "busybox", "restartPolicy": "Always"}]}}),
            container(json!({"restartPolicy": "Always"})),
            "spec.containers[0].restartPolicy: Forbidden: may not be set for non-init containers",
        ),
        (
            "restartPolicy on an init container",
            json!({"spec": {"initContainers": [{"name": "side", "image": "busybox"}]}}),
            json!({"spec": {"initContainers": [{"name": "side", "image": "busybox", "restartPolicy": "OnFailure"}]}}),
            "spec.initContainers[0].restartPolicy: Unsupported value: \"OnFailure\": supported values: \"Always\"",
        ),
        (
            "an empty restartPolicy on an init container",
            json!({"spec": {"initContainers": [{"name": "side", "image": "busybox", "restartPolicy": "Always"}]}}),
            json!({"spec": {"initContainers": [{"name": "side", "image": "busybox", "restartPolicy": ""}]}}),
            "spec.initContainers[0].restartPolicy: Unsupported value: \"\": supported values: \"Always\"",
        ),
        (
            "hostIP",
            container(
                json!({"ports": [{"containerPort": 80, "hostPort": 8080, "hostIP": "127.0.0.1"}]}),
            ),
            container(
                json!({"ports": [{"containerPort": 80, "hostPort": 8080, "hostIP": "localhost"}]}),
            ),
            "spec.containers[0].ports[0].hostIP: Invalid value: \"localhost\": must be a valid IP address",
        ),
    ]);
}

#[test]
fn pod_name_rows() {
    check_rows(vec![
        (
            "hostname",
            json!({"spec": {"hostname": "web-1"}}),
            json!({"spec": {"hostname": "web.example"}}),
            "spec.hostname: \"web.example\" is not a DNS-1123 label",
        ),
        (
            "subdomain",
            json!({"spec": {"subdomain": "svc"}}),
            json!({"spec": {"subdomain": "Svc"}}),
            "spec.subdomain: \"Svc\" is not a DNS-1123 label",
        ),
        (
            "nodeName",
            json!({"spec": {"nodeName": "node-1.example"}}),
            json!({"spec": {"nodeName": "node_1"}}),
            "spec.nodeName: \"node_1\" is not a DNS-1123 subdomain",
        ),
        (
            "priorityClassName",
            json!({"spec": {"priorityClassName": "system-node-critical"}}),
            json!({"spec": {"priorityClassName": "System"}}),
            "spec.priorityClassName: \"System\" is not a DNS-1123 subdomain",
        ),
        (
            "shareProcessNamespace with hostPID",
            json!({"spec": {"shareProcessNamespace": true}}),
            json!({"spec": {"shareProcessNamespace": true, "hostPID": true}}),
            "spec.securityContext.shareProcessNamespace: Invalid value: true: ShareProcessNamespace and HostPID cannot both be enabled",
        ),
        (
            "hostAliases IP",
            aliases(json!([{"ip": "10.1.2.3", "hostnames": ["foo.local"]}, {"ip": "fd00::1"}])),
            aliases(json!([{"ip": "10.1.2.300", "hostnames": ["foo.local"]}])),
            "spec.hostAliases[0].ip: Invalid value: \"10.1.2.300\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
        ),
        (
            "hostAliases IP missing",
            aliases(json!([{"ip": "0.0.0.0"}])),
            aliases(json!([{"hostnames": ["foo.local"]}])),
            "spec.hostAliases[0].ip: Invalid value: \"\": must be a valid IP address",
        ),
        (
            "hostAliases IP with a space",
            aliases(json!([{"ip": "010.1.2.3"}])),
            aliases(json!([{"ip": " 10.1.2.3"}])),
            "spec.hostAliases[0].ip: Invalid value: \" 10.1.2.3\": must be a valid IP address",
        ),
        (
            "hostAliases hostname",
            aliases(json!([{"ip": "10.1.2.3", "hostnames": ["a.b-c", "x"]}])),
            aliases(json!([{"ip": "10.1.2.3", "hostnames": ["ok.local", "Bad_Name"]}])),
            "spec.hostAliases[0].hostnames[1]: \"Bad_Name\" is not a DNS-1123 subdomain",
        ),
    ]);
}

fn aliases(list: Value) -> Value {
    json!({"spec": {"hostAliases": list}})
}

/// The API server's IP parsing for host aliases (checked against a
/// kube-apiserver 1.32 with `kubectl create --dry-run=server`).
#[test]
fn host_alias_ips_as_the_api_server_parses_them() {
    let accepted = [
        "10.1.2.3",
        "0.0.0.0",
        "010.001.2.3",
        "255.255.255.255",
        "fd00::1",
        "::",
        "::1",
        "2001:db8::ffff",
        "::ffff:10.1.2.3",
        "::ffff:010.1.2.3",
        "1:2:3:4:5:6:7:8",
    ];
    let refused = [
        "",
        "10.1.2.300",
        "10.1.2",
        "10.1.2.3.4",
        "10..2.3",
        " 10.1.2.3",
        "10.1.2.3 ",
        "+1.2.3.4",
        "0x0a.1.2.3",
        "1.2.3.0000256",
        "fd00::1%eth0",
        "fd00:::1",
        "1:2:3:4:5:6:7:8:9",
        "10.1.2.3/8",
        "localhost",
    ];
    let check_ip = |ip: &str| check(aliases(json!([{"ip": ip}])));
    for ip in accepted {
        assert_eq!(check_ip(ip), Ok(()), "{ip:?}");
    }
    for ip in refused {
        let err = check_ip(ip).expect_err(ip);
        assert!(
            err.contains("spec.hostAliases[0].ip: Invalid value"),
            "{ip:?}: {err}"
        );
    }
}
