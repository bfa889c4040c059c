//! `crilet runtime-info` against the harness runtime, as a user runs it.

use std::process::Command;

use crate::support::*;

fn run(args: &[&str]) -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_crilet"))
        .arg("runtime-info")
        .args(["--container-runtime-endpoint", &endpoint()])
        .args(args)
        .output()
        .expect("run crilet");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "crilet failed: {stderr}");
    (stdout, stderr)
}

#[test]
#[ignore = "needs the harness containerd (scripts/test.sh)"]
fn runtime_info_table() {
    let (out, _) = run(&[]);
    let name = runtime_kind().runtime_name();
    assert!(out.contains(&format!("Runtime:      {name} ")), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("RuntimeReady") && l.contains("true")),
        "{out}"
    );
    assert!(out.contains("NetworkReady"), "{out}");
    assert!(out.contains("Mountpoint: /"), "{out}");
    assert!(out.contains("Capacity: "), "{out}");
    assert!(out.contains(BUSYBOX), "{out}");
    assert!(out.contains(PAUSE), "{out}");
}

#[test]
#[ignore = "needs the harness containerd (scripts/test.sh)"]
fn runtime_info_json() {
    // containerd refreshes image-fs usage every stats_collect_period: a
    // fresh one reports 0 used bytes until then.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let v = loop {
        let (out, _) = run(&["-o", "json"]);
        let v: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
        let used = v["imageFilesystems"][0]["usedBytes"]
            .as_u64()
            .expect("usedBytes");
        if used > 0 || std::time::Instant::now() > deadline {
            break v;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    };
    assert_eq!(v["runtimeName"], runtime_kind().runtime_name());
    assert!(v["runtimeVersion"].as_str().is_some_and(|s| !s.is_empty()));
    let ready = v["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "RuntimeReady")
        .expect("RuntimeReady");
    assert_eq!(ready["status"], true);
    let fs = &v["imageFilesystems"][0];
    let cap = fs["capacityBytes"].as_u64().expect("capacity from statvfs");
    let avail = fs["availableBytes"]
        .as_u64()
        .expect("available from statvfs");
    assert!(cap > 0 && avail <= cap, "{fs}");
    assert!(fs["usedBytes"].as_u64().unwrap() > 0);
    let tags: Vec<&str> = v["images"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|i| i["repoTags"].as_array().unwrap())
        .filter_map(|t| t.as_str())
        .collect();
    assert!(tags.contains(&BUSYBOX), "{tags:?}");
    assert!(tags.contains(&PAUSE), "{tags:?}");
}
