//! Image-GC settings: the bridge from `crilet run`'s flags and file to
//! `images::policy`, which owns the `--image-gc-*` flags, the file fields and
//! their validation. Invariant: only a validated `GcPolicy` leaves here.

use super::{ConfigError, ConfigFile, RunArgs};
use crate::images::policy::GcPolicy;

/// Flags over file over defaults, validated by `images::policy::resolve`.
pub(super) fn resolve_image_gc(args: &RunArgs, file: &ConfigFile) -> Result<GcPolicy, ConfigError> {
    Ok(crate::images::policy::resolve(
        &args.image_gc,
        &file.image_gc,
    )?)
}

#[cfg(test)]
#[path = "image_gc_tests.rs"]
mod tests;
