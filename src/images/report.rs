//! What a collection did, and the counters the metrics server exports.
//!
//! Invariant: plain data; counters only ever increase.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

use super::select::{DiskUsage, GcReason, KeepReason, Kept, Selected};

/// An image a collection removed (or, in a dry run, would remove).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Removed {
    #[serde(flatten)]
    pub image: Selected,
    pub reason: GcReason,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Failed {
    #[serde(flatten)]
    pub image: Selected,
    pub reason: GcReason,
    pub error: String,
}

/// The outcome of one collection, or of a dry run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GcReport {
    pub dry_run: bool,
    pub at: i64,
    pub mountpoint: String,
    pub disk: DiskUsage,
    pub usage_percent: u8,
    pub high_threshold_percent: u8,
    pub low_threshold_percent: u8,
    /// Bytes space GC wanted freed (0 below the high threshold).
    pub wanted_bytes: u64,
    /// Reported sizes of the removed images (space and age).
    pub freed_bytes: u64,
    /// Freed by the space pass; compared with `wanted_bytes`.
    pub space_freed_bytes: u64,
    pub removed: Vec<Removed>,
    pub failed: Vec<Failed>,
    pub kept: Vec<Kept>,
}

impl GcReport {
    /// Space GC ran and could not reach the low threshold.
    pub fn short(&self) -> bool {
        self.space_freed_bytes < self.wanted_bytes
    }

    /// "2 in use (1.2 MiB), 1 pinned (700 KiB)": why the rest was kept.
    pub fn kept_summary(&self) -> String {
        let mut parts = Vec::new();
        for why in [KeepReason::InUse, KeepReason::Pinned, KeepReason::TooYoung] {
            let (n, bytes) = self
                .kept
                .iter()
                .filter(|k| k.why == why)
                .fold((0, 0u64), |(n, b), k| (n + 1, b + k.image.size));
            if n > 0 {
                parts.push(format!("{n} {} ({bytes} bytes)", why.as_str()));
            }
        }
        if parts.is_empty() {
            "no other images".into()
        } else {
            parts.join(", ")
        }
    }
}

/// Plain counters, exported by the metrics server.
#[derive(Debug, Default)]
pub struct GcCounters {
    /// Collections run (dry runs excluded).
    pub collections: AtomicU64,
    /// Collections that failed before removing anything (runtime, disk).
    pub collection_errors: AtomicU64,
    /// Collections that could not reach the low threshold.
    pub space_shortfalls: AtomicU64,
    pub images_removed_space: AtomicU64,
    pub images_removed_age: AtomicU64,
    pub bytes_freed_space: AtomicU64,
    pub bytes_freed_age: AtomicU64,
    pub removal_failures: AtomicU64,
}

impl GcCounters {
    /// Images removed for `reason` (`kubelet_image_garbage_collected_total{reason}`).
    pub fn images_removed(&self, reason: GcReason) -> u64 {
        match reason {
            GcReason::Space => self.images_removed_space.load(Ordering::Relaxed),
            GcReason::Age => self.images_removed_age.load(Ordering::Relaxed),
        }
    }

    /// Bytes (reported image sizes) freed for `reason`.
    pub fn bytes_freed(&self, reason: GcReason) -> u64 {
        match reason {
            GcReason::Space => self.bytes_freed_space.load(Ordering::Relaxed),
            GcReason::Age => self.bytes_freed_age.load(Ordering::Relaxed),
        }
    }

    pub(super) fn removed(&self, reason: GcReason, bytes: u64) {
        let (n, b) = match reason {
            GcReason::Space => (&self.images_removed_space, &self.bytes_freed_space),
            GcReason::Age => (&self.images_removed_age, &self.bytes_freed_age),
        };
        n.fetch_add(1, Ordering::Relaxed);
        b.fetch_add(bytes, Ordering::Relaxed);
    }
}
