//! The operator commands that ask a running agent over its socket:
//! `crilet pods`, `crilet stats [POD|UID]` and `crilet summary`.
//! Fetching is thin; rendering is pure and tested.

use std::path::{Path, PathBuf};

use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, Uri};

use crate::api::stats::v1 as pb;
use crate::pod::lookup::PodRef;
use crate::units::human_bytes;
use pb::stats_client::StatsClient;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(
        "crilet is not running: no socket at {0} (start the agent with `crilet run`, or pass --socket)"
    )]
    NoSocket(PathBuf),
    #[error("crilet is not running: nothing answers on {0} (a stale socket?)")]
    Refused(PathBuf),
    #[error(
        "cannot open {0}: permission denied (the socket is mode 0600: run as the agent's user)"
    )]
    Permission(PathBuf),
    #[error("connecting to {path}: {message}")]
    Connect { path: PathBuf, message: String },
    #[error("{0}")]
    Status(String),
    #[error(transparent)]
    Ref(#[from] crate::pod::lookup::LookupError),
}

impl From<tonic::Status> for ClientError {
    fn from(s: tonic::Status) -> Self {
        ClientError::Status(format!("{:?}: {}", s.code(), s.message()))
    }
}

/// Connects now (not lazily), so a missing agent is reported at once.
pub async fn connect(socket: &Path) -> Result<StatsClient<Channel>, ClientError> {
    Ok(StatsClient::new(channel(socket).await?))
}

pub async fn images(socket: &Path) -> Result<Vec<pb::ImageInfo>, ClientError> {
    let mut c = pb::images_client::ImagesClient::new(channel(socket).await?);
    Ok(c.list_images(pb::ListImagesRequest {})
        .await?
        .into_inner()
        .images)
}

pub async fn plan_image_gc(socket: &Path) -> Result<pb::ImageGcPlan, ClientError> {
    let mut c = pb::images_client::ImagesClient::new(channel(socket).await?);
    Ok(c.plan_image_gc(pb::PlanImageGcRequest {})
        .await?
        .into_inner())
}

/// A channel to the agent's socket, dialled now so that a missing agent
/// is reported at once, in words.
pub async fn channel(socket: &Path) -> Result<Channel, ClientError> {
    let path = socket.to_path_buf();
    if !path.exists() {
        return Err(ClientError::NoSocket(path));
    }
    match tokio::net::UnixStream::connect(&path).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            return Err(ClientError::Refused(path));
        }
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return Err(ClientError::Permission(path));
        }
        Err(e) => {
            return Err(ClientError::Connect {
                path,
                message: e.to_string(),
            });
        }
    }
    let dial = path.clone();
    let channel = tonic::transport::Endpoint::from_static("http://crilet.local")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let p = dial.clone();
            async move {
                let s = tokio::net::UnixStream::connect(&p).await?;
                Ok::<_, std::io::Error>(TokioIo::new(s))
            }
        }))
        .await
        .map_err(|e| ClientError::Connect {
            path,
            message: e.to_string(),
        })?;
    Ok(channel)
}

/// The proto form of a CLI pod reference.
pub fn pod_ref(r: &PodRef) -> pb::PodRef {
    pb::PodRef {
        r#ref: Some(match r {
            PodRef::Uid(uid) => pb::pod_ref::Ref::Uid(uid.clone()),
            PodRef::Name { namespace, name } => pb::pod_ref::Ref::Name(pb::NamespacedName {
                namespace: namespace.clone(),
                name: name.clone(),
            }),
        }),
    }
}

pub async fn pods(socket: &Path) -> Result<Vec<pb::PodInfo>, ClientError> {
    let mut c = connect(socket).await?;
    Ok(c.list_pods(pb::ListPodsRequest {}).await?.into_inner().pods)
}

/// One pod's stats, or every pod's when `pod` is `None`.
pub async fn stats(socket: &Path, pod: Option<&str>) -> Result<Vec<pb::PodStats>, ClientError> {
    let r = pod.map(PodRef::parse).transpose()?;
    let mut c = connect(socket).await?;
    Ok(match r {
        Some(r) => vec![
            c.get_pod_stats(pb::GetPodStatsRequest {
                pod: Some(pod_ref(&r)),
            })
            .await?
            .into_inner(),
        ],
        None => {
            c.list_pod_stats(pb::ListPodStatsRequest {})
                .await?
                .into_inner()
                .pods
        }
    })
}

pub async fn summary(socket: &Path) -> Result<pb::Summary, ClientError> {
    let mut c = connect(socket).await?;
    Ok(c.get_summary(pb::GetSummaryRequest {
        only_cpu_and_memory: false,
    })
    .await?
    .into_inner())
}

/// A table with columns padded to their widest cell.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let mut l = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                l.push_str(cell);
            } else {
                l.push_str(&format!("{cell:<w$}   "));
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
    out
}

/// Ages as kubectl prints them: 45s, 12m, 5h, 3d.
pub fn age(since_unix_nano: i64, now_unix_nano: i64) -> String {
    if since_unix_nano <= 0 {
        return "<unknown>".into();
    }
    let s = (now_unix_nano - since_unix_nano).max(0) / 1_000_000_000;
    match s {
        0..120 => format!("{s}s"),
        120..7200 => format!("{}m", s / 60),
        7200..172_800 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

fn or_dash(s: &str) -> String {
    if s.is_empty() {
        "<none>".into()
    } else {
        s.to_owned()
    }
}

pub fn render_pods(pods: &[pb::PodInfo], now_unix_nano: i64) -> String {
    let rows: Vec<Vec<String>> = pods
        .iter()
        .map(|p| {
            let id = p.pod.clone().unwrap_or_default();
            let since = if p.start_time_unix_nano > 0 {
                p.start_time_unix_nano
            } else {
                p.seen_time_unix_nano
            };
            vec![
                id.namespace,
                id.name,
                format!(
                    "{}/{}",
                    p.containers.iter().filter(|c| c.ready).count(),
                    p.containers.len()
                ),
                id.static_uid,
                or_dash(&id.mirror_uid),
                p.phase.clone(),
                p.restarts.to_string(),
                age(since, now_unix_nano),
            ]
        })
        .collect();
    table(
        &[
            "NAMESPACE",
            "NAME",
            "READY",
            "UID",
            "MIRROR UID",
            "PHASE",
            "RESTARTS",
            "AGE",
        ],
        &rows,
    )
}

/// CPU in cores, three decimals; `-` before the second sample.
pub fn cores(cpu: Option<&pb::CpuStats>) -> String {
    match cpu.and_then(|c| c.usage_nano_cores) {
        Some(n) => format!("{:.3}", n as f64 / 1e9),
        None => "-".into(),
    }
}

fn bytes(v: Option<u64>) -> String {
    v.map_or_else(|| "-".into(), human_bytes)
}

pub fn render_stats(pods: &[pb::PodStats]) -> String {
    let mut rows = Vec::new();
    for p in pods {
        let id = p.pod.clone().unwrap_or_default();
        let pod = format!("{}/{}", id.namespace, id.name);
        for c in &p.containers {
            rows.push(vec![
                pod.clone(),
                c.name.clone(),
                cores(c.cpu.as_ref()),
                bytes(c.memory.as_ref().and_then(|m| m.working_set_bytes)),
                bytes(c.rootfs.as_ref().and_then(|f| f.used_bytes)),
                bytes(c.logs.as_ref().and_then(|f| f.used_bytes)),
            ]);
        }
    }
    table(
        &[
            "POD",
            "CONTAINER",
            "CPU(cores)",
            "MEMORY(working set)",
            "ROOTFS",
            "LOGS",
        ],
        &rows,
    )
}

fn fs_cell(f: Option<&pb::FsStats>) -> String {
    match f {
        Some(f) => format!("{} / {}", bytes(f.used_bytes), bytes(f.capacity_bytes)),
        None => "-".into(),
    }
}

pub fn render_summary(s: &pb::Summary) -> String {
    let node = s.node.clone().unwrap_or_default();
    let mut rows = vec![vec![
        format!("node/{}", node.node_name),
        cores(node.cpu.as_ref()),
        bytes(node.memory.as_ref().and_then(|m| m.working_set_bytes)),
        fs_cell(node.fs.as_ref()),
        fs_cell(node.image_fs.as_ref()),
    ]];
    for p in &s.pods {
        let id = p.pod.clone().unwrap_or_default();
        rows.push(vec![
            format!("pod/{}/{}", id.namespace, id.name),
            cores(p.cpu.as_ref()),
            bytes(p.memory.as_ref().and_then(|m| m.working_set_bytes)),
            fs_cell(p.ephemeral_storage.as_ref()),
            "".into(),
        ]);
    }
    table(
        &[
            "OBJECT",
            "CPU(cores)",
            "MEMORY(working set)",
            "FS (used / capacity)",
            "IMAGEFS (used / capacity)",
        ],
        &rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(name: &str, mirror: &str) -> Option<pb::PodIdentity> {
        Some(pb::PodIdentity {
            name: name.into(),
            namespace: "default".into(),
            full_name: format!("{name}_default"),
            static_uid: "0123456789abcdef0123456789abcdef".into(),
            mirror_uid: mirror.into(),
        })
    }

    #[test]
    fn ages_read_like_kubectl() {
        let s = 1_000_000_000;
        assert_eq!(age(0, 10 * s), "<unknown>");
        assert_eq!(age(s, 46 * s), "45s");
        assert_eq!(age(s, 601 * s), "10m");
        assert_eq!(age(s, 3 * 3600 * s + s), "3h");
        assert_eq!(age(s, 5 * 86_400 * s + s), "5d");
    }

    #[test]
    fn pods_table_has_both_uids() {
        let pods = vec![
            pb::PodInfo {
                pod: identity("web-n1", "11111111-2222-3333-4444-555555555555"),
                phase: "Running".into(),
                start_time_unix_nano: 1_000_000_000,
                restarts: 2,
                containers: vec![
                    pb::ContainerInfo {
                        ready: true,
                        ..Default::default()
                    },
                    pb::ContainerInfo::default(),
                ],
                ..Default::default()
            },
            pb::PodInfo {
                pod: identity("db-n1", ""),
                phase: "Pending".into(),
                ..Default::default()
            },
        ];
        let out = render_pods(&pods, 61_000_000_000);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            "NAMESPACE   NAME     READY   UID                                MIRROR UID                             PHASE     RESTARTS   AGE"
        );
        assert_eq!(
            lines[1],
            "default     web-n1   1/2     0123456789abcdef0123456789abcdef   11111111-2222-3333-4444-555555555555   Running   2          60s"
        );
        assert!(
            lines[2].contains("<none>")
                && lines[2].contains(" 0/0 ")
                && lines[2].ends_with("<unknown>"),
            "{}",
            lines[2]
        );
    }

    #[test]
    fn stats_table_shows_cores_and_bytes_per_container() {
        let pods = vec![pb::PodStats {
            pod: identity("web-n1", ""),
            containers: vec![pb::ContainerStats {
                name: "app".into(),
                cpu: Some(pb::CpuStats {
                    usage_nano_cores: Some(1_250_000_000),
                    ..Default::default()
                }),
                memory: Some(pb::MemoryStats {
                    working_set_bytes: Some(3 << 20),
                    ..Default::default()
                }),
                rootfs: Some(pb::FsStats {
                    used_bytes: Some(8192),
                    ..Default::default()
                }),
                logs: None,
                ..Default::default()
            }],
            ..Default::default()
        }];
        let out = render_stats(&pods);
        let row = out.lines().nth(1).unwrap();
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            cells,
            [
                "default/web-n1",
                "app",
                "1.250",
                "3.0",
                "MiB",
                "8.0",
                "KiB",
                "-"
            ]
        );
        assert_eq!(cores(None), "-");
    }
}
