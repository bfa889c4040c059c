//! Image GC selection time: detection (10 000 images, 1 000 containers)
//! plus the plan, as one collection computes them; goal ≤ 5 ms.
//!
//! Pure: needs no runtime. `cargo bench --bench gc_select`;
//! CRILET_BENCH_GC_IMAGES / CRILET_BENCH_GC_CONTAINERS change the sizes.
//! Prints min / median / max; asserts nothing.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crilet::cri::{Container, ContainerMetadata, ContainerState, Image};
use crilet::images::policy::GcPolicy;
use crilet::images::records::ImageRecords;
use crilet::images::select::{DiskUsage, plan};

const S: i64 = 1_000_000_000;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A digest-like hex string: real IDs are uniformly random hex.
fn digest(i: u64) -> String {
    let mut x = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    (0..4)
        .map(|_| {
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            format!("{:016x}", z ^ (z >> 31))
        })
        .collect()
}

fn main() {
    let n_images = env("CRILET_BENCH_GC_IMAGES", 10_000);
    let n_containers = env("CRILET_BENCH_GC_CONTAINERS", 1_000);
    let images: Vec<Image> = (0..n_images)
        .map(|i| Image {
            id: format!("sha256:{}", digest(i as u64)),
            repo_tags: vec![format!("registry.example/team{}/app{i}:v{}", i % 50, i % 7)],
            repo_digests: vec![format!(
                "registry.example/team{}/app{i}@sha256:{}",
                i % 50,
                digest(i as u64 + 1_000_000)
            )],
            size: 10_000_000 + (i as u64 * 7919) % 90_000_000,
            uid: None,
            username: String::new(),
            pinned: i % 997 == 0,
        })
        .collect();
    // As containerd lists them: image_ref is the image ID, image the tag;
    // 1 % without image_ref exercise the by-tag fallback.
    let containers: Vec<Container> = (0..n_containers)
        .map(|i| {
            let img = &images[(i * 7) % n_images];
            Container {
                id: digest(i as u64 + 2_000_000),
                pod_sandbox_id: format!("sb{}", i / 3),
                metadata: ContainerMetadata {
                    name: format!("c{}", i % 3),
                    attempt: 0,
                },
                image: img.repo_tags[0].clone(),
                image_ref: if i % 2 == 0 {
                    img.id.clone()
                } else {
                    String::new()
                },
                state: if i % 4 == 0 {
                    ContainerState::Exited
                } else {
                    ContainerState::Running
                },
                created_at: 0,
                labels: HashMap::new(),
                annotations: HashMap::new(),
            }
        })
        .collect();
    let policy = GcPolicy {
        max_age: Some(Duration::from_secs(86_400)),
        ..GcPolicy::default()
    };
    let disk = DiskUsage {
        capacity_bytes: 1 << 40,
        available_bytes: 1 << 36,
    };
    let pinned = vec!["registry.example/team1/app1:v1".to_string()];

    let mut records = ImageRecords::new();
    let t = Instant::now();
    records.detect(
        &images,
        &containers,
        Some("registry.k8s.io/pause:3.6"),
        &pinned,
        1000 * S,
    );
    let cold = t.elapsed();

    let iterations = env("CRILET_BENCH_ITERATIONS", 50);
    let mut times = Vec::with_capacity(iterations);
    let mut detect_times = Vec::with_capacity(iterations);
    let mut last = None;
    for k in 0..iterations {
        let now = (2000 + k as i64) * S;
        let t = Instant::now();
        records.detect(
            &images,
            &containers,
            Some("registry.k8s.io/pause:3.6"),
            &pinned,
            now,
        );
        let detected = t.elapsed();
        let p = plan(&records, disk, &policy, now).unwrap();
        let total = t.elapsed();
        times.push(total);
        detect_times.push(total - detected);
        last = Some(p);
    }
    times.sort();
    detect_times.sort();
    let p = last.unwrap();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "gc_select: {n_images} images, {n_containers} containers: detection + plan min {:.2} ms, median {:.2} ms, max {:.2} ms ({iterations} runs; median plan alone {:.2} ms; first detection {:.2} ms); {} space candidates, {} kept",
        ms(times[0]),
        ms(times[times.len() / 2]),
        ms(times[times.len() - 1]),
        ms(detect_times[detect_times.len() / 2]),
        ms(cold),
        p.space.len(),
        p.kept.len()
    );
}
