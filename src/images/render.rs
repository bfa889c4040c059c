//! Text renderings of image GC state for the CLI (`crilet images`,
//! `crilet gc --dry-run`).
//!
//! Invariant: pure; times are shown relative to the `now` given.

use std::fmt::Write;

use super::gc::{GcReport, ImageView};
use super::records::Protection;

/// "1.5 GiB", "700 KiB", "12 B": the CLI's byte sizes.
pub use crate::units::human_bytes as bytes;

/// "3m10s ago" for a time in nanoseconds, relative to `now`.
pub fn ago(now: i64, at: i64) -> String {
    let secs = (now.saturating_sub(at) / 1_000_000_000).max(0);
    let (h, m, s) = (secs / 3600, secs % 3600 / 60, secs % 60);
    match (h, m) {
        (0, 0) => format!("{s}s ago"),
        (0, _) => format!("{m}m{s}s ago"),
        _ => format!("{h}h{m}m ago"),
    }
}

fn short_id(id: &str) -> &str {
    let hex = id.strip_prefix("sha256:").unwrap_or(id);
    &hex[..hex.len().min(12)]
}

/// One row per image: ID, tags, size, last used, in use, pinned, first detected.
pub fn render_images_table(images: &[ImageView], now: i64) -> String {
    let mut out = String::from(
        "IMAGE ID      SIZE       LAST USED     IN USE  PINNED      FIRST DETECTED  TAGS\n",
    );
    for i in images {
        let last = i.last_used.map_or("never".into(), |t| ago(now, t));
        let first = i.first_detected.map_or("at start".into(), |t| ago(now, t));
        let pinned = match i.pinned {
            None => "-",
            Some(Protection::Runtime) => "runtime",
            Some(Protection::Sandbox) => "sandbox",
            Some(Protection::Configured) => "flag",
        };
        let tags = if i.repo_tags.is_empty() {
            "<none>".to_string()
        } else {
            i.repo_tags.join(",")
        };
        let _ = writeln!(
            out,
            "{:<13} {:<10} {:<13} {:<7} {:<11} {:<15} {}",
            short_id(&i.id),
            bytes(i.size),
            last,
            if i.in_use { "yes" } else { "no" },
            pinned,
            first,
            tags
        );
    }
    out
}

/// What a collection did (or, for a dry run, would do) and why.
pub fn render_gc_report(r: &GcReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Image filesystem {}: {}% used ({} of {} available); GC at {}%, down to {}%",
        r.mountpoint,
        r.usage_percent,
        bytes(r.disk.available_bytes),
        bytes(r.disk.capacity_bytes),
        r.high_threshold_percent,
        r.low_threshold_percent
    );
    let verb = if r.dry_run { "would remove" } else { "removed" };
    if r.wanted_bytes > 0 {
        let _ = writeln!(
            out,
            "Space: wanted {} freed, {verb} {}{}",
            bytes(r.wanted_bytes),
            bytes(r.space_freed_bytes),
            if r.short() {
                format!(" (short: kept {})", r.kept_summary())
            } else {
                String::new()
            }
        );
    } else {
        out.push_str("Space: below the high threshold, nothing to free\n");
    }
    if r.removed.is_empty() {
        out.push_str(if r.dry_run {
            "Nothing would be removed.\n"
        } else {
            "Nothing was removed.\n"
        });
    }
    for x in &r.removed {
        let _ = writeln!(
            out,
            "  {verb} {:<5} {} {} ({})",
            x.reason.as_str(),
            short_id(&x.image.id),
            x.image.name,
            bytes(x.image.size)
        );
    }
    for x in &r.failed {
        let _ = writeln!(
            out,
            "  failed  {:<5} {} {}: {}",
            x.reason.as_str(),
            short_id(&x.image.id),
            x.image.name,
            x.error
        );
    }
    for k in &r.kept {
        let _ = writeln!(
            out,
            "  kept    {:<9} {} {} ({})",
            k.why.as_str(),
            short_id(&k.image.id),
            k.image.name,
            bytes(k.image.size)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::images::gc::Removed;
    use crate::images::select::{DiskUsage, GcReason, KeepReason, Kept, Selected};

    const S: i64 = 1_000_000_000;

    fn sel(id: &str, name: &str, size: u64) -> Selected {
        Selected {
            id: id.into(),
            name: name.into(),
            size,
            last_used: None,
            first_detected: None,
        }
    }

    #[test]
    fn sizes_and_ages_read_like_kubectl() {
        assert_eq!(bytes(12), "12 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(3 << 30), "3.0 GiB");
        assert_eq!(ago(100 * S, 90 * S), "10s ago");
        assert_eq!(ago(1000 * S, 810 * S), "3m10s ago");
        assert_eq!(ago(10_000 * S, 0), "2h46m ago");
    }

    #[test]
    fn images_table_shows_every_column() {
        let img = ImageView {
            id: "sha256:0123456789abcdef".into(),
            repo_tags: vec!["registry.k8s.io/pause:3.6".into()],
            repo_digests: vec![],
            size: 700 * 1024,
            first_detected: None,
            last_used: Some(40 * S),
            in_use: true,
            pinned: Some(Protection::Sandbox),
        };
        let t = render_images_table(&[img], 100 * S);
        let row = t.lines().nth(1).unwrap();
        for want in [
            "0123456789ab",
            "700.0 KiB",
            "1m0s ago",
            "yes",
            "sandbox",
            "at start",
            "pause:3.6",
        ] {
            assert!(row.contains(want), "{want}: {row}");
        }
    }

    #[test]
    fn report_says_what_and_why() {
        let r = GcReport {
            dry_run: true,
            at: 0,
            mountpoint: "/var/lib/containerd".into(),
            disk: DiskUsage {
                capacity_bytes: 100 << 20,
                available_bytes: 1 << 20,
            },
            usage_percent: 99,
            high_threshold_percent: 90,
            low_threshold_percent: 80,
            wanted_bytes: 19 << 20,
            freed_bytes: 10 << 20,
            space_freed_bytes: 10 << 20,
            removed: vec![Removed {
                image: sel("sha256:aa", "a:1", 10 << 20),
                reason: GcReason::Space,
            }],
            failed: vec![],
            kept: vec![Kept {
                image: sel("sha256:bb", "b:1", 50 << 20),
                why: KeepReason::InUse,
            }],
        };
        let t = render_gc_report(&r);
        assert!(t.contains("99% used"), "{t}");
        assert!(
            t.contains("wanted 19.0 MiB freed, would remove 10.0 MiB (short: kept 1 in use"),
            "{t}"
        );
        assert!(t.contains("would remove space aa a:1"), "{t}");
        assert!(t.contains("kept    in use    bb b:1 (50.0 MiB)"), "{t}");
    }
}
