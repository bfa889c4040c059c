use super::*;

#[test]
fn nodes_are_named_and_placed_by_index() {
    assert_eq!(node_name("hollow", 0), "hollow-0");
    assert_eq!(node_name("crilet-hollow", 499), "crilet-hollow-499");
    let dirs = NodeDirs::new(Path::new("/state"), "hollow-7");
    assert_eq!(dirs.manifests(), Path::new("/state/hollow-7/manifests"));
    assert_eq!(dirs.root(), Path::new("/state/hollow-7/root"));
    assert_eq!(dirs.kubeconfig(), Path::new("/state/hollow-7/kubeconfig"));
    assert_eq!(dirs.cgroup_fs(), Path::new("/state/hollow-7/cgroup"));
}

#[test]
fn a_node_gets_its_own_flags_and_the_fleets_bootstrap() {
    let dirs = NodeDirs::new(Path::new("/state"), "hollow-3");
    let args = node_args(&dirs, "hollow-3", Path::new("/b.kubeconfig"), None);
    assert_eq!(args.hostname_override.as_deref(), Some("hollow-3"));
    assert_eq!(args.kubeconfig, Some(dirs.kubeconfig()));
    assert_eq!(
        args.bootstrap_kubeconfig.as_deref(),
        Some(Path::new("/b.kubeconfig"))
    );
    assert_eq!(args.rotate_certificates, Some(true));
    assert_eq!(args.port, Some(0), "no kubelet server per hollow node");
    assert_eq!(args.config, None);
    // The flags resolve as `crilet run`'s would, to this node's places.
    let settings = crate::agent::config::load(&args).expect("a hollow node's flags load");
    assert_eq!(settings.pod_manifest_path, Some(dirs.manifests()));
    assert_eq!(settings.root_dir, dirs.root());
    assert_eq!(settings.certificates.cert_dir, dirs.root().join("pki"));
    assert_eq!(settings.log_dirs.pod_logs_dir, dirs.pod_logs());
    let other = node_args(
        &NodeDirs::new(Path::new("/state"), "hollow-4"),
        "hollow-4",
        Path::new("/b"),
        None,
    );
    assert_ne!(other.kubeconfig, args.kubeconfig);
}

#[test]
fn manifests_are_valid_static_pods_named_per_index() {
    let text = manifest("hollow-1", 4, "registry.k8s.io/pause:3.10");
    let now = jiff::Timestamp::UNIX_EPOCH;
    let loaded =
        crate::config::file::load_manifest("hollow-4.yaml", text.as_bytes(), "hollow-1", now)
            .expect("a generated manifest loads as the file source loads it");
    assert_eq!(
        loaded.pod.metadata.name.as_deref(),
        Some("hollow-4-hollow-1")
    );
    assert_eq!(manifest_file(4), "hollow-4.yaml");
    assert_ne!(manifest("hollow-1", 4, "x"), manifest("hollow-1", 5, "x"));
    assert_eq!(manifest("hollow-1", 4, "x"), manifest("hollow-1", 4, "x"));
}

#[test]
fn the_machine_is_made_up_and_healthy() {
    let c = machine_capacity(110);
    assert_eq!(
        (c.cpu_millicores, c.memory_bytes, c.pods),
        (4000, 16 << 30, 110)
    );
    assert_eq!(c.ephemeral_storage_bytes, Some(100 << 30));
    let o = observation();
    for observed in [o.memory, o.nodefs, o.imagefs, o.pid, o.nodefs_inodes] {
        let observed = observed.expect("every reading is known");
        assert!(observed.available * 2 >= observed.capacity);
    }
}
