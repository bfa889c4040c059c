//! Volumes and the managed /etc/hosts with the real binary and the real
//! runtime, as the kubelet v1.32 gives them (measured side by side on
//! containerd 1.6): a non-root pod writes to its emptyDir with and
//! without fsGroup, its hostAliases and hostname are in its /etc/hosts, a
//! host-network pod's /etc/hosts is the node's plus its aliases, a
//! container that mounts its own /etc/hosts keeps it, and the
//! `volumeMounts` of each container status reach `/pods` and the mirror
//! pod on the real kube-apiserver. And a bad host alias, refused by
//! `crilet validate`.

use std::time::Duration;

use crilet::cri::{CriRuntime, Runtime};
use serde_json::{Value, json};

use crate::agent::*;
use crate::kube::Lab;
use crate::probes::{agent_with_api, served_status, wait_status};
use crate::support::{cli, eventually, free_port};

const LIMIT: Duration = Duration::from_secs(60);

const BUSYBOX: &str = "image: docker.io/library/busybox:latest\n    imagePullPolicy: IfNotPresent";

/// A pod-network pod running as user 1000 whose init container writes
/// /work/page and whose app container reads it, then sleeps.
fn writer_pod(name: &str, security: &str, extra_spec: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n  securityContext: {security}\n{extra_spec}  initContainers:\n  - name: init\n    {BUSYBOX}\n    command: [sh, -c, 'echo hello > /work/page && mkdir /work/d']\n    volumeMounts: [{{name: work, mountPath: /work}}]\n  containers:\n  - name: app\n    {BUSYBOX}\n    command: [sh, -c, 'cat /work/page; exec sleep 100000']\n    volumeMounts:\n    - {{name: work, mountPath: /work}}\n    - {{name: ro, mountPath: /ro, readOnly: true}}\n  volumes:\n  - {{name: work, emptyDir: {{}}}}\n  - {{name: ro, emptyDir: {{}}}}\n"
    )
}

/// Runs `cmd` in the running container `container` of pod `name`: stdout.
async fn exec(
    rt: &CriRuntime,
    agent: &AgentProcess,
    name: &str,
    container: &str,
    cmd: &str,
) -> String {
    let v = agent.view(rt, name).await;
    let id = &v.running(container).expect("the container runs").id;
    let argv = ["sh".to_string(), "-c".into(), cmd.into()];
    let r = rt
        .exec_sync(id, &argv, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(
        r.exit_code,
        0,
        "{cmd}: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    String::from_utf8_lossy(&r.stdout).into_owned()
}

async fn running(rt: &CriRuntime, agent: &AgentProcess, name: &str, container: &str) {
    wait_for(rt, agent, name, LIMIT, "its container running", |v| {
        v.running(container).is_some()
    })
    .await;
}

/// The pod's IP as the runtime reports it.
async fn pod_ip(rt: &CriRuntime, agent: &AgentProcess, name: &str) -> String {
    let v = agent.view(rt, name).await;
    let sandbox = v.ready_sandbox().expect("a ready sandbox");
    rt.pod_sandbox_status(&sandbox.id).await.unwrap().ip
}

/// The header and localhost lines of the kubelet's pod-network hosts file.
const MANAGED_HEAD: &str = "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n\
    ::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\n\
    fe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n";

#[tokio::test]
#[ignore = "needs the agent tests' runtime and the real kube-apiserver (scripts/test.sh)"]
async fn non_root_pods_write_to_their_empty_dirs_with_and_without_fs_group() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let lab = Lab::connect().await;
    let node = lab.claim("crilet-node-13").await;
    let port = free_port();
    let agent = agent_with_api(&node, port);
    let aliases = "  hostname: web\n  subdomain: sub\n  hostAliases:\n  - ip: 10.1.2.3\n    hostnames: [foo.local, bar.local]\n  - ip: fd00::1\n    hostnames: [six.local]\n";
    agent.write(
        "fsg.yaml",
        &writer_pod(
            "fsg",
            "{runAsUser: 1000, runAsGroup: 3000, fsGroup: 2000}",
            aliases,
        ),
    );
    agent.write("nofsg.yaml", &writer_pod("nofsg", "{runAsUser: 1000}", ""));
    running(&rt, &agent, "fsg", "app").await;
    running(&rt, &agent, "nofsg", "app").await;

    // Both read what their init container wrote as user 1000.
    for name in ["fsg", "nofsg"] {
        assert_eq!(
            exec(&rt, &agent, name, "app", "cat /work/page").await,
            "hello\n"
        );
        assert_eq!(exec(&rt, &agent, name, "app", "id -u").await, "1000\n");
    }
    // With fsGroup: the volume is the group's, setgid, and what the init
    // container made in it took the group. Without: 0777, root's.
    let stat = "stat -c '%a %u %g' /work /work/page /work/d /ro";
    assert_eq!(
        exec(&rt, &agent, "fsg", "app", stat).await,
        "2777 0 2000\n644 1000 2000\n2755 1000 2000\n2777 0 2000\n"
    );
    assert_eq!(
        exec(&rt, &agent, "nofsg", "app", stat).await,
        "777 0 0\n644 1000 0\n755 1000 0\n777 0 0\n"
    );

    // Its /etc/hosts: the pod IP with hostname.subdomain (no cluster
    // domain, as a kubelet without --cluster-domain), then the aliases.
    let ip = pod_ip(&rt, &agent, "fsg").await;
    assert!(!ip.is_empty(), "a pod-network pod has an IP");
    let want = format!(
        "{MANAGED_HEAD}{ip}\tweb.sub.default.svc.\tweb\n\n# Entries added by HostAliases.\n\
         10.1.2.3\tfoo.local\tbar.local\nfd00::1\tsix.local\n"
    );
    for container in ["app"] {
        assert_eq!(
            exec(&rt, &agent, "fsg", container, "cat /etc/hosts").await,
            want
        );
    }
    let ip = pod_ip(&rt, &agent, "nofsg").await;
    let want = format!("{MANAGED_HEAD}{ip}\tnofsg-{}\n", node.name);
    assert_eq!(
        exec(&rt, &agent, "nofsg", "app", "cat /etc/hosts").await,
        want
    );

    // volumeMounts on /pods and on the mirror pod, as the kubelet's.
    let want_app = json!([
        {"name": "work", "mountPath": "/work"},
        {"name": "ro", "mountPath": "/ro", "readOnly": true, "recursiveReadOnly": "Disabled"}
    ]);
    let want_init = json!([{"name": "work", "mountPath": "/work"}]);
    let mounts_of = |status: Value| {
        (
            status["containerStatuses"][0]["volumeMounts"].clone(),
            status["initContainerStatuses"][0]["volumeMounts"].clone(),
        )
    };
    wait_status(&agent, port, "fsg", LIMIT, "Running", |s| {
        s.phase.as_deref() == Some("Running")
    })
    .await;
    let served = serde_json::to_value(served_status(port, "fsg").unwrap()).unwrap();
    assert_eq!(mounts_of(served), (want_app.clone(), want_init.clone()));
    let full = agent.pod_name("fsg");
    let mirrored = eventually(LIMIT, || async {
        let status = lab.pod("default", &full).await?.status?;
        let got = mounts_of(serde_json::to_value(status).ok()?);
        (got == (want_app.clone(), want_init.clone())).then_some(got)
    })
    .await;
    assert!(
        mirrored.is_some(),
        "mirror pod status: {:#?}\ncrilet log:\n{}",
        lab.pod("default", &full).await.and_then(|p| p.status),
        agent.logs()
    );
}

#[tokio::test]
#[ignore = "needs the agent tests' runtime (scripts/test.sh)"]
async fn host_network_and_own_hosts_files() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let agent = AgentProcess::start();
    let own = agent.root.path().join("my-hosts");
    std::fs::write(&own, "10.9.9.9 own-hosts-file\n").unwrap();
    agent.write(
        "hnet.yaml",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: hnet\nspec:\n  hostNetwork: true\n  terminationGracePeriodSeconds: 1\n  hostAliases:\n  - ip: 10.1.2.3\n    hostnames: [foo.local]\n  containers:\n  - name: app\n    {BUSYBOX}\n    command: [sleep, '100000']\n"
        ),
    );
    agent.write(
        "own.yaml",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: own\nspec:\n  terminationGracePeriodSeconds: 1\n  hostAliases:\n  - ip: 10.1.2.3\n    hostnames: [foo.local]\n  containers:\n  - name: own\n    {BUSYBOX}\n    command: [sleep, '100000']\n    volumeMounts: [{{name: h, mountPath: /etc/hosts}}]\n  - name: plain\n    {BUSYBOX}\n    command: [sleep, '100000']\n    volumeMounts: [{{name: h, mountPath: /x/hosts, readOnly: true}}]\n  volumes:\n  - {{name: h, hostPath: {{path: {}, type: File}}}}\n",
            own.display()
        ),
    );
    running(&rt, &agent, "hnet", "app").await;
    running(&rt, &agent, "own", "own").await;
    running(&rt, &agent, "own", "plain").await;

    // The node's own hosts file, read as the container started, then the
    // aliases. The test reads it the same way; nothing here edits it.
    let node_hosts = std::fs::read_to_string("/etc/hosts").unwrap();
    assert_eq!(
        exec(&rt, &agent, "hnet", "app", "cat /etc/hosts").await,
        format!(
            "# Kubernetes-managed hosts file (host network).\n{node_hosts}\
             \n# Entries added by HostAliases.\n10.1.2.3\tfoo.local\n"
        )
    );

    // Its own file for the container that mounts one, and only that one
    // at /etc/hosts; the managed file for its neighbour.
    assert_eq!(
        exec(&rt, &agent, "own", "own", "cat /etc/hosts").await,
        "10.9.9.9 own-hosts-file\n"
    );
    let v = agent.view(&rt, "own").await;
    let id = &v.running("own").unwrap().id;
    let mounts = rt.container_status(id).await.unwrap().mounts;
    let at_hosts: Vec<&str> = (mounts.iter())
        .filter(|m| m.container_path == "/etc/hosts")
        .map(|m| m.host_path.as_str())
        .collect();
    assert_eq!(at_hosts, [own.to_str().unwrap()], "{mounts:#?}");
    let plain = exec(&rt, &agent, "own", "plain", "cat /etc/hosts").await;
    let ip = pod_ip(&rt, &agent, "own").await;
    assert_eq!(
        plain,
        format!(
            "{MANAGED_HEAD}{ip}\town-{}\n\n# Entries added by HostAliases.\n10.1.2.3\tfoo.local\n",
            crate::agent::NODE
        )
    );
    assert_eq!(
        exec(&rt, &agent, "own", "plain", "cat /x/hosts").await,
        "10.9.9.9 own-hosts-file\n"
    );
}

#[test]
fn bad_host_aliases_and_recursive_read_only_are_refused_by_validate() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.yaml");
    std::fs::write(
        &file,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bad\nspec:\n  hostAliases:\n  - ip: 10.1.2.300\n    hostnames: [ok.local, Bad_Name]\n  containers:\n  - name: app\n    image: busybox\n    volumeMounts: [{name: v, mountPath: /v, recursiveReadOnly: Enabled}]\n  volumes: [{name: v, emptyDir: {}}]\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let (ok, out, err) = cli(&["validate", "--hostname-override", "node-v", f]);
    assert!(!ok, "{out}{err}");
    for line in [
        format!(
            "{f}: spec.hostAliases[0].ip: Invalid value: \"10.1.2.300\": must be a valid IP \
             address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
        ),
        format!("{f}: spec.hostAliases[0].hostnames[1]: \"Bad_Name\" is not a DNS-1123 subdomain"),
        format!(
            "{f}: spec.containers[0].volumeMounts[0].recursiveReadOnly: Forbidden: may only be \
             specified when readOnly is true"
        ),
    ] {
        assert!(out.contains(&line), "missing {line:?} in\n{out}");
    }
}
