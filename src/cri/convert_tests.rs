//! Conversions at the wire boundary: field numbers and enum values as CRI
//! defines them.

use super::*;

#[test]
fn images_carry_the_user_specified_name() {
    let spec = image_spec("docker.io/library/busybox:latest", "");
    assert_eq!(spec.image, "docker.io/library/busybox:latest");
    assert_eq!(spec.user_specified_image, spec.image);
    let config = container_config_to(&ContainerConfig {
        image: "registry.k8s.io/etcd:3.5.15-0".into(),
        ..Default::default()
    });
    let image = config.image.expect("an image spec");
    assert_eq!(image.user_specified_image, "registry.k8s.io/etcd:3.5.15-0");
    // The kubelet's form: the resolved ID to run, the spec's name beside it.
    let config = container_config_to(&ContainerConfig {
        image: "sha256:14035b6f41faf2b8ad1ad2998f0801cfc5876250df972d5d1c2a4ac3a5412a2d".into(),
        user_specified_image: "docker.io/library/busybox:latest".into(),
        ..Default::default()
    });
    let image = config.image.expect("an image spec");
    assert_eq!(
        (image.image.as_str(), image.user_specified_image.as_str()),
        (
            "sha256:14035b6f41faf2b8ad1ad2998f0801cfc5876250df972d5d1c2a4ac3a5412a2d",
            "docker.io/library/busybox:latest"
        )
    );
}

#[test]
fn resources_cross_the_wire_both_ways() {
    let r = LinuxContainerResources {
        cpu_period: 100_000,
        cpu_quota: 50_000,
        cpu_shares: 256,
        memory_limit_in_bytes: 128 << 20,
        memory_swap_limit_in_bytes: 128 << 20,
        hugepage_limits: vec![
            HugepageLimit {
                page_size: "2MB".into(),
                limit: 0,
            },
            HugepageLimit {
                page_size: "1GB".into(),
                limit: 1 << 30,
            },
        ],
        unified: [("memory.swap.max".to_string(), "0".to_string())].into(),
        ..Default::default()
    };
    assert_eq!(resources_from(resources_to(&r)), r);
    let sandbox = sandbox_config_to(&PodSandboxConfig {
        resources: Some(r.clone()),
        overhead: Some(LinuxContainerResources::default()),
        ..Default::default()
    });
    let linux = sandbox.linux.expect("linux");
    assert_eq!(linux.resources.map(resources_from), Some(r));
    assert_eq!(
        linux.overhead,
        Some(pb::LinuxContainerResources::default()),
        "an empty overhead is sent, as the kubelet sends it"
    );
}

#[test]
fn cgroup_drivers_follow_the_wire_numbers() {
    // SYSTEMD is 0: an answer with `linux` but no driver means systemd.
    let default = pb::LinuxRuntimeConfiguration::default();
    assert_eq!(
        cgroup_driver_from(default.cgroup_driver()),
        CgroupDriver::Systemd
    );
    let cgroupfs = pb::LinuxRuntimeConfiguration {
        cgroup_driver: pb::CgroupDriver::Cgroupfs as i32,
    };
    assert_eq!(
        cgroup_driver_from(cgroupfs.cgroup_driver()),
        CgroupDriver::Cgroupfs
    );
}

#[test]
fn container_events_take_the_pod_from_the_sandbox_status() {
    let event = pb::ContainerEventResponse {
        container_id: "c1".into(),
        container_event_type: pb::ContainerEventType::ContainerStoppedEvent as i32,
        created_at: 42,
        pod_sandbox_status: Some(pb::PodSandboxStatus {
            id: "sb1".into(),
            metadata: Some(pb::PodSandboxMetadata {
                uid: "u1".into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        containers_statuses: vec![],
    };
    let e = container_event_from(event);
    assert_eq!(e.container_id, "c1");
    assert_eq!(e.event_type, ContainerEventType::Stopped);
    assert_eq!(e.created_at, 42);
    assert_eq!(e.pod_sandbox_id.as_deref(), Some("sb1"));
    assert_eq!(e.pod_uid.as_deref(), Some("u1"));
    assert!(!e.is_sandbox());
    // No sandbox status (a sandbox already gone), an unknown type.
    let bare = container_event_from(pb::ContainerEventResponse {
        container_id: "sb1".into(),
        container_event_type: 9,
        ..Default::default()
    });
    assert_eq!(bare.event_type, ContainerEventType::Unknown(9));
    assert_eq!((bare.pod_sandbox_id, bare.pod_uid), (None, None));
}

#[test]
fn capabilities_are_sent_only_when_the_spec_has_some() {
    let none = container_config_to(&ContainerConfig {
        security: Some(ContainerSecurity::default()),
        ..Default::default()
    });
    let sc = none.linux.unwrap().security_context.unwrap();
    assert_eq!(sc.capabilities, None);
    let some = container_config_to(&ContainerConfig {
        security: Some(ContainerSecurity {
            capabilities_drop: vec!["ALL".into()],
            ..Default::default()
        }),
        ..Default::default()
    });
    let caps = some.linux.unwrap().security_context.unwrap().capabilities;
    assert_eq!(
        caps.map(|c| c.drop_capabilities),
        Some(vec!["ALL".to_string()])
    );
}
