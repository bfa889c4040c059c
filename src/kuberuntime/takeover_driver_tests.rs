use serde_json::json;

use super::*;
use crate::cri::FakeRuntime;
use crate::cri::types::DnsConfig;

const KUBELET_UID: &str = "d41d8cd98f00b204e9800998ecf8427e";

fn ctx() -> NodeContext {
    NodeContext {
        node_name: "n1".into(),
        root_dir: "/var/lib/kubelet".into(),
        cgroup_root: "/".into(),
        cgroup_driver: crate::cri::CgroupDriver::Cgroupfs,
        host_dns: DnsConfig::default(),
        host_ip: "10.0.0.1".into(),
        memory_capacity: 1 << 30,
        ..Default::default()
    }
}

/// A static pod as the file source makes it, under crilet's UID.
fn manifest(uid: &str, command: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {
            "name": "etcd-n1", "namespace": "kube-system", "uid": uid,
            "labels": {"component": "etcd"},
            "annotations": {
                "kubernetes.io/config.source": "file",
                "kubernetes.io/config.hash": uid,
                "kubernetes.io/config.seen": "2026-12-06T10:00:00.000000001Z"
            }
        },
        "spec": {
            "hostNetwork": true,
            "containers": [{
                "name": "etcd", "image": "busybox",
                "command": ["sh", "-c", command],
                "env": [{"name": "ETCD_NAME", "value": "n1"}],
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File"
            }]
        }
    }))
    .unwrap()
}

/// What the kubelet left running for `manifest` on `node`: crilet's
/// configs under `kubelet_uid`, each termination-message file named with 8
/// hex digits as the kubelet names it. Returns the sandbox's and the first
/// container's IDs. (The sync loop's takeover test uses it too.)
pub(crate) async fn kubelet_ran(
    rt: &FakeRuntime,
    node: &NodeContext,
    manifest: &Pod,
    kubelet_uid: &str,
) -> (String, String) {
    let mut pod = manifest.clone();
    AdoptedUids(BTreeMap::from([(
        pod::uid(manifest).to_owned(),
        kubelet_uid.to_owned(),
    )]))
    .apply(&mut pod);
    rt.add_image("busybox", 1 << 20);
    let sandbox = mapping::sandbox_config(node, &pod, 0).unwrap();
    let sandbox_id = rt.run_pod_sandbox(&sandbox).await.unwrap();
    let host_network = pod.spec.as_ref().and_then(|s| s.host_network) == Some(true);
    let hosts = mapping::etc_hosts_file(node, kubelet_uid);
    let mut ids = Vec::new();
    for c in &pod.spec.as_ref().unwrap().containers {
        let start = mapping::ContainerStart {
            restart_count: 0,
            attempt: 0,
            pod_ip: "",
            image_ref: "",
            image_user: None,
            etc_hosts: mounts_hosts_file(host_network, &[], c).then_some(hosts.as_path()),
            service_env: &[],
        };
        let mut config = mapping::container_config(node, &pod, c, &start).unwrap();
        for m in &mut config.mounts {
            if m.container_path == "/dev/termination-log" {
                m.host_path = m
                    .host_path
                    .replace(&format!("/{}/0", c.name), &format!("/{}/3bbfc86c", c.name));
            }
        }
        let id = rt
            .create_container(&sandbox_id, &config, &sandbox)
            .await
            .unwrap();
        rt.start_container(&id).await.unwrap();
        ids.push(id);
    }
    (sandbox_id, ids.swap_remove(0))
}

#[tokio::test]
async fn the_kubelets_pod_of_an_unchanged_manifest_is_kept_under_its_uid() {
    let rt = FakeRuntime::new();
    let pod = manifest("crilet-uid", "sleep 3600");
    let (sandbox_id, id) = kubelet_ran(&rt, &ctx(), &pod, KUBELET_UID).await;
    let survey = survey(&rt, &ctx(), &[pod]).await.unwrap();
    assert_eq!(
        survey.findings[0].outcome,
        Outcome::Keep {
            uid: KUBELET_UID.into(),
            sandbox_id,
            containers: vec![("etcd".into(), id)],
        },
        "{survey}"
    );
    assert_eq!(
        survey.adopted().0,
        BTreeMap::from([("crilet-uid".to_string(), KUBELET_UID.to_string())])
    );
    assert!(survey.to_string().starts_with(
        "keep     kube-system/etcd-n1: uid d41d8cd98f00b204e9800998ecf8427e, sandbox "
    ));
}

#[tokio::test]
async fn an_edited_manifest_replaces_the_kubelets_pod_and_says_why() {
    let rt = FakeRuntime::new();
    kubelet_ran(
        &rt,
        &ctx(),
        &manifest("crilet-uid", "sleep 3600"),
        KUBELET_UID,
    )
    .await;
    let edited = manifest("crilet-uid-2", "sleep 7200");
    let survey = survey(&rt, &ctx(), &[edited]).await.unwrap();
    let Outcome::Replace { uid, reason, .. } = &survey.findings[0].outcome else {
        panic!("{survey}");
    };
    assert_eq!(uid, KUBELET_UID);
    assert!(reason.starts_with("container etcd: command: "), "{reason}");
    assert!(survey.adopted().0.is_empty());
}

#[tokio::test]
async fn own_pods_new_pods_strangers_and_crilets_older_versions() {
    let rt = FakeRuntime::new();
    // crilet's own pod: a sandbox under the manifest's UID.
    let own = manifest("crilet-uid", "sleep 3600");
    let config = mapping::sandbox_config(&ctx(), &own, 0).unwrap();
    rt.run_pod_sandbox(&config).await.unwrap();
    let survey_own = survey(&rt, &ctx(), std::slice::from_ref(&own))
        .await
        .unwrap();
    assert_eq!(survey_own.findings[0].outcome, Outcome::Own);
    // Nothing under its name: started.
    let empty = FakeRuntime::new();
    let fresh = survey(&empty, &ctx(), std::slice::from_ref(&own))
        .await
        .unwrap();
    assert_eq!(fresh.findings[0].outcome, Outcome::Start);
    // The same sandbox, but no manifest names it any more: a stranger.
    let none = survey(&rt, &ctx(), &[]).await.unwrap();
    assert_eq!(none.strangers.len(), 1, "{none}");
    assert!(none.to_string().contains("no manifest names it"));
    // crilet's own pod of an older manifest (attempt-named files): replaced
    // as an edit is, not adopted.
    let edited = manifest("crilet-uid-2", "sleep 3600");
    let later = survey(&rt, &ctx(), &[edited]).await.unwrap();
    let Outcome::Replace { reason, .. } = &later.findings[0].outcome else {
        panic!("{later}");
    };
    assert!(reason.starts_with("not started by the kubelet"), "{reason}");
}
