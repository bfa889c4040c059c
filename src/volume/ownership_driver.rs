//! Gives a volume to the pod's fsGroup: the walk of the kubelet's
//! `SetVolumeOwnership` (`pkg/volume/volume_linux.go`, `walkDeep`), which
//! applies [`super::ownership`]'s change to every path under the volume's
//! root.
//!
//! Invariant: links are never followed (lstat, lchown; a symlink's target
//! is not chmodded); children are changed before their directory, the
//! root last; a failed chown or chmod is logged and the walk goes on,
//! while a path that cannot be listed or read stops it, as in the kubelet.

use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt, lchown};
use std::path::{Path, PathBuf};

use super::ownership::{
    FileChange, FileFacts, FileKind, FsGroupChangePolicy, file_change, skip_permission_change,
};

/// A walk that could not read a path of the volume.
#[derive(Debug, thiserror::Error)]
#[error("setting fsGroup {fs_group} on volume {}: reading {}: {source}", .root.display(), .path.display())]
pub struct OwnershipError {
    pub root: PathBuf,
    pub path: PathBuf,
    pub fs_group: u32,
    pub source: io::Error,
}

/// Gives the volume at `root` to `fs_group` (nothing without one). How
/// many paths were changed is returned (0 when the policy let it skip).
pub fn set_volume_ownership(
    root: &Path,
    fs_group: Option<u32>,
    policy: FsGroupChangePolicy,
    read_only: bool,
) -> Result<usize, OwnershipError> {
    let Some(fs_group) = fs_group else {
        return Ok(0);
    };
    let root_facts = fs::metadata(root).ok().map(|m| facts(&m));
    if skip_permission_change(policy, root_facts.as_ref(), fs_group, read_only) {
        tracing::debug!(volume = %root.display(), fs_group, "volume ownership already set");
        return Ok(0);
    }
    let fail = |path: &Path, source| OwnershipError {
        root: root.to_owned(),
        path: path.to_owned(),
        fs_group,
        source,
    };
    let meta = fs::symlink_metadata(root).map_err(|e| fail(root, e))?;
    // Depth-first, each directory after its children: a stack of the
    // directories being walked with the entries of each still to visit.
    let mut changed = 0;
    let mut stack: Vec<(PathBuf, FileFacts, fs::ReadDir)> = Vec::new();
    let mut next = Some((root.to_owned(), meta));
    loop {
        if let Some((path, meta)) = next.take() {
            let facts = facts(&meta);
            if facts.kind == FileKind::Directory {
                let entries = fs::read_dir(&path).map_err(|e| fail(&path, e))?;
                stack.push((path, facts, entries));
            } else {
                apply(&path, file_change(&facts, fs_group, read_only));
                changed += 1;
            }
        }
        let Some((dir, dir_facts, entries)) = stack.last_mut() else {
            break;
        };
        match entries.next() {
            Some(entry) => {
                let path = entry.map_err(|e| fail(dir, e))?.path();
                let meta = fs::symlink_metadata(&path).map_err(|e| fail(&path, e))?;
                next = Some((path, meta));
            }
            None => {
                apply(dir, file_change(dir_facts, fs_group, read_only));
                changed += 1;
                stack.pop();
            }
        }
    }
    Ok(changed)
}

fn facts(meta: &fs::Metadata) -> FileFacts {
    let t = meta.file_type();
    let kind = if t.is_symlink() {
        FileKind::Symlink
    } else if t.is_dir() {
        FileKind::Directory
    } else {
        FileKind::Other
    };
    FileFacts {
        kind,
        mode: meta.mode(),
        gid: meta.gid(),
    }
}

/// lchown then chmod; failures are the kubelet's log lines, not errors.
fn apply(path: &Path, change: FileChange) {
    if let Err(e) = lchown(path, None, Some(change.gid)) {
        tracing::warn!(path = %path.display(), gid = change.gid, error = %e, "lchown failed");
    }
    if let Some(mode) = change.mode {
        if let Err(e) = fs::set_permissions(path, fs::Permissions::from_mode(mode)) {
            tracing::warn!(path = %path.display(), mode = format!("{mode:o}"), error = %e, "chmod failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn stat(path: &Path) -> (u32, u32) {
        let m = fs::symlink_metadata(path).unwrap();
        (m.mode() & 0o7777, m.gid())
    }

    /// A tree of every kind of path, with modes set past the umask.
    fn tree(root: &Path) {
        fs::create_dir_all(root.join("a/b")).unwrap();
        fs::write(root.join("page"), "hello").unwrap();
        fs::write(root.join("a/b/deep"), "x").unwrap();
        fs::write(root.join("run"), "#!/bin/sh").unwrap();
        symlink("page", root.join("link")).unwrap();
        symlink("/etc/hostname", root.join("outside")).unwrap();
        let modes = [
            ("", 0o777),
            ("a", 0o755),
            ("a/b", 0o700),
            ("page", 0o644),
            ("a/b/deep", 0o600),
            ("run", 0o4755),
        ];
        for (p, mode) in modes {
            fs::set_permissions(root.join(p), fs::Permissions::from_mode(mode)).unwrap();
        }
    }

    #[test]
    fn every_path_gets_the_group_and_links_keep_their_targets() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("vol");
        tree(&root);
        let outside_before = stat(Path::new("/etc/hostname"));
        let n = set_volume_ownership(&root, Some(2000), FsGroupChangePolicy::Always, false);
        assert_eq!(n.unwrap(), 8, "every path, links included");
        let want = [
            ("", 0o2777),
            ("a", 0o2775),
            ("a/b", 0o2770),
            ("page", 0o664),
            ("a/b/deep", 0o660),
            // The chown cleared setuid; the chmod put it back.
            ("run", 0o4775),
        ];
        for (p, mode) in want {
            assert_eq!(stat(&root.join(p)), (mode, 2000), "{p:?}");
        }
        for link in ["link", "outside"] {
            let (mode, gid) = stat(&root.join(link));
            assert_eq!((mode, gid), (0o777, 2000), "{link}: the link itself");
        }
        assert_eq!(
            stat(Path::new("/etc/hostname")),
            outside_before,
            "a link's target outside the volume is not touched"
        );
    }

    #[test]
    fn read_only_volumes_get_group_read_only() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("vol");
        tree(&root);
        set_volume_ownership(&root, Some(3000), FsGroupChangePolicy::Always, true).unwrap();
        assert_eq!(stat(&root.join("a/b")), (0o2750, 3000));
        assert_eq!(stat(&root.join("a/b/deep")), (0o640, 3000));
    }

    #[test]
    fn without_fs_group_nothing_changes() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("vol");
        tree(&root);
        let before = stat(&root.join("a/b"));
        let n = set_volume_ownership(&root, None, FsGroupChangePolicy::Always, false);
        assert_eq!(n.unwrap(), 0);
        assert_eq!(stat(&root.join("a/b")), before);
    }

    #[test]
    fn on_root_mismatch_walks_once_then_trusts_the_root() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("vol");
        tree(&root);
        let policy = FsGroupChangePolicy::OnRootMismatch;
        assert_eq!(
            set_volume_ownership(&root, Some(2000), policy, false).unwrap(),
            8
        );
        // A file added later is left alone: the root already matches.
        fs::write(root.join("later"), "x").unwrap();
        fs::set_permissions(root.join("later"), fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            set_volume_ownership(&root, Some(2000), policy, false).unwrap(),
            0
        );
        assert_eq!(stat(&root.join("later")).0, 0o600);
        // Another group: walked again.
        assert_eq!(
            set_volume_ownership(&root, Some(2001), policy, false).unwrap(),
            9
        );
        assert_eq!(stat(&root.join("later")), (0o660, 2001));
        // Always walks every time.
        let always = FsGroupChangePolicy::Always;
        assert_eq!(
            set_volume_ownership(&root, Some(2001), always, false).unwrap(),
            9
        );
    }

    #[test]
    fn a_single_file_volume_and_a_missing_root() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("file");
        fs::write(&file, "x").unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
        let always = FsGroupChangePolicy::Always;
        assert_eq!(
            set_volume_ownership(&file, Some(5), always, false).unwrap(),
            1
        );
        assert_eq!(stat(&file), (0o660, 5));

        let missing = tmp.path().join("missing");
        let err = set_volume_ownership(&missing, Some(5), always, false).unwrap_err();
        assert_eq!(err.path, missing);
        let text = err.to_string();
        assert!(
            text.starts_with(&format!(
                "setting fsGroup 5 on volume {}: reading {}: ",
                missing.display(),
                missing.display()
            )),
            "{text}"
        );
    }

    #[test]
    fn a_deep_tree_does_not_overflow_the_stack() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("vol");
        let mut deep = root.clone();
        for _ in 0..200 {
            deep.push("d");
        }
        fs::create_dir_all(&deep).unwrap();
        let always = FsGroupChangePolicy::Always;
        assert_eq!(
            set_volume_ownership(&root, Some(9), always, false).unwrap(),
            201
        );
        assert_eq!(stat(&deep).1, 9);
    }
}
