//! The image garbage collector: every period it detects images and their
//! use, reads the image filesystem's usage and removes what the pure
//! selection (`select::plan`) picks.
//!
//! Invariants: one collection (or dry run) at a time; the records lock is
//! never held across an `.await`; a failed removal is logged and skipped;
//! a dry run never calls RemoveImage. Time comes from the injected clock.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use super::disk::DiskStats;
use super::policy::GcPolicy;
use super::records::{ImageRecord, ImageRecords};
pub use super::report::{Failed, GcCounters, GcReport, Removed};
use super::select::{self, DiskUsage, GcReason, SelectError, Selected};
use crate::cri::{ContainerFilter, Runtime, RuntimeError};

/// What `images()` shows of one image.
pub type ImageView = ImageRecord;

/// Nanoseconds since the Unix epoch, from wherever the caller says.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The system clock.
pub fn system_clock() -> Clock {
    Arc::new(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64)
            .unwrap_or(0)
    })
}

#[derive(Debug, thiserror::Error)]
pub enum GcError {
    #[error("image GC: {0}")]
    Runtime(#[from] RuntimeError),
    #[error("image GC: the runtime reports no image filesystem")]
    NoImageFs,
    #[error("image GC: reading the image filesystem {path}: {source}")]
    Disk {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("image GC: image filesystem {path}: {source}")]
    Select {
        path: String,
        #[source]
        source: SelectError,
    },
}

struct Inner {
    runtime: Arc<dyn Runtime>,
    disk: Arc<dyn DiskStats>,
    policy: GcPolicy,
    clock: Clock,
    records: Mutex<ImageRecords>,
    /// The runtime's sandbox image, once it told us.
    sandbox_image: Mutex<Option<String>>,
    /// Serializes collections and dry runs.
    collecting: tokio::sync::Mutex<()>,
    counters: Arc<GcCounters>,
}

/// The collector, and the cheap cloneable handle the servers use.
#[derive(Clone)]
pub struct ImageGcHandle {
    inner: Arc<Inner>,
}

impl ImageGcHandle {
    pub fn new(
        runtime: Arc<dyn Runtime>,
        disk: Arc<dyn DiskStats>,
        policy: GcPolicy,
        clock: Clock,
    ) -> Self {
        ImageGcHandle {
            inner: Arc::new(Inner {
                runtime,
                disk,
                policy,
                clock,
                records: Mutex::new(ImageRecords::new()),
                sandbox_image: Mutex::new(None),
                collecting: tokio::sync::Mutex::new(()),
                counters: Arc::default(),
            }),
        }
    }

    pub fn policy(&self) -> &GcPolicy {
        &self.inner.policy
    }

    pub fn counters(&self) -> Arc<GcCounters> {
        self.inner.counters.clone()
    }

    /// Every image with its record, after a fresh detection.
    pub async fn images(&self) -> Result<Vec<ImageView>, GcError> {
        self.detect().await?;
        Ok(self.inner.records.lock().unwrap().iter().cloned().collect())
    }

    /// What a collection would remove now and why; removes nothing.
    pub async fn dry_run(&self) -> Result<GcReport, GcError> {
        let _one = self.inner.collecting.lock().await;
        let (plan, mountpoint, now) = self.plan().await?;
        let removed = plan
            .would_remove()
            .into_iter()
            .map(|(reason, s)| Removed {
                image: s.clone(),
                reason,
            })
            .collect::<Vec<_>>();
        let freed = removed.iter().map(|r| r.image.size).sum();
        let space_freed = removed
            .iter()
            .filter(|r| r.reason == GcReason::Space)
            .map(|r| r.image.size)
            .sum();
        Ok(self.report(
            true,
            now,
            mountpoint,
            &plan,
            removed,
            vec![],
            freed,
            space_freed,
        ))
    }

    /// Detects images and their use now.
    pub async fn detect(&self) -> Result<(), GcError> {
        let rt = &self.inner.runtime;
        let sandbox = self.sandbox_image().await;
        let images = rt.list_images().await?;
        let containers = rt.list_containers(&ContainerFilter::default()).await?;
        let now = (self.inner.clock)();
        self.inner.records.lock().unwrap().detect(
            &images,
            &containers,
            Some(&sandbox),
            &self.inner.policy.pinned_images,
            now,
        );
        Ok(())
    }

    /// The sandbox image to protect: the runtime's, else the configured one.
    async fn sandbox_image(&self) -> String {
        if let Some(s) = self.inner.sandbox_image.lock().unwrap().clone() {
            return s;
        }
        match self.inner.runtime.sandbox_image().await {
            Ok(Some(s)) => {
                tracing::info!(image = %s, "image GC protects the runtime's sandbox image");
                *self.inner.sandbox_image.lock().unwrap() = Some(s.clone());
                s
            }
            Ok(None) | Err(_) => self.inner.policy.pod_infra_container_image.clone(),
        }
    }

    async fn disk_usage(&self) -> Result<(DiskUsage, String), GcError> {
        let fs = self.inner.runtime.image_fs_info().await?;
        let mountpoint = fs
            .image_filesystems
            .first()
            .map(|f| f.mountpoint.clone())
            .filter(|m| !m.is_empty())
            .ok_or(GcError::NoImageFs)?;
        let s = self
            .inner
            .disk
            .stat(Path::new(&mountpoint))
            .map_err(|source| GcError::Disk {
                path: mountpoint.clone(),
                source,
            })?;
        Ok((
            DiskUsage {
                capacity_bytes: s.capacity_bytes,
                available_bytes: s.available_bytes,
            },
            mountpoint,
        ))
    }

    async fn plan(&self) -> Result<(select::GcPlan, String, i64), GcError> {
        self.detect().await?;
        let (disk, mountpoint) = self.disk_usage().await?;
        let now = (self.inner.clock)();
        let records = self.inner.records.lock().unwrap();
        let plan = select::plan(&records, disk, &self.inner.policy, now).map_err(|source| {
            GcError::Select {
                path: mountpoint.clone(),
                source,
            }
        })?;
        Ok((plan, mountpoint, now))
    }

    /// One collection: the MaxAge pass, then (on a fresh reading of the
    /// disk) the space pass until the low threshold is reached.
    pub async fn collect(&self) -> Result<GcReport, GcError> {
        let _one = self.inner.collecting.lock().await;
        let counters = &self.inner.counters;
        counters.collections.fetch_add(1, Ordering::Relaxed);
        let result = self.collect_locked().await;
        match &result {
            Ok(r) => log_report(r),
            Err(e) => {
                counters.collection_errors.fetch_add(1, Ordering::Relaxed);
                tracing::error!(error = %e, event = "ImageGCFailed", "image garbage collection failed");
            }
        }
        result
    }

    async fn collect_locked(&self) -> Result<GcReport, GcError> {
        let (mut plan, mut mountpoint, mut now) = self.plan().await?;
        let (mut removed, mut failed) = (Vec::new(), Vec::new());
        for s in &plan.age {
            self.remove(s, GcReason::Age, &mut removed, &mut failed)
                .await;
        }
        if !removed.is_empty() && plan.wanted_bytes > 0 {
            // The age pass freed space: read the disk again before the space pass.
            (plan, mountpoint, now) = self.plan().await?;
        }
        let mut space_freed = 0u64;
        for s in &plan.space {
            if space_freed >= plan.wanted_bytes {
                break;
            }
            if self
                .remove(s, GcReason::Space, &mut removed, &mut failed)
                .await
            {
                space_freed += s.size;
            }
        }
        let freed = removed.iter().map(|r: &Removed| r.image.size).sum();
        let report = self.report(
            false,
            now,
            mountpoint,
            &plan,
            removed,
            failed,
            freed,
            space_freed,
        );
        if report.short() {
            self.inner
                .counters
                .space_shortfalls
                .fetch_add(1, Ordering::Relaxed);
        }
        Ok(report)
    }

    async fn remove(
        &self,
        s: &Selected,
        reason: GcReason,
        removed: &mut Vec<Removed>,
        failed: &mut Vec<Failed>,
    ) -> bool {
        match self.inner.runtime.remove_image(&s.id).await {
            Ok(()) => {
                tracing::info!(image = %s.name, id = %s.id, size = s.size, reason = reason.as_str(), "image garbage collected");
                self.inner.records.lock().unwrap().forget(&s.id);
                self.inner.counters.removed(reason, s.size);
                removed.push(Removed {
                    image: s.clone(),
                    reason,
                });
                true
            }
            Err(e) => {
                tracing::warn!(image = %s.name, id = %s.id, error = %e, "could not remove image; skipping it");
                self.inner
                    .counters
                    .removal_failures
                    .fetch_add(1, Ordering::Relaxed);
                failed.push(Failed {
                    image: s.clone(),
                    reason,
                    error: e.to_string(),
                });
                false
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn report(
        &self,
        dry_run: bool,
        at: i64,
        mountpoint: String,
        plan: &select::GcPlan,
        removed: Vec<Removed>,
        failed: Vec<Failed>,
        freed_bytes: u64,
        space_freed_bytes: u64,
    ) -> GcReport {
        GcReport {
            dry_run,
            at,
            mountpoint,
            disk: plan.disk,
            usage_percent: plan.usage_percent,
            high_threshold_percent: self.inner.policy.high_threshold_percent,
            low_threshold_percent: self.inner.policy.low_threshold_percent,
            wanted_bytes: plan.wanted_bytes,
            freed_bytes,
            space_freed_bytes,
            removed,
            failed,
            kept: plan.kept.clone(),
        }
    }

    /// Detects at once (images there now count as present at start), then
    /// collects every period until `cancel`.
    pub async fn run(self, cancel: CancellationToken) {
        if let Err(e) = self.detect().await {
            tracing::warn!(error = %e, "first image detection failed; retrying at the next period");
        }
        let period = self.inner.policy.period;
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tick.tick() => { let _ = self.collect().await; }
            }
        }
    }
}

fn log_report(r: &GcReport) {
    tracing::info!(
        mountpoint = %r.mountpoint,
        usage_percent = r.usage_percent,
        high = r.high_threshold_percent,
        low = r.low_threshold_percent,
        wanted_bytes = r.wanted_bytes,
        freed_bytes = r.freed_bytes,
        removed = r.removed.len(),
        failed = r.failed.len(),
        "image garbage collection"
    );
    if r.short() {
        tracing::warn!(
            event = "FreeDiskSpaceFailed",
            wanted_bytes = r.wanted_bytes,
            freed_bytes = r.space_freed_bytes,
            kept = %r.kept_summary(),
            "image GC could not reach the low threshold ({}%): wanted to free {} bytes, freed {}; kept {}",
            r.low_threshold_percent,
            r.wanted_bytes,
            r.space_freed_bytes,
            r.kept_summary(),
        );
    }
}

#[cfg(test)]
#[path = "gc_tests.rs"]
mod tests;
