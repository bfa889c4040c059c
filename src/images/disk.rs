//! Capacity and free space of a filesystem, behind a trait so that GC
//! decisions can be tested with made-up disks.
//!
//! CRI's ImageFsInfo reports used bytes and a mountpoint but no capacity;
//! the agent takes capacity and availability from statvfs on that mountpoint.

use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FsStats {
    /// Total bytes of the filesystem.
    pub capacity_bytes: u64,
    /// Bytes an unprivileged user may still write (f_bavail).
    pub available_bytes: u64,
    pub inodes: u64,
    pub inodes_free: u64,
}

pub trait DiskStats: Send + Sync {
    fn stat(&self, path: &Path) -> std::io::Result<FsStats>;
}

/// The real disk, through statvfs(2).
#[derive(Debug, Clone, Copy, Default)]
pub struct Statvfs;

impl DiskStats for Statvfs {
    fn stat(&self, path: &Path) -> std::io::Result<FsStats> {
        let s = rustix::fs::statvfs(path).map_err(|e| {
            std::io::Error::new(
                std::io::Error::from(e).kind(),
                format!("statvfs {}: {e}", path.display()),
            )
        })?;
        let frsize = if s.f_frsize > 0 {
            s.f_frsize
        } else {
            s.f_bsize
        };
        Ok(FsStats {
            capacity_bytes: s.f_blocks.saturating_mul(frsize),
            available_bytes: s.f_bavail.saturating_mul(frsize),
            inodes: s.f_files,
            inodes_free: s.f_ffree,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statvfs_of_a_real_directory_is_plausible() {
        let dir = tempfile::tempdir().unwrap();
        let s = Statvfs.stat(dir.path()).unwrap();
        assert!(s.capacity_bytes > 0);
        assert!(s.available_bytes <= s.capacity_bytes);
    }

    #[test]
    fn statvfs_error_names_the_path() {
        let err = Statvfs.stat(Path::new("/no/such/dir/crilet")).unwrap_err();
        assert!(err.to_string().contains("/no/such/dir/crilet"), "{err}");
    }
}
