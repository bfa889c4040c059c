//! One pod's CRI requests as crilet sends them, and so as the kubelet does:
//! built by crilet's own mapping from a manifest and the node context that
//! `crilet run` with the same flags would read, so that a raw sequence of
//! these requests costs the runtime what crilet's does. A bare config
//! ([`super::pod`]) leaves out what the kubelet always sends (the sandbox's
//! RuntimeDefault seccomp, the /etc/hosts and termination-log binds, the
//! resources), which the runtime spends time on.
//!
//! Invariant: only crilet's public mapping decides the requests; the files
//! those requests bind-mount are made here as crilet makes them.

use std::path::Path;

use clap::Parser;
use crilet::agent::config::{ConfigFile, RunArgs, resolve};
use crilet::config::file::load_manifest;
use crilet::cri::{ContainerConfig, PodSandboxConfig, Runtime};
use crilet::kuberuntime::mapping::{
    ContainerStart, ImageUser, container_config, etc_hosts_file, sandbox_config,
    termination_message_file,
};

/// `crilet run`'s flags, to resolve them as crilet does.
#[derive(Parser)]
struct Flags {
    #[command(flatten)]
    run: RunArgs,
}

/// The requests for the first container of `manifest`, attempt 0, with the
/// files they name made (the managed hosts file, the termination-message
/// file). `flags` are the `crilet run` flags the agent in the same bench gets.
pub async fn kubelet_pod(
    rt: &dyn Runtime,
    flags: &[String],
    manifest: &str,
    node: &str,
) -> (PodSandboxConfig, ContainerConfig) {
    let argv = std::iter::once("crilet".to_string()).chain(flags.iter().cloned());
    let flags = Flags::parse_from(argv);
    let settings = resolve(&flags.run, &ConfigFile::default(), "bench flags").expect("flags");
    let handlers = rt.status().await.map(|s| s.handlers).unwrap_or_default();
    let (_, allocatable) = settings.node_resources();
    let ctx = settings.node_context(node.to_string(), &allocatable, &handlers);
    let now = jiff::Timestamp::now();
    let pod = load_manifest("bench.yaml", manifest.as_bytes(), node, now)
        .expect("a valid manifest")
        .pod;
    let sandbox = sandbox_config(&ctx, &pod, 0).expect("sandbox config");
    let spec = pod.spec.as_ref().expect("a pod spec");
    let container = &spec.containers[0];
    let name = container.image.as_deref().expect("an image");
    let image = rt.image_status(name).await.expect("ImageStatus");
    let image = image.expect("the image is present");
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let hosts = etc_hosts_file(&ctx, uid);
    make_file(&hosts, &std::fs::read("/etc/hosts").unwrap_or_default());
    make_file(
        &termination_message_file(&ctx, uid, &container.name, 0),
        b"",
    );
    let start = ContainerStart {
        restart_count: 0,
        attempt: 0,
        pod_ip: "",
        image_ref: &image.id,
        image_user: Some(ImageUser::from_status(image.uid, &image.username)),
        etc_hosts: Some(&hosts),
        service_env: &[],
    };
    let config = container_config(&ctx, &pod, container, &start).expect("container config");
    (sandbox, config)
}

fn make_file(path: &Path, content: &[u8]) {
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("its directory");
    std::fs::write(path, content).expect("the file");
}
