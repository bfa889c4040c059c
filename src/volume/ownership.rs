//! fsGroup ownership of a volume: what the kubelet's `SetVolumeOwnership`
//! (`pkg/volume/volume_linux.go`: `changeFilePermission`,
//! `skipPermissionChange`) decides for each path of a volume it gives to
//! the pod's `fsGroup`. The walk that applies it is
//! [`super::ownership_driver`].
//!
//! Every path of the volume gets the fsGroup as its group (a symlink
//! itself, not its target); every path but a symlink keeps its mode and
//! gains group read-write (read-only for a read-only volume), a directory
//! also group search and setgid, so files made in it later belong to the
//! group too. A symlink's mode means nothing and a chmod through it would
//! change its target, so it keeps its mode.
//!
//! Invariant: pure. No I/O; the facts of a path come in as [`FileFacts`].

/// Group read-write, given to every file of a writable volume.
pub const RW_MASK: u32 = 0o660;
/// Group read, for a read-only volume.
pub const RO_MASK: u32 = 0o440;
/// Search (execute) for owner and group, on directories.
pub const EXEC_MASK: u32 = 0o110;
/// The setgid bit: files made in the directory get its group.
pub const SETGID: u32 = 0o2000;
/// The bits a chmod sets: permissions plus setuid, setgid and sticky.
pub const MODE_BITS: u32 = 0o7777;

/// What kind of path the walk found (by lstat: links are not followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Directory,
    Symlink,
    /// A regular file, socket, FIFO or device: treated alike.
    Other,
}

/// What the walk knows of one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileFacts {
    pub kind: FileKind,
    /// Permission and special bits (`st_mode & 0o7777`).
    pub mode: u32,
    pub gid: u32,
}

/// What to do to one path: lchown to `gid` (the owner unchanged), then,
/// unless `mode` is None, chmod to `mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileChange {
    pub gid: u32,
    pub mode: Option<u32>,
}

/// The change for one path of a volume given to `fs_group`. The chmod
/// uses the mode read before the chown, as the kubelet does: a chown
/// clears setuid/setgid on an executable, and the chmod puts them back.
pub fn file_change(facts: &FileFacts, fs_group: u32, read_only: bool) -> FileChange {
    let mut mask = if read_only { RO_MASK } else { RW_MASK };
    let mode = match facts.kind {
        FileKind::Symlink => None,
        FileKind::Directory => {
            mask |= SETGID | EXEC_MASK;
            Some((facts.mode & MODE_BITS) | mask)
        }
        FileKind::Other => Some((facts.mode & MODE_BITS) | mask),
    };
    FileChange {
        gid: fs_group,
        mode,
    }
}

/// `fsGroupChangePolicy`: Always (the default: walk the whole volume every
/// time) or OnRootMismatch (walk only when the root shows it is needed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FsGroupChangePolicy {
    #[default]
    Always,
    OnRootMismatch,
}

impl FsGroupChangePolicy {
    /// The pod's `securityContext.fsGroupChangePolicy`; anything but
    /// "OnRootMismatch" (unset, "Always") means Always, as in the kubelet.
    pub fn parse(value: Option<&str>) -> Self {
        match value {
            Some("OnRootMismatch") => FsGroupChangePolicy::OnRootMismatch,
            _ => FsGroupChangePolicy::Always,
        }
    }
}

/// Whether the walk can be skipped: only under OnRootMismatch, and only
/// when the volume's root (stat, links followed; None when it could not be
/// read) is a directory of group `fs_group` whose mode holds the group
/// bits and setgid it would get. A root that is not a directory is always
/// walked.
pub fn skip_permission_change(
    policy: FsGroupChangePolicy,
    root: Option<&FileFacts>,
    fs_group: u32,
    read_only: bool,
) -> bool {
    if policy != FsGroupChangePolicy::OnRootMismatch {
        return false;
    }
    let Some(root) = root else {
        return false;
    };
    if root.gid != fs_group || root.kind != FileKind::Directory {
        return false;
    }
    let wanted = if read_only { RO_MASK } else { RW_MASK } | EXEC_MASK;
    let perm = root.mode & 0o777;
    perm & wanted == wanted && root.mode & SETGID != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(kind: FileKind, mode: u32, gid: u32) -> FileFacts {
        FileFacts { kind, mode, gid }
    }

    #[test]
    fn each_kind_of_path_gets_the_group_and_its_bits() {
        use FileKind::*;
        // (kind, mode before, read-only volume, mode after)
        let table = [
            (Directory, 0o777, false, Some(0o2777)),
            (Directory, 0o755, false, Some(0o2775)),
            (Directory, 0o700, false, Some(0o2770)),
            (Directory, 0o000, false, Some(0o2770)),
            (Directory, 0o1777, false, Some(0o3777)),
            (Directory, 0o755, true, Some(0o2755)),
            (Directory, 0o700, true, Some(0o2750)),
            (Other, 0o644, false, Some(0o664)),
            (Other, 0o600, false, Some(0o660)),
            (Other, 0o000, false, Some(0o660)),
            (Other, 0o755, false, Some(0o775)),
            (Other, 0o4755, false, Some(0o4775)),
            (Other, 0o600, true, Some(0o640)),
            (Other, 0o644, true, Some(0o644)),
            (Symlink, 0o777, false, None),
            (Symlink, 0o777, true, None),
        ];
        for (kind, before, read_only, after) in table {
            let got = file_change(&facts(kind, before, 0), 2000, read_only);
            assert_eq!(
                got,
                FileChange {
                    gid: 2000,
                    mode: after
                },
                "{kind:?} {before:o} read_only={read_only}"
            );
        }
    }

    #[test]
    fn type_bits_never_reach_the_chmod() {
        // st_mode with its S_IFDIR / S_IFREG bits.
        let dir = facts(FileKind::Directory, 0o040_755, 0);
        assert_eq!(file_change(&dir, 7, false).mode, Some(0o2775));
        let file = facts(FileKind::Other, 0o100_644, 0);
        assert_eq!(file_change(&file, 7, false).mode, Some(0o664));
    }

    #[test]
    fn the_walk_is_skipped_only_on_a_matching_root_under_on_root_mismatch() {
        use FileKind::*;
        use FsGroupChangePolicy::*;
        let dir = |mode, gid| Some(facts(Directory, mode, gid));
        // (policy, root, read-only, skipped)
        let table = [
            (Always, dir(0o2770, 2000), false, false),
            (Always, dir(0o2777, 2000), false, false),
            (OnRootMismatch, dir(0o2770, 2000), false, true),
            (OnRootMismatch, dir(0o2777, 2000), false, true),
            (OnRootMismatch, dir(0o3775, 2000), false, true),
            (OnRootMismatch, dir(0o770, 2000), false, false),
            (OnRootMismatch, dir(0o2750, 2000), false, false),
            (OnRootMismatch, dir(0o2760, 2000), false, false),
            (OnRootMismatch, dir(0o2770, 2001), false, false),
            (OnRootMismatch, dir(0o2750, 2000), true, true),
            (OnRootMismatch, dir(0o2740, 2000), true, false),
            (
                OnRootMismatch,
                Some(facts(Other, 0o2770, 2000)),
                false,
                false,
            ),
            (OnRootMismatch, None, false, false),
        ];
        for (policy, root, read_only, skipped) in table {
            assert_eq!(
                skip_permission_change(policy, root.as_ref(), 2000, read_only),
                skipped,
                "{policy:?} {root:?} read_only={read_only}"
            );
        }
    }

    #[test]
    fn only_on_root_mismatch_selects_the_shortcut() {
        use FsGroupChangePolicy::*;
        let table = [
            (None, Always),
            (Some("Always"), Always),
            (Some("OnRootMismatch"), OnRootMismatch),
            (Some("onrootmismatch"), Always),
            (Some(""), Always),
        ];
        for (value, want) in table {
            assert_eq!(FsGroupChangePolicy::parse(value), want, "{value:?}");
        }
    }
}
