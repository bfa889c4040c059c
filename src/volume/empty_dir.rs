//! Setting up an emptyDir volume on the host before the pod's sandbox, as
//! the kubelet's emptyDir plugin does (`pkg/volume/emptydir/empty_dir.go`,
//! `SetUpAt`, `setupDir`): the directory is made with mode 0777 whatever
//! the umask, so that a container running as any user can write to it;
//! when the pod sets `fsGroup` the volume is then given to that group
//! ([`super::ownership_driver`]), and a `ready` file beside it, under the
//! pod's plugin directory, records that this was done.
//!
//! Invariant: a volume whose `ready` file and directory both exist is left
//! as it is (what containers wrote there keeps its modes; the kubelet sets
//! a volume up once, not at each sandbox); nothing outside the volume's
//! directory and its plugin directory is changed.

use std::fs::{self, DirBuilder};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::ownership::FsGroupChangePolicy;
use super::ownership_driver::set_volume_ownership;

/// The mode of an emptyDir's directory.
pub const EMPTY_DIR_PERM: u32 = 0o777;
/// The file under the volume's plugin directory that marks it set up.
pub const READY_FILE: &str = "ready";

/// An emptyDir that could not be made, worded as the kubelet's event.
#[derive(Debug, thiserror::Error)]
#[error("MountVolume.SetUp failed for volume {volume:?} : {op} {}: {source}", .path.display())]
pub struct EmptyDirError {
    pub volume: String,
    pub op: &'static str,
    pub path: PathBuf,
    pub source: io::Error,
}

/// Where one emptyDir of a pod lives on the host.
#[derive(Debug, Clone, Copy)]
pub struct EmptyDir<'a> {
    /// The volume's name in the pod spec.
    pub volume: &'a str,
    /// `<root>/pods/<uid>/volumes/kubernetes.io~empty-dir/<volume>`.
    pub dir: &'a Path,
    /// `<root>/pods/<uid>/plugins/kubernetes.io~empty-dir/<volume>`.
    pub meta_dir: &'a Path,
}

/// Makes the volume's directory (mode 0777) and, the first time, gives it
/// to `fs_group`. Ok(true) when it was set up now, Ok(false) when it was
/// already. A failed ownership change is logged, not returned: the kubelet
/// goes on with the volume as it is.
pub fn set_up(v: &EmptyDir, fs_group: Option<u32>) -> Result<bool, EmptyDirError> {
    let ready = v.meta_dir.join(READY_FILE);
    if ready.exists() {
        if fs::metadata(v.dir).is_ok() {
            return Ok(false);
        }
        // Someone removed the volume but not its mark: make it again.
        tracing::warn!(volume = v.volume, dir = %v.dir.display(), "emptyDir marked ready but missing; setting it up again");
        if let Err(e) = fs::remove_dir_all(v.meta_dir) {
            tracing::warn!(dir = %v.meta_dir.display(), error = %e, "could not remove the emptyDir's ready mark");
        }
    }
    setup_dir(v)?;
    // emptyDir ignores the pod's fsGroupChangePolicy: the kubelet passes
    // none for it, so a fresh volume is always walked.
    if let Err(e) = set_volume_ownership(v.dir, fs_group, FsGroupChangePolicy::Always, false) {
        tracing::warn!(volume = v.volume, error = %e, "could not give the emptyDir to the pod's fsGroup");
    }
    set_ready(v.meta_dir);
    Ok(true)
}

/// `MkdirAll(dir, 0777)`, then a chmod when the umask took bits away.
fn setup_dir(v: &EmptyDir) -> Result<(), EmptyDirError> {
    let fail = |op, source| EmptyDirError {
        volume: v.volume.to_owned(),
        op,
        path: v.dir.to_owned(),
        source,
    };
    let made = DirBuilder::new()
        .recursive(true)
        .mode(EMPTY_DIR_PERM)
        .create(v.dir);
    made.map_err(|e| fail("mkdir", e))?;
    let mode = fs::symlink_metadata(v.dir)
        .map_err(|e| fail("lstat", e))?
        .mode();
    if mode & 0o777 != EMPTY_DIR_PERM {
        let perm = fs::Permissions::from_mode(EMPTY_DIR_PERM);
        fs::set_permissions(v.dir, perm).map_err(|e| fail("chmod", e))?;
    }
    Ok(())
}

/// The kubelet's `SetReady`: failures are only logged (the volume works;
/// it will be set up again next time).
fn set_ready(meta_dir: &Path) {
    let made = DirBuilder::new()
        .recursive(true)
        .mode(0o750)
        .create(meta_dir)
        .and_then(|()| fs::File::create(meta_dir.join(READY_FILE)));
    if let Err(e) = made {
        tracing::warn!(dir = %meta_dir.display(), error = %e, "could not mark the emptyDir ready");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(path: &Path) -> (u32, u32) {
        let m = fs::symlink_metadata(path).unwrap();
        (m.mode() & 0o7777, m.gid())
    }

    struct Pod {
        _tmp: tempfile::TempDir,
        dir: PathBuf,
        meta: PathBuf,
    }

    fn pod() -> Pod {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("pods/uid");
        Pod {
            dir: base.join("volumes/kubernetes.io~empty-dir/work"),
            meta: base.join("plugins/kubernetes.io~empty-dir/work"),
            _tmp: tmp,
        }
    }

    fn volume(p: &Pod) -> EmptyDir<'_> {
        EmptyDir {
            volume: "work",
            dir: &p.dir,
            meta_dir: &p.meta,
        }
    }

    #[test]
    fn made_0777_whatever_the_umask_and_marked_ready() {
        let p = pod();
        // Tests run under the usual 022 umask: mkdir alone gives 0755.
        assert!(set_up(&volume(&p), None).unwrap());
        assert_eq!(stat(&p.dir).0, 0o777);
        assert!(p.meta.join(READY_FILE).is_file());
        assert_eq!(
            stat(&p.meta).0 & 0o027,
            0,
            "the plugin dir is not world-readable"
        );
    }

    #[test]
    fn fs_group_gets_the_volume_and_setgid() {
        let p = pod();
        assert!(set_up(&volume(&p), Some(2000)).unwrap());
        assert_eq!(stat(&p.dir), (0o2777, 2000));
        // The parents are the pod's, not the group's.
        assert_ne!(stat(p.dir.parent().unwrap()).1, 2000);
    }

    #[test]
    fn a_ready_volume_is_left_as_the_containers_made_it() {
        let p = pod();
        set_up(&volume(&p), Some(2000)).unwrap();
        fs::write(p.dir.join("page"), "hello").unwrap();
        fs::set_permissions(p.dir.join("page"), fs::Permissions::from_mode(0o600)).unwrap();
        assert!(!set_up(&volume(&p), Some(2000)).unwrap(), "already set up");
        assert_eq!(stat(&p.dir.join("page")).0, 0o600);
        assert_eq!(fs::read(p.dir.join("page")).unwrap(), b"hello");
    }

    #[test]
    fn a_volume_gone_under_its_mark_is_made_again() {
        let p = pod();
        set_up(&volume(&p), None).unwrap();
        fs::remove_dir(&p.dir).unwrap();
        assert!(set_up(&volume(&p), None).unwrap());
        assert_eq!(stat(&p.dir).0, 0o777);
        assert!(p.meta.join(READY_FILE).is_file());
    }

    #[test]
    fn an_unmarked_existing_directory_is_fixed_and_given_to_the_group() {
        let p = pod();
        fs::create_dir_all(&p.dir).unwrap();
        fs::set_permissions(&p.dir, fs::Permissions::from_mode(0o700)).unwrap();
        fs::write(p.dir.join("left"), "x").unwrap();
        assert!(set_up(&volume(&p), Some(7)).unwrap());
        assert_eq!(stat(&p.dir), (0o2777, 7));
        assert_eq!(stat(&p.dir.join("left")).1, 7);
    }

    #[test]
    fn a_file_in_the_way_names_the_volume_and_path() {
        let p = pod();
        fs::create_dir_all(p.dir.parent().unwrap()).unwrap();
        fs::write(&p.dir, "not a directory").unwrap();
        let err = set_up(&volume(&p), None).unwrap_err();
        let text = err.to_string();
        let want = format!(
            "MountVolume.SetUp failed for volume \"work\" : mkdir {}: ",
            p.dir.display()
        );
        assert!(text.starts_with(&want), "{text}");
        assert!(!p.meta.join(READY_FILE).exists(), "not marked ready");
    }
}
