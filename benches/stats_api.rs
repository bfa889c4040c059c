//! The stats API under load, with 100 real pods sampled into the cache:
//! GetPodStats p50/p99 latency and requests per second from 4 concurrent
//! clients over the unix socket, `/stats/summary` latency over loopback
//! HTTP, and beside them what one ListPodSandboxStats call for the same
//! pods costs (what a per-request CRI call would have cost instead).
//!
//! Needs a runtime: `bash scripts/bench.sh` starts the private containerd
//! and sets CRILET_BENCH_ENDPOINT. CRILET_BENCH_PODS (default 100) and
//! CRILET_BENCH_SECONDS (default 5) tune it.

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use common::{ms, pod, raw_remove, raw_start};
use crilet::api::stats::v1 as pb;
use crilet::cli::agent_client;
use crilet::cri::*;
use crilet::images::disk::Statvfs;
use crilet::pod::Pod;
use crilet::pod::manager::PodManager;
use crilet::pod::view::AgentView;
use crilet::stats::collector::Collector;
use crilet::stats::{StatsSources, grpc, http, metrics::Metrics};

fn k8s_pod(name: &str, uid: &str, annotations: &[(&str, &str)]) -> Pod {
    let mut p = Pod::default();
    p.metadata.name = Some(name.into());
    p.metadata.namespace = Some("crilet-bench".into());
    p.metadata.uid = Some(uid.into());
    p.metadata.annotations = Some(
        annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    );
    p
}

/// How many of the benchmark's static UIDs the sample has.
fn pods_sampled(sample: &crilet::stats::assemble::Sample, uids: &[String]) -> usize {
    uids.iter().filter(|u| sample.pods.contains_key(*u)).count()
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    ms(sorted[((sorted.len() - 1) as f64 * p).round() as usize])
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let Ok(endpoint) = std::env::var("CRILET_BENCH_ENDPOINT") else {
        eprintln!("stats_api: CRILET_BENCH_ENDPOINT is not set; run `bash scripts/bench.sh`");
        std::process::exit(2);
    };
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let n = env("CRILET_BENCH_PODS", 100) as usize;
    let seconds = env("CRILET_BENCH_SECONDS", 5);
    let rt = Arc::new(CriRuntime::connect_lazy(
        &endpoint,
        RuntimeOptions::default(),
    )?);
    let scratch = tempfile::Builder::new()
        .prefix("crilet-bench-stats-")
        .tempdir()?;

    // Leftovers of an interrupted run would count as pods too.
    let mut filter = PodSandboxFilter::default();
    filter
        .label_selector
        .insert("io.kubernetes.pod.namespace".into(), "crilet-bench".into());
    for sb in rt.list_pod_sandbox(&filter).await? {
        rt.stop_pod_sandbox(&sb.id).await?;
        rt.remove_pod_sandbox(&sb.id).await?;
    }

    // 100 real pods, and the pod manager crilet would hold for them (every
    // other pod with a mirror).
    let mut manager = PodManager::new();
    let mut pods = Vec::new();
    let mut uids = Vec::new();
    for i in 0..n {
        let (sandbox, container) = pod(i, scratch.path());
        let sb = raw_start(rt.as_ref(), &sandbox, &container).await;
        let uid = sandbox.metadata.uid.clone();
        let name = sandbox.metadata.name.clone();
        manager.add_pod(k8s_pod(
            &name,
            &uid,
            &[
                ("kubernetes.io/config.source", "file"),
                ("kubernetes.io/config.hash", &uid),
            ],
        ));
        uids.push(uid.clone());
        if i % 2 == 0 {
            let mirror_uid = format!("{:08x}-1111-4000-8000-{i:012x}", std::process::id());
            manager.add_pod(k8s_pod(
                &name,
                &mirror_uid,
                &[("kubernetes.io/config.mirror", &uid)],
            ));
            uids.push(mirror_uid);
        }
        pods.push((sb, sandbox.cgroup_parent.clone()));
    }

    // The cost of the CRI call per request would have paid.
    let mut cri = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        let s = rt
            .list_pod_sandbox_stats(&PodSandboxStatsFilter::default())
            .await?;
        cri.push(t.elapsed());
        assert!(s.len() >= n);
    }
    cri.sort();

    // Two collector rounds fill the cache (the second has CPU rates).
    let collector = Collector {
        runtime: rt.clone(),
        sandbox_stops: Default::default(),
        disk: Arc::new(Statvfs),
        node_name: "bench-node".into(),
        root_dir: scratch.path().to_path_buf(),
        pod_logs_dir: scratch.path().join("pod-logs"),
        proc_root: "/proc".into(),
        period: Duration::from_secs(10),
    };
    let mut supported = true;
    let first = collector.round(None, &mut supported).await?;
    let t = Instant::now();
    let sample = collector.round(Some(&first), &mut supported).await?;
    let round = t.elapsed();
    let sampled = pods_sampled(&sample, &uids);
    assert_eq!(sampled, n, "every pod sampled");

    let (_view_tx, view) = tokio::sync::watch::channel(Arc::new(AgentView {
        manager: Arc::new(manager),
        ..Default::default()
    }));
    let (_samples_tx, samples) = tokio::sync::watch::channel(Some(Arc::new(sample)));
    let sources = StatsSources {
        view,
        statuses: Default::default(),
        samples,
    };
    let socket = scratch.path().join("crilet.sock");
    let listener = grpc::bind_unix(&socket).await?;
    let cancel = tokio_util::sync::CancellationToken::new();
    tokio::spawn(grpc::serve_unix(
        listener,
        socket.clone(),
        grpc::StatsApi::new(sources.clone()),
        None,
        None,
        cancel.clone(),
    ));
    let http_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let http_port = http_listener.local_addr()?.port();
    tokio::spawn(http::serve(
        http_listener,
        http::HttpApi {
            sources,
            metrics: Arc::new(Metrics::new()),
        },
        cancel.clone(),
    ));

    // 4 clients, each on its own connection, for `seconds`.
    let uids = Arc::new(uids);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for k in 0..4 {
        let mut client = agent_client::connect(&socket).await?;
        let uids = uids.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut i = k;
            while Instant::now() < deadline {
                let uid = uids[i % uids.len()].clone();
                i += 7;
                let t = Instant::now();
                let r = client
                    .get_pod_stats(pb::GetPodStatsRequest {
                        pod: Some(pb::PodRef {
                            r#ref: Some(pb::pod_ref::Ref::Uid(uid)),
                        }),
                    })
                    .await
                    .expect("GetPodStats");
                lat.push(t.elapsed());
                assert!(!r.into_inner().containers.is_empty());
            }
            lat
        }));
    }
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await?);
    }
    let elapsed = started.elapsed();
    lat.sort();

    let mut summary = Vec::new();
    for _ in 0..50 {
        let t = Instant::now();
        let mut s = std::net::TcpStream::connect(("127.0.0.1", http_port))?;
        write!(
            s,
            "GET /stats/summary HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )?;
        let mut body = Vec::new();
        s.read_to_end(&mut body)?;
        summary.push(t.elapsed());
        assert!(body.starts_with(b"HTTP/1.1 200"));
    }
    summary.sort();
    cancel.cancel();

    println!(
        "stats_api: {n} pods in the cache, 4 concurrent clients over the unix socket for {seconds} s"
    );
    println!(
        "  GetPodStats         p50 {:.3} ms   p99 {:.3} ms   {:.0} req/s ({} requests)",
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        lat.len() as f64 / elapsed.as_secs_f64(),
        lat.len()
    );
    println!(
        "  /stats/summary      p50 {:.3} ms   p99 {:.3} ms   (sequential, loopback HTTP)",
        percentile(&summary, 0.5),
        percentile(&summary, 0.99)
    );
    println!(
        "  ListPodSandboxStats p50 {:.1} ms   max {:.1} ms   (one CRI call, {n} pods)",
        percentile(&cri, 0.5),
        ms(cri[cri.len() - 1])
    );
    println!(
        "  collector round     {:.1} ms   (all CRI calls + host readings)",
        ms(round)
    );

    for (sb, cgroup) in pods {
        raw_remove(rt.as_ref(), &sb, &cgroup).await;
    }
    Ok(())
}
