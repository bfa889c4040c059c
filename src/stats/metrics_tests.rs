use super::*;

#[test]
fn operation_types_are_the_kubelets() {
    for (op, want) in [
        ("RunPodSandbox", "run_podsandbox"),
        ("ListPodSandbox", "list_podsandbox"),
        ("ListPodSandboxStats", "list_podsandbox_stats"),
        ("PodSandboxStatus", "podsandbox_status"),
        ("ImageFsInfo", "image_fs_info"),
        ("ListContainers", "list_containers"),
        ("ExecSync", "exec_sync"),
        ("Version", "version"),
        ("RuntimeConfig", "runtime_config"),
    ] {
        assert_eq!(operation_type(op), want);
    }
}

#[test]
fn probe_runs_render_with_the_prober_names() {
    let m = Metrics::new();
    let run = ProbeRun {
        probe_type: "Readiness",
        result: "failed",
        container: "etcd",
        pod: "etcd-node1",
        namespace: "kube-system",
        pod_uid: "u1",
        elapsed: Duration::from_millis(3),
    };
    m.observe_probe(&run);
    m.observe_probe(&run);
    m.observe_probe(&ProbeRun {
        result: "unknown",
        ..run
    });
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &m.registry).unwrap();
    assert!(
        out.contains("prober_probe_total{probe_type=\"Readiness\",result=\"failed\",container=\"etcd\",pod=\"etcd-node1\",namespace=\"kube-system\",pod_uid=\"u1\"} 2"),
        "{out}"
    );
    assert!(out.contains("result=\"unknown\""), "{out}");
    // Errored runs have no duration worth keeping.
    assert!(
        out.contains("prober_probe_duration_seconds_count{probe_type=\"Readiness\",container=\"etcd\",pod=\"etcd-node1\",namespace=\"kube-system\"} 2"),
        "{out}"
    );
}

#[test]
fn certificate_ttls_are_read_from_the_pair_files_at_each_scrape() {
    let dir = tempfile::tempdir().unwrap();
    let pair = |name: &str, from: (i32, u8), to: (i32, u8)| {
        let mut params = rcgen::CertificateParams::default();
        params.not_before = rcgen::date_time_ymd(from.0, from.1, 1);
        params.not_after = rcgen::date_time_ymd(to.0, to.1, 1);
        let key = rcgen::KeyPair::generate().unwrap();
        let der = params.self_signed(&key).unwrap().der().to_vec();
        let path = dir.path().join(name);
        std::fs::write(&path, pem::encode(&pem::Pem::new("CERTIFICATE", der))).unwrap();
        path
    };
    let client = pair("client.pem", (2020, 1), (2021, 1));
    let server = pair("server.pem", (2020, 1), (2200, 1));
    let m = Metrics::new();
    let errors: [Arc<std::sync::atomic::AtomicU64>; 2] = Default::default();
    errors[1].store(3, std::sync::atomic::Ordering::Relaxed);
    m.set_certificates(Some(client), Some(server.clone()), errors);
    m.catch_up_counters();
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &m.registry).unwrap();
    let value = |name: &str| -> f64 {
        let line = out
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{out}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert!(
        value("kubelet_certificate_manager_client_ttl_seconds") < -1e8,
        "expired: negative\n{out}"
    );
    assert!(
        value("kubelet_certificate_manager_server_ttl_seconds") > 1e9,
        "{out}"
    );
    assert_eq!(
        value("kubelet_server_expiration_renew_errors"),
        3.0,
        "{out}"
    );
    let client_errors = value("kubelet_certificate_manager_client_expiration_renew_errors");
    assert_eq!(client_errors, 0.0, "{out}");
    // A pair that goes away keeps its last reading; no panic.
    std::fs::remove_file(&server).unwrap();
    m.catch_up_counters();
}

#[tokio::test]
async fn event_counters_and_live_tasks_render() {
    use std::sync::atomic::Ordering::Relaxed;
    let m = Metrics::new();
    let counters = Arc::new(EventCounters::default());
    m.set_container_events(counters.clone());
    counters.received.store(7, Relaxed);
    counters.coalesced.store(2, Relaxed);
    counters.missed.store(1, Relaxed);
    let _task = tokio::spawn(std::future::pending::<()>());
    m.catch_up_counters();
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &m.registry).unwrap();
    for want in [
        "crilet_container_events_total 7",
        "crilet_container_events_coalesced_total 2",
        "crilet_container_events_missed_total 1",
        "crilet_tokio_alive_tasks 1",
    ] {
        assert!(out.contains(want), "{want}: {out}");
    }
}

#[test]
fn observed_operations_render_with_kubelet_names() {
    let m = Metrics::new();
    m.observe("RunPodSandbox", Duration::from_millis(60), true);
    m.observe("RunPodSandbox", Duration::from_millis(70), false);
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &m.registry).unwrap();
    assert!(
        out.contains("kubelet_runtime_operations_total{operation_type=\"run_podsandbox\"} 2"),
        "{out}"
    );
    assert!(
        out.contains(
            "kubelet_runtime_operations_errors_total{operation_type=\"run_podsandbox\"} 1"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "kubelet_runtime_operations_duration_seconds_count{operation_type=\"run_podsandbox\"} 2"
        ),
        "{out}"
    );
}
