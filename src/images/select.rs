//! Which images a collection removes, and why the others stay.
//!
//! Invariant: pure (records, disk figures, policy and `now` in; a plan out).
//! A plan never lists an image that is in use, protected, or first detected
//! less than MinAge ago; space candidates are in least-recently-used order
//! (ties: first detected, then ID).

use std::time::Duration;

use serde::Serialize;

use super::policy::GcPolicy;
use super::records::{ImageRecord, ImageRecords};

/// Capacity and free bytes of the image filesystem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DiskUsage {
    pub capacity_bytes: u64,
    pub available_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    #[error("the image filesystem reports a capacity of 0 bytes")]
    NoCapacity,
}

impl DiskUsage {
    /// `100 − available×100/capacity`, as the kubelet computes it.
    pub fn usage_percent(&self) -> Result<u8, SelectError> {
        if self.capacity_bytes == 0 {
            return Err(SelectError::NoCapacity);
        }
        let avail = self.available_bytes.min(self.capacity_bytes) as u128;
        Ok((100 - avail * 100 / self.capacity_bytes as u128) as u8)
    }

    /// Bytes to free to bring usage down to `low` percent.
    pub fn bytes_to_free(&self, low: u8) -> u64 {
        let target = self.capacity_bytes as u128 * (100 - low.min(100)) as u128 / 100;
        (target as u64).saturating_sub(self.available_bytes)
    }
}

/// Why a collection removes an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum GcReason {
    /// Usage reached the high threshold.
    Space,
    /// Unused for longer than MaxAge.
    Age,
}

impl GcReason {
    pub fn as_str(self) -> &'static str {
        match self {
            GcReason::Space => "space",
            GcReason::Age => "age",
        }
    }
}

/// Why an image stays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum KeepReason {
    InUse,
    Pinned,
    TooYoung,
}

impl KeepReason {
    pub fn as_str(self) -> &'static str {
        match self {
            KeepReason::InUse => "in use",
            KeepReason::Pinned => "pinned",
            KeepReason::TooYoung => "too young",
        }
    }
}

/// An image and what happens to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Selected {
    pub id: String,
    pub name: String,
    pub size: u64,
    pub last_used: Option<i64>,
    pub first_detected: Option<i64>,
}

impl Selected {
    fn of(r: &ImageRecord) -> Self {
        Selected {
            id: r.id.clone(),
            name: r.name().to_string(),
            size: r.size,
            last_used: r.last_used,
            first_detected: r.first_detected,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Kept {
    #[serde(flatten)]
    pub image: Selected,
    pub why: KeepReason,
}

/// What a collection would do now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GcPlan {
    pub disk: DiskUsage,
    pub usage_percent: u8,
    /// Bytes space GC wants freed (0 below the high threshold).
    pub wanted_bytes: u64,
    /// Removed whatever the usage (MaxAge).
    pub age: Vec<Selected>,
    /// Every space candidate, LRU first; a collection stops once enough is freed.
    pub space: Vec<Selected>,
    /// Images that are not candidates, with the reason.
    pub kept: Vec<Kept>,
}

fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// Why `r` cannot be removed at `now`, if it cannot.
pub fn keep_reason(r: &ImageRecord, policy: &GcPolicy, now: i64) -> Option<KeepReason> {
    if r.in_use {
        Some(KeepReason::InUse)
    } else if r.pinned.is_some() {
        Some(KeepReason::Pinned)
    } else if r
        .first_detected
        .is_some_and(|t| now.saturating_sub(t) < nanos(policy.min_age))
    {
        Some(KeepReason::TooYoung)
    } else {
        None
    }
}

/// Plans a collection at `now` on a disk with `disk` figures.
pub fn plan(
    records: &ImageRecords,
    disk: DiskUsage,
    policy: &GcPolicy,
    now: i64,
) -> Result<GcPlan, SelectError> {
    let usage = disk.usage_percent()?;
    let mut kept = Vec::new();
    let mut candidates: Vec<&ImageRecord> = Vec::new();
    for r in records.iter() {
        match keep_reason(r, policy, now) {
            Some(why) => kept.push(Kept {
                image: Selected::of(r),
                why,
            }),
            None => candidates.push(r),
        }
    }
    candidates.sort_unstable_by(|a, b| {
        (a.last_used, a.first_detected, &a.id).cmp(&(b.last_used, b.first_detected, &b.id))
    });
    let started = records.started_at().unwrap_or(now);
    let (age, rest): (Vec<&ImageRecord>, Vec<&ImageRecord>) =
        candidates.into_iter().partition(|r| {
            policy.max_age.is_some_and(|max| {
                let since = r.last_used.or(r.first_detected).unwrap_or(started);
                now.saturating_sub(since) > nanos(max)
            })
        });
    let wanted = if policy.space_gc_enabled() && usage >= policy.high_threshold_percent {
        disk.bytes_to_free(policy.low_threshold_percent)
    } else {
        0
    };
    Ok(GcPlan {
        disk,
        usage_percent: usage,
        wanted_bytes: wanted,
        age: age.into_iter().map(Selected::of).collect(),
        space: if wanted > 0 {
            rest.into_iter().map(Selected::of).collect()
        } else {
            Vec::new()
        },
        kept,
    })
}

impl GcPlan {
    /// What a collection removes if every removal succeeds and frees its
    /// reported size: the age pass, then space candidates until enough.
    pub fn would_remove(&self) -> Vec<(GcReason, &Selected)> {
        let mut out: Vec<(GcReason, &Selected)> =
            self.age.iter().map(|s| (GcReason::Age, s)).collect();
        let mut freed: u64 = self.age.iter().map(|s| s.size).sum();
        for s in &self.space {
            if freed >= self.wanted_bytes {
                break;
            }
            freed = freed.saturating_add(s.size);
            out.push((GcReason::Space, s));
        }
        out
    }

    /// Bytes kept for each reason, for the "not enough freed" warning.
    pub fn kept_bytes(&self, why: KeepReason) -> (usize, u64) {
        self.kept
            .iter()
            .filter(|k| k.why == why)
            .fold((0, 0), |(n, b), k| (n + 1, b + k.image.size))
    }
}

#[cfg(test)]
#[path = "select_tests.rs"]
mod tests;
