//! More `crilet run` cases: restart policies, init containers, bad
//! manifests, an agent killed and restarted, containerd restarted.

use std::time::Duration;

use crilet::cri::*;
use crilet::kuberuntime::labels::ContainerLabels;

use crate::agent::*;
use crate::support::eventually;

const LIMIT: Duration = Duration::from_secs(30);

fn restart_count(c: &Container) -> u32 {
    ContainerLabels::from_labels(&c.labels, &c.annotations)
        .unwrap()
        .restart_count
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn restart_policies() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let agent = AgentProcess::start();
    agent.write("crash.yaml", &busybox_pod("crash", "Always", "exit 1"));
    agent.write("done.yaml", &busybox_pod("done", "OnFailure", "exit 0"));
    agent.write("fail.yaml", &busybox_pod("fail", "OnFailure", "exit 3"));
    agent.write("never.yaml", &busybox_pod("never", "Never", "exit 1"));

    // Always: restarted at once, then after the 10 s back-off.
    let start = std::time::Instant::now();
    let v = wait_for(&rt, &agent, "crash", LIMIT, "two restarts", |v| {
        v.named("main").len() >= 3
    })
    .await;
    let took = start.elapsed();
    let counts: Vec<u32> = v.named("main").iter().map(|c| restart_count(c)).collect();
    assert_eq!(counts[..3], [0, 1, 2], "restart counts: {counts:?}");
    assert!(
        took >= Duration::from_secs(9),
        "second restart came after only {took:?}: no back-off"
    );
    // Every attempt is its own container (names reserved per attempt).
    let attempts: Vec<u32> = v.named("main").iter().map(|c| c.metadata.attempt).collect();
    assert_eq!(attempts[..3], [0, 1, 2]);

    // OnFailure with failures: restarted too.
    wait_for(&rt, &agent, "fail", LIMIT, "a restart", |v| {
        v.named("main").len() >= 2
    })
    .await;

    // OnFailure with exit 0, and Never: one container, never restarted,
    // and the sandbox stopped once nothing is left to run.
    for name in ["done", "never"] {
        wait_for(
            &rt,
            &agent,
            name,
            LIMIT,
            "the exited container and stopped sandbox",
            |v| {
                v.named("main").len() == 1
                    && v.named("main")[0].state == ContainerState::Exited
                    && v.sandboxes
                        .iter()
                        .all(|s| s.state == PodSandboxState::NotReady)
            },
        )
        .await;
    }
    // Nothing must happen now: a window in which a wrong restart or a new
    // sandbox would show (no state to wait for).
    tokio::time::sleep(Duration::from_secs(3)).await;
    for name in ["done", "never"] {
        let v = pod_view(&rt, name).await;
        assert_eq!(v.named("main").len(), 1, "{name} was restarted: {v:#?}");
        assert_eq!(v.sandboxes.len(), 1, "{name} got a new sandbox: {v:#?}");
    }
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn init_containers_run_first_and_in_order() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let agent = AgentProcess::start();
    let manifest = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: inits\nspec:\n  hostNetwork: true\n  terminationGracePeriodSeconds: 1\n  initContainers:\n  - name: one\n    image: docker.io/library/busybox:latest\n    imagePullPolicy: IfNotPresent\n    command: [sh, -c, 'sleep 1; echo one >> /work/order']\n    volumeMounts: [{name: work, mountPath: /work}]\n  - name: two\n    image: docker.io/library/busybox:latest\n    imagePullPolicy: IfNotPresent\n    command: [sh, -c, 'echo two >> /work/order']\n    volumeMounts: [{name: work, mountPath: /work}]\n  containers:\n  - name: main\n    image: docker.io/library/busybox:latest\n    imagePullPolicy: IfNotPresent\n    command: [sh, -c, 'echo main >> /work/order; exec sleep 100000']\n    volumeMounts: [{name: work, mountPath: /work}]\n  volumes:\n  - name: work\n    emptyDir: {}\n";
    agent.write("inits.yaml", manifest);
    let v = wait_for(&rt, &agent, "inits", LIMIT, "main running", |v| {
        v.running("main").is_some()
    })
    .await;
    for init in ["one", "two"] {
        let c = v.named(init);
        assert_eq!(c.len(), 1, "{init} ran once: {v:#?}");
        assert_eq!(c[0].state, ContainerState::Exited);
    }
    let out = eventually(Duration::from_secs(5), || async {
        let id = &pod_view(&rt, "inits").await.running("main")?.id.clone();
        let r = rt
            .exec_sync(
                id,
                &["cat".into(), "/work/order".into()],
                Duration::from_secs(5),
            )
            .await
            .ok()?;
        let text = String::from_utf8_lossy(&r.stdout).into_owned();
        text.contains("main").then_some(text)
    })
    .await
    .expect("main wrote its line");
    assert_eq!(out, "one\ntwo\nmain\n");
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn bad_manifests_beside_good_ones() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let agent = AgentProcess::start();
    agent.write(
        "good.yaml",
        &busybox_pod("good", "Always", "exec sleep 100000"),
    );
    agent.write(
        "broken.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: [oops\n",
    );
    agent.write(
        "service.yaml",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n",
    );
    agent.write(
        "zz-dup.yaml",
        &busybox_pod("good", "Always", "exec sleep 5"),
    ); // same full name as good.yaml
    agent.write(
        ".hidden.yaml",
        &busybox_pod("hidden", "Always", "exec sleep 100000"),
    );
    agent.write(
        "missing-image.yaml",
        &busybox_pod("noimage", "Always", "true").replace(
            "docker.io/library/busybox:latest",
            "127.0.0.1:5000/crilet/does-not-exist:1",
        ),
    );
    let v = wait_for(&rt, &agent, "good", LIMIT, "the good pod", |v| {
        v.running("main").is_some()
    })
    .await;
    assert_eq!(v.sandboxes.len(), 1);
    // good.yaml sorts first and wins; zz-dup.yaml is refused, naming both.
    assert_eq!(v.named("main").len(), 1);
    // What must not happen (the dot-file run, a container without its
    // image) has no state to wait for: a window in which it would show.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        pod_view(&rt, "hidden").await.sandboxes.is_empty(),
        "dot-file was run"
    );
    // The pod whose image does not exist has a sandbox but no container.
    let v = pod_view(&rt, "noimage").await;
    assert!(v.containers.is_empty(), "{v:#?}");
    let logs = agent.logs();
    for want in [
        "broken.yaml",
        "service.yaml",
        "Service",
        "zz-dup.yaml",
        "does-not-exist",
    ] {
        assert!(
            logs.contains(want),
            "crilet's log does not mention {want:?}:\n{logs}"
        );
    }
}

/// A manifest with a scalar of the wrong type is refused, naming the file
/// and the field, as the kubelet refuses it; the good one beside it runs.
#[tokio::test]
#[ignore = "needs the agent tests' runtime (scripts/test.sh)"]
async fn a_mistyped_manifest_is_refused_and_the_good_one_runs() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let agent = AgentProcess::start();
    agent.write(
        "good.yaml",
        &busybox_pod("good", "Always", "exec sleep 100000"),
    );
    let typed = busybox_pod("typed", "Always", "exec sleep 100000").replace(
        "command: [\"sh\", \"-c\", \"exec sleep 100000\"]",
        "command: [sleep, 100000]",
    );
    agent.write("typed.yaml", &typed);
    let json = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "typed-json"}, "spec": {"hostNetwork": true, "containers": [{"name": "main", "image": "docker.io/library/busybox:latest", "imagePullPolicy": "IfNotPresent", "command": ["sleep", true]}]}}"#;
    agent.write("typed.json", json);
    wait_for(&rt, &agent, "good", LIMIT, "the good pod", |v| {
        v.running("main").is_some()
    })
    .await;
    // Nothing to wait for in what must not happen: a window to show it.
    tokio::time::sleep(Duration::from_secs(3)).await;
    for name in ["typed", "typed-json"] {
        let v = pod_view(&rt, name).await;
        assert!(v.sandboxes.is_empty(), "{name} was run: {v:#?}");
    }
    let logs = agent.logs();
    let dir = agent.manifests.path().display();
    for want in [
        format!(
            "{dir}/typed.yaml: spec.containers[0].command[1]: invalid Pod: expected a string, found a number (100000)"
        ),
        format!(
            "{dir}/typed.json: spec.containers[0].command[1]: invalid Pod: expected a string, found a boolean (true)"
        ),
    ] {
        assert!(
            logs.contains(&want),
            "crilet's log does not say {want:?}:\n{logs}"
        );
    }
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn agent_killed_and_restarted_adopts_its_containers() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let mut agent = AgentProcess::start();
    agent.write(
        "keep.yaml",
        &busybox_pod("keep", "Always", "exec sleep 100000"),
    );
    let before = wait_for(&rt, &agent, "keep", LIMIT, "running", |v| {
        v.running("main").is_some()
    })
    .await;
    let id = before.running("main").unwrap().id.clone();
    let sandbox = before.ready_sandbox().unwrap().id.clone();

    agent.kill9();
    agent.spawn();
    // Give the new agent time to list, plan and (wrongly) act.
    let ready = eventually(Duration::from_secs(15), || async {
        agent
            .logs()
            .matches("crilet starting")
            .count()
            .ge(&2)
            .then_some(())
    })
    .await;
    assert!(
        ready.is_some(),
        "restarted crilet did not start:\n{}",
        agent.logs()
    );
    tokio::time::sleep(Duration::from_secs(4)).await;
    let after = pod_view(&rt, "keep").await;
    assert_eq!(after.sandboxes.len(), 1, "{after:#?}");
    assert_eq!(after.ready_sandbox().map(|s| s.id.clone()), Some(sandbox));
    assert_eq!(after.containers.len(), 1, "{after:#?}");
    assert_eq!(after.running("main").map(|c| c.id.clone()), Some(id));

    // SIGTERM stops the agent and leaves the pod running.
    assert_eq!(agent.terminate(), Some(0), "{}", agent.logs());
    let v = pod_view(&rt, "keep").await;
    assert!(
        v.running("main").is_some(),
        "SIGTERM killed the pod: {v:#?}"
    );
}

#[tokio::test]
#[ignore = "needs the agent tests' containerd (scripts/test.sh)"]
async fn runtime_restarted_under_a_running_agent() {
    let _guard = AGENT_LOCK.lock().await;
    let rt = agent_runtime();
    clean_runtime(&rt).await;
    let agent = AgentProcess::start();
    agent.write("a.yaml", &busybox_pod("a", "Always", "exec sleep 100000"));
    wait_for(&rt, &agent, "a", LIMIT, "running", |v| {
        v.running("main").is_some()
    })
    .await;

    // Stop the runtime's daemon (its pods survive) and add a pod while it is down.
    agent_runtime_ctl("stop");
    agent.write("b.yaml", &busybox_pod("b", "Always", "exec sleep 100000"));
    // The runtime stays down a while (the point: the agent meets it down).
    tokio::time::sleep(Duration::from_secs(3)).await;
    agent_runtime_ctl("up");

    let limit = Duration::from_secs(60);
    for name in ["a", "b"] {
        let v = wait_for(&rt, &agent, name, limit, "running after the restart", |v| {
            v.running("main").is_some()
        })
        .await;
        let ready = v
            .sandboxes
            .iter()
            .filter(|s| s.state == PodSandboxState::Ready)
            .count();
        assert_eq!(ready, 1, "duplicate sandboxes for {name}: {v:#?}");
    }
    let a = pod_view(&rt, "a").await;
    assert_eq!(
        a.named("main").len(),
        1,
        "pod a was restarted needlessly: {a:#?}"
    );
}
