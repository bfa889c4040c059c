//! What image GC remembers of each image: when it was first detected, when
//! a container last used it, its size and whether it is protected.
//!
//! Invariant: pure. `detect` is given the runtime's images and all of its
//! containers (running and exited) and `now`; it never reads a clock. After
//! a detection there is exactly one record per image the runtime listed, and
//! `last_used == Some(now)` for every image a container refers to.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::runtime::{Container, Image};

/// Why an image is never removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Protection {
    /// The runtime marks it pinned.
    Runtime,
    /// It is the runtime's sandbox (pause) image.
    Sandbox,
    /// `--pinned-image` names it.
    Configured,
}

/// One image as GC sees it. Times are nanoseconds since the Unix epoch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageRecord {
    pub id: String,
    pub repo_tags: Vec<String>,
    pub repo_digests: Vec<String>,
    pub size: u64,
    /// `None`: already there when crilet started. Such images count as old
    /// enough: a restart of crilet must not shield every image for MinAge.
    pub first_detected: Option<i64>,
    /// `None`: no container used it since crilet started.
    pub last_used: Option<i64>,
    /// A container (in any state) refers to it at the last detection.
    pub in_use: bool,
    pub pinned: Option<Protection>,
}

impl ImageRecord {
    /// A short name for logs: the first tag, else the ID.
    pub fn name(&self) -> &str {
        self.repo_tags.first().unwrap_or(&self.id)
    }
}

/// The records of every image, by image ID.
#[derive(Debug, Clone, Default)]
pub struct ImageRecords {
    /// By image ID, with the generation of the detection that last saw it.
    records: BTreeMap<String, (u64, ImageRecord)>,
    /// Tags and digests, to the ID of the image they name.
    names: HashMap<String, String>,
    generation: u64,
    /// Time of the first detection (crilet's start, as far as GC knows).
    started_at: Option<i64>,
}

impl ImageRecords {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records as given (tests, benchmarks); `started_at` is the first detection.
    pub fn from_parts(started_at: i64, records: impl IntoIterator<Item = ImageRecord>) -> Self {
        let records: BTreeMap<String, (u64, ImageRecord)> = records
            .into_iter()
            .map(|r| (r.id.clone(), (0, r)))
            .collect();
        let names = records
            .values()
            .flat_map(|(_, r)| {
                r.repo_tags
                    .iter()
                    .chain(&r.repo_digests)
                    .map(|n| (n.clone(), r.id.clone()))
            })
            .collect();
        ImageRecords {
            records,
            names,
            generation: 0,
            started_at: Some(started_at),
        }
    }

    /// When the first detection ran.
    pub fn started_at(&self) -> Option<i64> {
        self.started_at
    }

    pub fn iter(&self) -> impl Iterator<Item = &ImageRecord> {
        self.records.values().map(|(_, r)| r)
    }

    pub fn get(&self, id: &str) -> Option<&ImageRecord> {
        self.records.get(id).map(|(_, r)| r)
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Forgets a removed image (the next detection would too).
    pub fn forget(&mut self, id: &str) {
        if let Some((_, r)) = self.records.remove(id) {
            unindex(&mut self.names, &r);
        }
    }

    /// Updates the records from one listing of the runtime. `sandbox` and
    /// `pinned` are image references (tags, digests or IDs) to protect.
    pub fn detect(
        &mut self,
        images: &[Image],
        containers: &[Container],
        sandbox: Option<&str>,
        pinned: &[String],
        now: i64,
    ) {
        let first_detection = self.started_at.is_none();
        self.started_at.get_or_insert(now);
        self.generation += 1;
        let generation = self.generation;
        for image in images {
            let (g, rec) = match self.records.get_mut(&image.id) {
                Some(r) => r,
                None => self.records.entry(image.id.clone()).or_insert_with(|| {
                    let rec = ImageRecord {
                        id: image.id.clone(),
                        repo_tags: Vec::new(),
                        repo_digests: Vec::new(),
                        size: 0,
                        first_detected: (!first_detection).then_some(now),
                        last_used: None,
                        in_use: false,
                        pinned: None,
                    };
                    (0, rec)
                }),
            };
            *g = generation;
            if rec.repo_tags != image.repo_tags || rec.repo_digests != image.repo_digests {
                unindex(&mut self.names, rec);
                rec.repo_tags.clone_from(&image.repo_tags);
                rec.repo_digests.clone_from(&image.repo_digests);
                for n in rec.repo_tags.iter().chain(&rec.repo_digests) {
                    self.names.insert(n.clone(), rec.id.clone());
                }
            }
            rec.size = image.size;
            rec.in_use = false;
            rec.pinned = image.pinned.then_some(Protection::Runtime);
        }
        // Gone from the runtime: gone from the records.
        let names = &mut self.names;
        self.records.retain(|_, (g, r)| {
            let keep = *g == generation;
            if !keep {
                unindex(names, r);
            }
            keep
        });
        let used: Vec<String> = containers
            .iter()
            .filter_map(|c| {
                self.resolve(&c.image_ref)
                    .or_else(|| self.resolve(&c.image))
                    .map(str::to_string)
            })
            .collect();
        for id in used {
            if let Some((_, r)) = self.records.get_mut(&id) {
                r.in_use = true;
                r.last_used = Some(now);
            }
        }
        let protected: Vec<(String, Protection)> = pinned
            .iter()
            .map(|r| (r.as_str(), Protection::Configured))
            .chain(sandbox.map(|s| (s, Protection::Sandbox)))
            .filter_map(|(r, p)| Some((self.resolve(r)?.to_string(), p)))
            .collect();
        for (id, p) in protected {
            if let Some((_, r)) = self.records.get_mut(&id) {
                if r.pinned != Some(Protection::Runtime) {
                    r.pinned = Some(p);
                }
            }
        }
    }

    /// The ID of the image `reference` names: an ID, a bare hex ID, a tag,
    /// a digest, or a short name (`busybox`).
    pub fn resolve(&self, reference: &str) -> Option<&str> {
        if reference.is_empty() {
            return None;
        }
        if let Some((k, _)) = self.records.get_key_value(reference) {
            return Some(k);
        }
        if let Some(id) = self.names.get(reference) {
            return Some(id);
        }
        let with_algo = format!("sha256:{reference}");
        if let Some((k, _)) = self.records.get_key_value(&with_algo) {
            return Some(k);
        }
        self.names
            .get(&normalize_reference(reference))
            .map(String::as_str)
    }
}

fn unindex(names: &mut HashMap<String, String>, r: &ImageRecord) {
    for n in r.repo_tags.iter().chain(&r.repo_digests) {
        if names.get(n) == Some(&r.id) {
            names.remove(n);
        }
    }
}

/// Docker's reference normalization: `busybox` is
/// `docker.io/library/busybox:latest`, `me/app:1` is `docker.io/me/app:1`.
pub fn normalize_reference(reference: &str) -> String {
    let (name, suffix) = match reference.find('@') {
        Some(at) => (&reference[..at], &reference[at..]),
        None => match reference.rfind(':') {
            Some(c) if !reference[c..].contains('/') => (&reference[..c], &reference[c..]),
            _ => (reference, ":latest"),
        },
    };
    let first = name.split('/').next().unwrap_or_default();
    let has_domain =
        name.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    let name = if has_domain {
        name.to_string()
    } else if name.contains('/') {
        format!("docker.io/{name}")
    } else {
        format!("docker.io/library/{name}")
    };
    format!("{name}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{ContainerMetadata, ContainerState};

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
}
