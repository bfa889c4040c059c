//! The `crilet.stats.v1.Images` service: the image GC's records and its
//! dry run, for `crilet images` and `crilet gc --dry-run`. Read-only.

use tonic::{Request, Response, Status};

use crate::api::stats::v1 as pb;
use crate::images::gc::{GcReport, ImageGcHandle, ImageView};
use crate::images::records::Protection;
use crate::images::select::Selected;
use pb::images_server::Images;

#[derive(Clone)]
pub struct ImagesApi {
    pub gc: ImageGcHandle,
}

pub fn image_info(v: &ImageView) -> pb::ImageInfo {
    pb::ImageInfo {
        id: v.id.clone(),
        repo_tags: v.repo_tags.clone(),
        repo_digests: v.repo_digests.clone(),
        size_bytes: v.size,
        first_detected_unix_nano: v.first_detected.unwrap_or(0),
        last_used_unix_nano: v.last_used.unwrap_or(0),
        in_use: v.in_use,
        pinned: v.pinned.map_or("", Protection::as_str).into(),
    }
}

/// The domain record back from the API's form (for the CLI's table).
pub fn image_view(i: &pb::ImageInfo) -> ImageView {
    ImageView {
        id: i.id.clone(),
        repo_tags: i.repo_tags.clone(),
        repo_digests: i.repo_digests.clone(),
        size: i.size_bytes,
        first_detected: (i.first_detected_unix_nano != 0).then_some(i.first_detected_unix_nano),
        last_used: (i.last_used_unix_nano != 0).then_some(i.last_used_unix_nano),
        in_use: i.in_use,
        pinned: Protection::ALL.into_iter().find(|p| p.as_str() == i.pinned),
    }
}

fn planned(s: &Selected, reason: &str) -> pb::PlannedImage {
    pb::PlannedImage {
        id: s.id.clone(),
        name: s.name.clone(),
        size_bytes: s.size,
        last_used_unix_nano: s.last_used.unwrap_or(0),
        reason: reason.into(),
    }
}

pub fn plan(r: &GcReport) -> pb::ImageGcPlan {
    pb::ImageGcPlan {
        mountpoint: r.mountpoint.clone(),
        capacity_bytes: r.disk.capacity_bytes,
        available_bytes: r.disk.available_bytes,
        usage_percent: r.usage_percent.into(),
        high_threshold_percent: r.high_threshold_percent.into(),
        low_threshold_percent: r.low_threshold_percent.into(),
        wanted_bytes: r.wanted_bytes,
        freed_bytes: r.freed_bytes,
        remove: r
            .removed
            .iter()
            .map(|x| planned(&x.image, x.reason.as_str()))
            .collect(),
        kept: r
            .kept
            .iter()
            .map(|k| planned(&k.image, k.why.as_str()))
            .collect(),
        report: crate::images::render::render_gc_report(r),
    }
}

fn unavailable(e: impl std::fmt::Display) -> Status {
    Status::unavailable(format!("image GC: {e}"))
}

#[tonic::async_trait]
impl Images for ImagesApi {
    async fn list_images(
        &self,
        _req: Request<pb::ListImagesRequest>,
    ) -> Result<Response<pb::ListImagesResponse>, Status> {
        let images = self.gc.images().await.map_err(unavailable)?;
        Ok(Response::new(pb::ListImagesResponse {
            images: images.iter().map(image_info).collect(),
        }))
    }

    async fn plan_image_gc(
        &self,
        _req: Request<pb::PlanImageGcRequest>,
    ) -> Result<Response<pb::ImageGcPlan>, Status> {
        let report = self.gc.dry_run().await.map_err(unavailable)?;
        Ok(Response::new(plan(&report)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_records_survive_the_api_round_trip() {
        for pinned in [
            None,
            Some(Protection::Runtime),
            Some(Protection::Sandbox),
            Some(Protection::Configured),
        ] {
            for (first, last) in [(None, None), (Some(5), Some(9))] {
                let v = ImageView {
                    id: "sha256:1".into(),
                    repo_tags: vec!["busybox:latest".into()],
                    repo_digests: vec![],
                    size: 42,
                    first_detected: first,
                    last_used: last,
                    in_use: true,
                    pinned,
                };
                assert_eq!(image_view(&image_info(&v)), v);
            }
        }
    }
}
