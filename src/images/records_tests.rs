use super::*;
use crate::cri::{ContainerMetadata, ContainerState};

pub(crate) fn image(id: &str, tag: &str, size: u64) -> Image {
    Image {
        id: id.into(),
        repo_tags: vec![tag.into()],
        repo_digests: vec![format!("{}@sha256:d{id}", tag.split(':').next().unwrap())],
        size,
        uid: None,
        username: String::new(),
        pinned: false,
    }
}

fn container(image: &str, image_ref: &str, state: ContainerState) -> Container {
    Container {
        id: format!("c-{image}-{image_ref}"),
        pod_sandbox_id: "sb".into(),
        metadata: ContainerMetadata::default(),
        image: image.into(),
        image_ref: image_ref.into(),
        state,
        created_at: 0,
        labels: Default::default(),
        annotations: Default::default(),
    }
}

#[test]
fn normalizes_like_docker() {
    for (short, full) in [
        ("busybox", "docker.io/library/busybox:latest"),
        ("busybox:1.36", "docker.io/library/busybox:1.36"),
        ("me/app:1", "docker.io/me/app:1"),
        ("registry.k8s.io/pause:3.6", "registry.k8s.io/pause:3.6"),
        ("127.0.0.1:5000/x/y", "127.0.0.1:5000/x/y:latest"),
        ("localhost/x", "localhost/x:latest"),
        ("busybox@sha256:ab", "docker.io/library/busybox@sha256:ab"),
    ] {
        assert_eq!(normalize_reference(short), full);
    }
}

#[test]
fn first_detection_marks_images_as_present_at_start() {
    let mut r = ImageRecords::new();
    r.detect(&[image("sha256:a", "a:1", 10)], &[], None, &[], 100);
    assert_eq!(r.get("sha256:a").unwrap().first_detected, None);
    assert_eq!(r.started_at(), Some(100));
    r.detect(
        &[image("sha256:a", "a:1", 10), image("sha256:b", "b:1", 5)],
        &[],
        None,
        &[],
        200,
    );
    assert_eq!(r.get("sha256:a").unwrap().first_detected, None);
    assert_eq!(r.get("sha256:b").unwrap().first_detected, Some(200));
    // Gone from the runtime: gone from the records.
    r.detect(&[image("sha256:b", "b:1", 5)], &[], None, &[], 300);
    assert!(r.get("sha256:a").is_none());
    assert_eq!(r.get("sha256:b").unwrap().first_detected, Some(200));
}

#[test]
fn any_container_marks_its_image_used_by_ref_tag_or_digest() {
    let images = [
        image("sha256:a", "docker.io/library/a:1", 1),
        image("sha256:b", "docker.io/library/b:1", 1),
        image("sha256:c", "docker.io/library/c:1", 1),
        image("sha256:d", "docker.io/library/d:1", 1),
    ];
    let containers = [
        container("whatever", "sha256:a", ContainerState::Exited),
        container("b:1", "", ContainerState::Running),
        container(
            "x",
            "docker.io/library/c@sha256:dsha256:c",
            ContainerState::Created,
        ),
    ];
    let mut r = ImageRecords::new();
    r.detect(&images, &containers, None, &[], 50);
    let used: Vec<(&str, bool, Option<i64>)> = r
        .iter()
        .map(|i| (i.id.as_str(), i.in_use, i.last_used))
        .collect();
    assert_eq!(
        used,
        [
            ("sha256:a", true, Some(50)),
            ("sha256:b", true, Some(50)),
            ("sha256:c", true, Some(50)),
            ("sha256:d", false, None),
        ]
    );
    // Unused later: last_used stays at the last detection that saw it used.
    r.detect(&images, &[], None, &[], 90);
    let a = r.get("sha256:a").unwrap();
    assert!(!a.in_use);
    assert_eq!(a.last_used, Some(50));
}

#[test]
fn protections_runtime_sandbox_and_configured() {
    let mut pinned_by_runtime = image("sha256:r", "r:1", 1);
    pinned_by_runtime.pinned = true;
    let images = [
        pinned_by_runtime,
        image("sha256:p", "registry.k8s.io/pause:3.6", 1),
        image("sha256:k", "docker.io/library/keep:1", 1),
        image("sha256:f", "free:1", 1),
    ];
    let mut r = ImageRecords::new();
    r.detect(
        &images,
        &[],
        Some("registry.k8s.io/pause:3.6"),
        &["keep:1".to_string(), "unknown:9".to_string()],
        1,
    );
    let p = |id: &str| r.get(id).unwrap().pinned;
    assert_eq!(p("sha256:r"), Some(Protection::Runtime));
    assert_eq!(p("sha256:p"), Some(Protection::Sandbox));
    assert_eq!(p("sha256:k"), Some(Protection::Configured));
    assert_eq!(p("sha256:f"), None);
}

#[test]
fn a_tag_moved_to_another_image_protects_the_new_one() {
    let mut r = ImageRecords::new();
    let pin = ["docker.io/library/x:1".to_string()];
    r.detect(
        &[
            image("sha256:a", "docker.io/library/x:1", 1),
            image("sha256:b", "b:1", 1),
        ],
        &[],
        None,
        &pin,
        1,
    );
    assert_eq!(r.resolve("x:1"), Some("sha256:a"));
    assert_eq!(
        r.get("sha256:a").unwrap().pinned,
        Some(Protection::Configured)
    );
    // x:1 re-tagged onto b (a pull of a newer x:1): a keeps only its ID.
    let mut a = image("sha256:a", "unused", 1);
    a.repo_tags.clear();
    a.repo_digests.clear();
    let b = Image {
        repo_tags: vec!["b:1".into(), "docker.io/library/x:1".into()],
        ..image("sha256:b", "b:1", 1)
    };
    r.detect(&[a, b], &[], None, &pin, 2);
    assert_eq!(r.resolve("x:1"), Some("sha256:b"));
    assert_eq!(r.get("sha256:a").unwrap().pinned, None);
    assert_eq!(
        r.get("sha256:b").unwrap().pinned,
        Some(Protection::Configured)
    );
    r.forget("sha256:b");
    assert_eq!(r.resolve("x:1"), None);
    assert_eq!(r.resolve("a"), Some("sha256:a"), "a bare hex ID");
}

#[test]
fn cri_o_ids_without_the_algorithm_resolve_either_way() {
    // CRI-O lists `<hex>` where containerd lists `sha256:<hex>`, and its
    // containers name their image by repo digest (image_ref) rather than ID.
    let mut r = ImageRecords::default();
    let hex = "14035b6f41fa";
    let img = Image {
        repo_digests: vec![format!("docker.io/library/busybox@sha256:m{hex}")],
        ..image(hex, "docker.io/library/busybox:latest", 2_141_369)
    };
    let running = container(
        "docker.io/library/busybox:latest",
        &format!("docker.io/library/busybox@sha256:m{hex}"),
        ContainerState::Running,
    );
    r.detect(&[img], &[running], None, &[], 1);
    assert_eq!(r.resolve(hex), Some(hex));
    assert_eq!(r.resolve(&format!("sha256:{hex}")), Some(hex));
    assert!(r.get(hex).unwrap().in_use, "the digest ref marks it in use");
}
