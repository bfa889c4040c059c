//! Every entry point of the API translates a mirror UID, and answers by
//! static UID and by name alike (in process, no socket).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ContainerStatus, PodSpec, PodStatus};
use tokio::sync::watch;
use tonic::Request;

use super::*;
use crate::pod::Pod;
use crate::pod::manager::PodManager;
use crate::pod::view::AgentView;
use crate::stats::assemble::Sample;
use crate::stats::types::{self, Time};

const STATIC: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const MIRROR: &str = "11111111-2222-3333-4444-555555555555";

fn pod(uid: &str, annotations: &[(&str, &str)]) -> Pod {
    let mut p = crate::pod::lookup::tests::pod("web-n1", uid, annotations);
    p.spec = Some(PodSpec {
        containers: vec![k8s_openapi::api::core::v1::Container {
            name: "app".into(),
            image: Some("busybox".into()),
            ..Default::default()
        }],
        ..Default::default()
    });
    p
}

fn api() -> (StatsApi, watch::Sender<Option<Arc<Sample>>>) {
    let mut m = PodManager::new();
    m.add_pod(pod(STATIC, &[("kubernetes.io/config.hash", STATIC)]));
    m.add_pod(pod(MIRROR, &[("kubernetes.io/config.mirror", STATIC)]));
    let (_, view) = watch::channel(Arc::new(AgentView {
        manager: Arc::new(m),
        ..Default::default()
    }));
    let mut sample = Sample {
        time: Time(7),
        ..Default::default()
    };
    sample.pods.insert(
        STATIC.into(),
        types::PodStats {
            pod_ref: types::PodReference {
                name: "web-n1".into(),
                namespace: "default".into(),
                uid: STATIC.into(),
            },
            containers: vec![types::ContainerStats {
                name: "app".into(),
                container_id: "c1".into(),
                ..Default::default()
            }],
            ..Default::default()
        },
    );
    let (tx, samples) = watch::channel(Some(Arc::new(sample)));
    let statuses = crate::pod::view::StatusCache::default();
    statuses.write().unwrap().insert(
        STATIC.into(),
        Arc::new(PodStatus {
            phase: Some("Running".into()),
            container_statuses: Some(vec![ContainerStatus {
                name: "app".into(),
                restart_count: 3,
                ..Default::default()
            }]),
            ..Default::default()
        }),
    );
    let sources = StatsSources {
        view,
        statuses,
        samples,
    };
    (StatsApi::new(sources), tx)
}

fn refs() -> Vec<pb::PodRef> {
    let r = |r| pb::PodRef { r#ref: Some(r) };
    vec![
        r(pb::pod_ref::Ref::Uid(STATIC.into())),
        r(pb::pod_ref::Ref::Uid(MIRROR.into())),
        r(pb::pod_ref::Ref::Name(pb::NamespacedName {
            namespace: "default".into(),
            name: "web-n1".into(),
        })),
        r(pb::pod_ref::Ref::Name(pb::NamespacedName {
            namespace: String::new(),
            name: "web-n1".into(),
        })),
    ]
}

fn check(id: Option<&pb::PodIdentity>) {
    let id = id.expect("an identity");
    assert_eq!(id.static_uid, STATIC);
    assert_eq!(id.mirror_uid, MIRROR);
    assert_eq!(id.full_name, "web-n1_default");
}

#[tokio::test]
async fn every_entry_point_finds_the_pod_under_every_name() {
    let (api, _tx) = api();
    for r in refs() {
        let s = api
            .get_pod_stats(Request::new(pb::GetPodStatsRequest {
                pod: Some(r.clone()),
            }))
            .await
            .unwrap()
            .into_inner();
        check(s.pod.as_ref());
        assert_eq!(s.sample_time_unix_nano, 7);
        let c = api
            .get_container_stats(Request::new(pb::GetContainerStatsRequest {
                pod: Some(r.clone()),
                container: "app".into(),
            }))
            .await
            .unwrap()
            .into_inner();
        check(c.pod.as_ref());
        assert_eq!(c.container.unwrap().container_id, "c1");
        let mut w = api
            .watch_pod_stats(Request::new(pb::WatchPodStatsRequest { pod: Some(r) }))
            .await
            .unwrap()
            .into_inner();
        let first = futures::StreamExt::next(&mut w).await.unwrap().unwrap();
        assert_eq!(first.pods.len(), 1);
        check(first.pods[0].pod.as_ref());
    }
    let list = api
        .list_pod_stats(Request::new(pb::ListPodStatsRequest {}))
        .await
        .unwrap()
        .into_inner();
    check(list.pods[0].pod.as_ref());
    let summary = api
        .get_summary(Request::new(pb::GetSummaryRequest::default()))
        .await
        .unwrap()
        .into_inner();
    check(summary.pods[0].pod.as_ref());
    let pods = api
        .list_pods(Request::new(pb::ListPodsRequest {}))
        .await
        .unwrap()
        .into_inner()
        .pods;
    assert_eq!(
        pods.len(),
        1,
        "the mirror is not listed as a pod of its own"
    );
    check(pods[0].pod.as_ref());
    assert_eq!((pods[0].phase.as_str(), pods[0].restarts), ("Running", 3));
}

#[tokio::test]
async fn unknown_malformed_and_unsampled_pods_get_distinct_codes() {
    let (api, tx) = api();
    let get =
        |r: Option<pb::PodRef>| api.get_pod_stats(Request::new(pb::GetPodStatsRequest { pod: r }));
    let uid = |u: &str| {
        Some(pb::PodRef {
            r#ref: Some(pb::pod_ref::Ref::Uid(u.into())),
        })
    };
    let e = get(uid("ffffffffffffffffffffffffffffffff"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound);
    assert!(e.message().contains("ffffffffffffffffffffffffffffffff"));
    for bad in [None, Some(pb::PodRef { r#ref: None }), uid(" ")] {
        assert_eq!(
            get(bad).await.unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
    }
    let e = api
        .get_container_stats(Request::new(pb::GetContainerStatsRequest {
            pod: uid(MIRROR),
            container: "sidecar".into(),
        }))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound);
    assert!(e.message().contains("sidecar"));
    let e = api
        .watch_pod_stats(Request::new(pb::WatchPodStatsRequest {
            pod: uid("ffffffffffffffffffffffffffffffff"),
        }))
        .await
        .err()
        .unwrap();
    assert_eq!(e.code(), tonic::Code::NotFound);

    // Known but not in the sample: UNAVAILABLE, not NOT_FOUND.
    tx.send_replace(Some(Arc::new(Sample::default())));
    let e = get(uid(MIRROR)).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unavailable);
    tx.send_replace(None);
    let e = api
        .get_summary(Request::new(pb::GetSummaryRequest::default()))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unavailable);
}
