//! The image garbage-collection policy: thresholds, ages and period, from
//! kubelet-style flags over KubeletConfiguration-style file fields.
//!
//! Invariant: a `GcPolicy` that left `resolve` is valid (`validate` passed):
//! 0 ≤ low < high ≤ 100, a non-zero period, and MaxAge (when set) above
//! MinAge. Every refusal names the flag and the config-file field.

use std::time::Duration;

use serde::Deserialize;

use crate::units::parse_duration;

pub const DEFAULT_HIGH_THRESHOLD_PERCENT: i32 = 90;
pub const DEFAULT_LOW_THRESHOLD_PERCENT: i32 = 80;
pub const DEFAULT_MIN_AGE: Duration = Duration::from_secs(120);
pub const DEFAULT_PERIOD: Duration = Duration::from_secs(300);
/// The sandbox image containerd 1.6 is configured with here; protected from
/// GC when the runtime does not tell us its own.
pub const DEFAULT_POD_INFRA_CONTAINER_IMAGE: &str = "registry.k8s.io/pause:3.6";

/// When and how much image GC removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcPolicy {
    /// Usage (percent of the image filesystem) at which space GC starts;
    /// 100 disables space-based GC.
    pub high_threshold_percent: u8,
    /// Usage space GC brings the filesystem down to.
    pub low_threshold_percent: u8,
    /// Images first detected less than this long ago are never removed.
    pub min_age: Duration,
    /// Unused images not used for this long are removed whatever the usage.
    pub max_age: Option<Duration>,
    /// How often images are detected and collected.
    pub period: Duration,
    /// Image references never removed, besides what the runtime pins.
    pub pinned_images: Vec<String>,
    /// The sandbox image to protect when the runtime does not name its own.
    pub pod_infra_container_image: String,
}

impl Default for GcPolicy {
    fn default() -> Self {
        GcPolicy {
            high_threshold_percent: DEFAULT_HIGH_THRESHOLD_PERCENT as u8,
            low_threshold_percent: DEFAULT_LOW_THRESHOLD_PERCENT as u8,
            min_age: DEFAULT_MIN_AGE,
            max_age: None,
            period: DEFAULT_PERIOD,
            pinned_images: Vec::new(),
            pod_infra_container_image: DEFAULT_POD_INFRA_CONTAINER_IMAGE.to_string(),
        }
    }
}

impl GcPolicy {
    /// Whether space-based GC can ever run.
    pub fn space_gc_enabled(&self) -> bool {
        self.high_threshold_percent < 100
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("{flag} ({field}): {message}")]
    Invalid {
        flag: &'static str,
        field: &'static str,
        message: String,
    },
}

fn invalid(flag: &'static str, field: &'static str, message: String) -> PolicyError {
    PolicyError::Invalid {
        flag,
        field,
        message,
    }
}

const HIGH: (&str, &str) = ("--image-gc-high-threshold", "imageGCHighThresholdPercent");
const LOW: (&str, &str) = ("--image-gc-low-threshold", "imageGCLowThresholdPercent");
const MIN_AGE: (&str, &str) = ("--image-minimum-gc-age", "imageMinimumGCAge");
const MAX_AGE: (&str, &str) = ("--image-maximum-gc-age", "imageMaximumGCAge");
const PERIOD: (&str, &str) = ("--image-gc-period", "imageGCPeriod");

/// The image-GC flags of `crilet run` (flattened into its arguments).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ImageGcArgs {
    /// Image filesystem usage (percent) at which image GC starts; 100 disables it.
    #[arg(long, allow_negative_numbers = true)]
    pub image_gc_high_threshold: Option<i32>,
    /// Usage (percent) image GC frees down to; below the high threshold.
    #[arg(long, allow_negative_numbers = true)]
    pub image_gc_low_threshold: Option<i32>,
    /// Images detected less than this long ago are never removed (Go duration).
    #[arg(long)]
    pub image_minimum_gc_age: Option<String>,
    /// Remove unused images not used for this long, whatever the usage; 0 = off.
    #[arg(long)]
    pub image_maximum_gc_age: Option<String>,
    /// How often images are detected and collected (Go duration).
    #[arg(long)]
    pub image_gc_period: Option<String>,
    /// An image never removed by GC (repeatable).
    #[arg(long = "pinned-image")]
    pub pinned_images: Vec<String>,
    /// The sandbox (pause) image, protected from GC when the runtime does
    /// not report its own.
    #[arg(long)]
    pub pod_infra_container_image: Option<String>,
}

/// The image-GC fields of the config file (flattened into it). The first
/// four are KubeletConfiguration's; period and pinned images are crilet's.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageGcFile {
    #[serde(rename = "imageGCHighThresholdPercent")]
    pub image_gc_high_threshold_percent: Option<i32>,
    #[serde(rename = "imageGCLowThresholdPercent")]
    pub image_gc_low_threshold_percent: Option<i32>,
    #[serde(rename = "imageMinimumGCAge")]
    pub image_minimum_gc_age: Option<String>,
    #[serde(rename = "imageMaximumGCAge")]
    pub image_maximum_gc_age: Option<String>,
    #[serde(rename = "imageGCPeriod")]
    pub image_gc_period: Option<String>,
    pub pinned_images: Option<Vec<String>>,
}

/// Flags over file over defaults, then validation (pure).
pub fn resolve(args: &ImageGcArgs, file: &ImageGcFile) -> Result<GcPolicy, PolicyError> {
    let percent = |(flag, field): (&'static str, &'static str), v: Option<i32>, default: i32| {
        let v = v.unwrap_or(default);
        u8::try_from(v)
            .ok()
            .filter(|p| *p <= 100)
            .ok_or_else(|| invalid(flag, field, format!("must be between 0 and 100, got {v}")))
    };
    let dur = |(flag, field): (&'static str, &'static str), v: Option<&String>| {
        v.map(|s| parse_duration(s).map_err(|e| invalid(flag, field, e)))
            .transpose()
    };
    let max_age = dur(
        MAX_AGE,
        args.image_maximum_gc_age
            .as_ref()
            .or(file.image_maximum_gc_age.as_ref()),
    )?;
    let mut pinned = file.pinned_images.clone().unwrap_or_default();
    pinned.extend(args.pinned_images.iter().cloned());
    let policy = GcPolicy {
        high_threshold_percent: percent(
            HIGH,
            args.image_gc_high_threshold
                .or(file.image_gc_high_threshold_percent),
            DEFAULT_HIGH_THRESHOLD_PERCENT,
        )?,
        low_threshold_percent: percent(
            LOW,
            args.image_gc_low_threshold
                .or(file.image_gc_low_threshold_percent),
            DEFAULT_LOW_THRESHOLD_PERCENT,
        )?,
        min_age: dur(
            MIN_AGE,
            args.image_minimum_gc_age
                .as_ref()
                .or(file.image_minimum_gc_age.as_ref()),
        )?
        .unwrap_or(DEFAULT_MIN_AGE),
        max_age: max_age.filter(|d| !d.is_zero()),
        period: dur(
            PERIOD,
            args.image_gc_period
                .as_ref()
                .or(file.image_gc_period.as_ref()),
        )?
        .unwrap_or(DEFAULT_PERIOD),
        pinned_images: pinned,
        pod_infra_container_image: args
            .pod_infra_container_image
            .clone()
            .unwrap_or_else(|| DEFAULT_POD_INFRA_CONTAINER_IMAGE.to_string()),
    };
    policy.validate()?;
    Ok(policy)
}

impl GcPolicy {
    /// Checks the relations between the fields (ranges are checked on parse).
    pub fn validate(&self) -> Result<(), PolicyError> {
        if self.high_threshold_percent > 100 {
            return Err(invalid(
                HIGH.0,
                HIGH.1,
                format!(
                    "must be between 0 and 100, got {}",
                    self.high_threshold_percent
                ),
            ));
        }
        if self.low_threshold_percent >= self.high_threshold_percent {
            return Err(invalid(
                LOW.0,
                LOW.1,
                format!(
                    "must be below the high threshold ({}), got {}",
                    self.high_threshold_percent, self.low_threshold_percent
                ),
            ));
        }
        if self.period.is_zero() {
            return Err(invalid(PERIOD.0, PERIOD.1, "must be above zero".into()));
        }
        if let Some(max) = self.max_age {
            if max <= self.min_age {
                return Err(invalid(
                    MAX_AGE.0,
                    MAX_AGE.1,
                    format!(
                        "must be above the minimum age ({:?}), got {max:?}",
                        self.min_age
                    ),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn args(high: Option<i32>, low: Option<i32>) -> ImageGcArgs {
        ImageGcArgs {
            image_gc_high_threshold: high,
            image_gc_low_threshold: low,
            ..Default::default()
        }
    }

    #[test]
    fn defaults_are_the_kubelets_2015_ones() {
        let p = resolve(&ImageGcArgs::default(), &ImageGcFile::default()).unwrap();
        assert_eq!(p, GcPolicy::default());
        assert_eq!(
            (p.high_threshold_percent, p.low_threshold_percent),
            (90, 80)
        );
        assert_eq!(p.min_age, Duration::from_secs(120));
        assert_eq!(p.max_age, None);
        assert_eq!(p.period, Duration::from_secs(300));
        assert_eq!(p.pod_infra_container_image, "registry.k8s.io/pause:3.6");
    }

    #[test]
    fn flags_override_the_file_and_pinned_images_add_up() {
        let file = ImageGcFile {
            image_gc_high_threshold_percent: Some(70),
            image_gc_low_threshold_percent: Some(50),
            image_minimum_gc_age: Some("1m".into()),
            image_maximum_gc_age: Some("24h".into()),
            image_gc_period: Some("30s".into()),
            pinned_images: Some(vec!["a:1".into()]),
        };
        let a = ImageGcArgs {
            image_gc_high_threshold: Some(85),
            image_maximum_gc_age: Some("0".into()),
            pinned_images: vec!["b:2".into()],
            ..Default::default()
        };
        let p = resolve(&a, &file).unwrap();
        assert_eq!(p.high_threshold_percent, 85);
        assert_eq!(p.low_threshold_percent, 50);
        assert_eq!(p.min_age, Duration::from_secs(60));
        assert_eq!(p.max_age, None, "0 turns MaxAge off");
        assert_eq!(p.period, Duration::from_secs(30));
        assert_eq!(p.pinned_images, ["a:1", "b:2"]);
    }

    #[test]
    fn invalid_values_name_the_flag_and_the_field() {
        let cases: Vec<(ImageGcArgs, &str)> = vec![
            (args(Some(101), None), "--image-gc-high-threshold"),
            (args(Some(-1), None), "--image-gc-high-threshold"),
            (args(None, Some(-5)), "--image-gc-low-threshold"),
            (args(Some(80), Some(80)), "--image-gc-low-threshold"),
            (args(Some(50), None), "--image-gc-low-threshold"),
            (
                ImageGcArgs {
                    image_minimum_gc_age: Some("soon".into()),
                    ..Default::default()
                },
                "--image-minimum-gc-age",
            ),
            (
                ImageGcArgs {
                    image_maximum_gc_age: Some("1m".into()),
                    ..Default::default()
                },
                "--image-maximum-gc-age",
            ),
            (
                ImageGcArgs {
                    image_gc_period: Some("0s".into()),
                    ..Default::default()
                },
                "--image-gc-period",
            ),
        ];
        for (a, flag) in cases {
            let err = resolve(&a, &ImageGcFile::default())
                .unwrap_err()
                .to_string();
            assert!(err.starts_with(flag), "{a:?}: {err}");
            assert!(err.contains("(image"), "names the field: {err}");
        }
    }

    #[test]
    fn high_100_disables_space_gc() {
        let p = resolve(&args(Some(100), None), &ImageGcFile::default()).unwrap();
        assert!(!p.space_gc_enabled());
        assert!(GcPolicy::default().space_gc_enabled());
    }

    proptest! {
        #[test]
        fn thresholds_are_accepted_exactly_when_0_le_low_lt_high_le_100(high in -5i32..110, low in -5i32..110) {
            let ok = resolve(&args(Some(high), Some(low)), &ImageGcFile::default()).is_ok();
            prop_assert_eq!(ok, (0..=100).contains(&high) && (0..=100).contains(&low) && low < high);
        }
    }
}
