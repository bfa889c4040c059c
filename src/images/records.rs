//! What image GC remembers of each image: when it was first detected, when
//! a container last used it, its size and whether it is protected.
//!
//! Invariant: pure. `detect` is given the runtime's images and all of its
//! containers (running and exited) and `now`; it never reads a clock. After
//! a detection there is exactly one record per image the runtime listed, and
//! `last_used == Some(now)` for every image a container refers to.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::cri::{Container, Image};

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

impl Protection {
    pub const ALL: [Protection; 3] = [
        Protection::Runtime,
        Protection::Sandbox,
        Protection::Configured,
    ];

    /// The name the API uses: "runtime", "sandbox" or "configured".
    pub fn as_str(self) -> &'static str {
        match self {
            Protection::Runtime => "runtime",
            Protection::Sandbox => "sandbox",
            Protection::Configured => "configured",
        }
    }
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
        // containerd's IDs carry "sha256:", CRI-O's do not: either names either.
        let with_algo = format!("sha256:{reference}");
        if let Some((k, _)) = self.records.get_key_value(&with_algo) {
            return Some(k);
        }
        if let Some((k, _)) = reference
            .strip_prefix("sha256:")
            .and_then(|bare| self.records.get_key_value(bare))
        {
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
#[path = "records_tests.rs"]
mod tests;
