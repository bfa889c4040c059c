//! `crilet runtime-info`: what the runtime behind an endpoint is and holds.

use std::fmt::Write;
use std::path::Path;

use serde::Serialize;

use crate::cri::{self, NETWORK_READY, RUNTIME_READY, Runtime};
use crate::images::disk::{DiskStats, FsStats};
use crate::units::human_bytes;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeInfo {
    pub endpoint: String,
    pub runtime_name: String,
    pub runtime_version: String,
    pub runtime_api_version: String,
    pub conditions: Vec<cri::RuntimeCondition>,
    pub image_filesystems: Vec<ImageFilesystem>,
    pub images: Vec<ImageRow>,
    /// What `crictl pods` shows.
    pub pod_sandboxes: Vec<SandboxRow>,
    /// What `crictl ps -a` shows.
    pub containers: Vec<ContainerRow>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxRow {
    pub id: String,
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub attempt: u32,
    pub state: cri::PodSandboxState,
    pub created_at: i64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRow {
    pub id: String,
    pub pod_sandbox_id: String,
    pub name: String,
    pub attempt: u32,
    pub state: cri::ContainerState,
    pub image: String,
    /// The `io.kubernetes.pod.name` label: crictl's POD column.
    pub pod_name: String,
    pub created_at: i64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageFilesystem {
    pub mountpoint: String,
    /// As the runtime reports it (its own snapshots only).
    pub used_bytes: Option<u64>,
    pub inodes_used: Option<u64>,
    /// From statvfs on the mountpoint; `None` with `error` set when that failed.
    pub capacity_bytes: Option<u64>,
    pub available_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageRow {
    pub id: String,
    pub repo_tags: Vec<String>,
    pub repo_digests: Vec<String>,
    pub size_bytes: u64,
    pub pinned: bool,
}

/// Asks the runtime for everything `runtime-info` shows.
pub async fn gather(
    rt: &dyn Runtime,
    endpoint: &str,
    disk: &dyn DiskStats,
) -> cri::Result<RuntimeInfo> {
    let version = rt.version().await?;
    let status = rt.status().await?;
    let fs = rt.image_fs_info().await?;
    let mut images: Vec<ImageRow> = rt
        .list_images()
        .await?
        .into_iter()
        .map(|i| ImageRow {
            id: i.id,
            repo_tags: i.repo_tags,
            repo_digests: i.repo_digests,
            size_bytes: i.size,
            pinned: i.pinned,
        })
        .collect();
    images.sort_by(|a, b| a.repo_tags.cmp(&b.repo_tags).then(a.id.cmp(&b.id)));
    let image_filesystems = fs
        .image_filesystems
        .into_iter()
        .map(|f| {
            let stat = if f.mountpoint.is_empty() {
                Err("the runtime reported no mountpoint".to_string())
            } else {
                disk.stat(Path::new(&f.mountpoint))
                    .map_err(|e| e.to_string())
            };
            let (capacity_bytes, available_bytes, error) = match stat {
                Ok(FsStats {
                    capacity_bytes,
                    available_bytes,
                    ..
                }) => (Some(capacity_bytes), Some(available_bytes), None),
                Err(e) => (None, None, Some(e)),
            };
            ImageFilesystem {
                mountpoint: f.mountpoint,
                used_bytes: f.used_bytes,
                inodes_used: f.inodes_used,
                capacity_bytes,
                available_bytes,
                error,
            }
        })
        .collect();
    let mut pod_sandboxes: Vec<SandboxRow> = rt
        .list_pod_sandbox(&Default::default())
        .await?
        .into_iter()
        .map(|s| SandboxRow {
            id: s.id,
            name: s.metadata.name,
            namespace: s.metadata.namespace,
            uid: s.metadata.uid,
            attempt: s.metadata.attempt,
            state: s.state,
            created_at: s.created_at,
        })
        .collect();
    pod_sandboxes.sort_by_key(|p| std::cmp::Reverse(p.created_at));
    let mut containers: Vec<ContainerRow> = rt
        .list_containers(&Default::default())
        .await?
        .into_iter()
        .map(|c| ContainerRow {
            pod_name: c
                .labels
                .get(crate::kuberuntime::labels::POD_NAME_LABEL)
                .cloned()
                .unwrap_or_else(|| "unknown".into()),
            id: c.id,
            pod_sandbox_id: c.pod_sandbox_id,
            name: c.metadata.name,
            attempt: c.metadata.attempt,
            state: c.state,
            image: c.image,
            created_at: c.created_at,
        })
        .collect();
    containers.sort_by_key(|c| std::cmp::Reverse(c.created_at));
    Ok(RuntimeInfo {
        endpoint: endpoint.to_string(),
        runtime_name: version.runtime_name,
        runtime_version: version.runtime_version,
        runtime_api_version: version.runtime_api_version,
        conditions: status.conditions,
        image_filesystems,
        images,
        pod_sandboxes,
        containers,
    })
}

fn opt_bytes(v: Option<u64>) -> String {
    v.map(human_bytes).unwrap_or_else(|| "-".into())
}

/// The human-readable form.
pub fn render_table(info: &RuntimeInfo) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Endpoint:     {}", info.endpoint);
    let _ = writeln!(
        out,
        "Runtime:      {} {} (CRI {})",
        info.runtime_name, info.runtime_version, info.runtime_api_version
    );
    out.push_str("\nCONDITION      STATUS  REASON  MESSAGE\n");
    let mut conditions = info.conditions.clone();
    // The two conditions the kubelet acts on come first, as it lists them.
    conditions.sort_by_key(|c| match c.kind.as_str() {
        RUNTIME_READY => 0,
        NETWORK_READY => 1,
        _ => 2,
    });
    for c in &conditions {
        let _ = writeln!(
            out,
            "{:<14} {:<7} {:<7} {}",
            c.kind, c.status, c.reason, c.message
        );
    }
    out.push_str("\nIMAGE FILESYSTEM\n");
    for f in &info.image_filesystems {
        let _ = writeln!(out, "  Mountpoint: {}", f.mountpoint);
        let _ = writeln!(
            out,
            "  Used:       {} (runtime)   Capacity: {}   Available: {}",
            opt_bytes(f.used_bytes),
            opt_bytes(f.capacity_bytes),
            opt_bytes(f.available_bytes)
        );
        if let Some(e) = &f.error {
            let _ = writeln!(out, "  Error:      {e}");
        }
    }
    let _ = writeln!(out, "\nIMAGE ID        SIZE        PINNED  TAGS");
    for i in &info.images {
        let short = i.id.strip_prefix("sha256:").unwrap_or(&i.id);
        let tags = if i.repo_tags.is_empty() {
            "<none>".to_string()
        } else {
            i.repo_tags.join(",")
        };
        let _ = writeln!(
            out,
            "{:<15} {:<11} {:<7} {}",
            &short[..short.len().min(13)],
            human_bytes(i.size_bytes),
            i.pinned,
            tags
        );
    }
    let _ = writeln!(
        out,
        "\nPOD ID          STATE     NAME                                NAMESPACE        ATTEMPT"
    );
    for p in &info.pod_sandboxes {
        let _ = writeln!(
            out,
            "{:<15} {:<9} {:<35} {:<16} {}",
            short_id(&p.id),
            format!("{:?}", p.state),
            p.name,
            p.namespace,
            p.attempt
        );
    }
    let _ = writeln!(
        out,
        "\nCONTAINER       STATE     NAME                 ATTEMPT POD ID          POD"
    );
    for c in &info.containers {
        let _ = writeln!(
            out,
            "{:<15} {:<9} {:<20} {:<7} {:<15} {}",
            short_id(&c.id),
            format!("{:?}", c.state),
            c.name,
            c.attempt,
            short_id(&c.pod_sandbox_id),
            c.pod_name
        );
    }
    out
}

fn short_id(id: &str) -> &str {
    &id[..id.len().min(13)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cri::FakeRuntime;

    struct FixedDisk;
    impl DiskStats for FixedDisk {
        fn stat(&self, _: &Path) -> std::io::Result<FsStats> {
            Ok(FsStats {
                capacity_bytes: 100 << 20,
                available_bytes: 40 << 20,
                inodes: 10,
                inodes_free: 5,
            })
        }
    }

    #[tokio::test]
    async fn gathers_version_conditions_fs_and_images() {
        let rt = FakeRuntime::new();
        rt.add_image("docker.io/library/busybox:latest", 1_031_774);
        rt.add_image("registry.k8s.io/pause:3.6", 1_028_283);
        let info = gather(&rt, "unix:///x.sock", &FixedDisk).await.unwrap();
        assert_eq!(info.runtime_name, "fake");
        assert_eq!(info.images.len(), 2);
        assert_eq!(
            info.images[0].repo_tags,
            ["docker.io/library/busybox:latest"]
        );
        let fs = &info.image_filesystems[0];
        assert_eq!(fs.capacity_bytes, Some(100 << 20));
        assert_eq!(fs.used_bytes, Some(1_031_774 + 1_028_283));
        let table = render_table(&info);
        assert!(table.contains("RuntimeReady   true"), "{table}");
        assert!(table.contains("Capacity: 100.0 MiB"), "{table}");
        assert!(table.contains("registry.k8s.io/pause:3.6"), "{table}");
        let json: serde_json::Value = serde_json::to_value(&info).unwrap();
        assert_eq!(json["imageFilesystems"][0]["availableBytes"], 40 << 20);
        assert_eq!(json["conditions"][0]["type"], "RuntimeReady");
    }

    #[tokio::test]
    async fn lists_sandboxes_and_containers_as_crictl_would() {
        use crate::cri::*;
        let rt = FakeRuntime::new();
        rt.add_image("busybox", 1);
        let sb = PodSandboxConfig {
            metadata: PodSandboxMetadata {
                name: "web-node1".into(),
                uid: "u1".into(),
                namespace: "default".into(),
                attempt: 2,
            },
            ..Default::default()
        };
        let id = rt.run_pod_sandbox(&sb).await.unwrap();
        let c = ContainerConfig {
            metadata: ContainerMetadata {
                name: "httpd".into(),
                attempt: 1,
            },
            image: "busybox".into(),
            labels: Labels::from([(
                crate::kuberuntime::labels::POD_NAME_LABEL.to_string(),
                "web-node1".to_string(),
            )]),
            ..Default::default()
        };
        rt.create_container(&id, &c, &sb).await.unwrap();
        let info = gather(&rt, "unix:///x.sock", &FixedDisk).await.unwrap();
        assert_eq!(info.pod_sandboxes.len(), 1);
        assert_eq!(info.pod_sandboxes[0].attempt, 2);
        assert_eq!(info.containers[0].pod_name, "web-node1");
        let table = render_table(&info);
        let row = table
            .lines()
            .find(|l| l.contains("web-node1") && l.contains("Ready"))
            .unwrap();
        assert!(
            row.contains("default") && row.trim_end().ends_with('2'),
            "{row}"
        );
        let row = table.lines().find(|l| l.contains("httpd")).unwrap();
        assert!(
            row.contains("Created") && row.ends_with("web-node1"),
            "{row}"
        );
    }

    #[tokio::test]
    async fn a_runtime_error_stops_the_command() {
        let rt = FakeRuntime::new();
        rt.fail_next("Status", tonic::Status::unavailable("down"));
        let err = gather(&rt, "unix:///x.sock", &FixedDisk).await.unwrap_err();
        assert!(err.to_string().contains("Status"), "{err}");
    }
}
