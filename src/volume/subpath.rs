//! subPath bind mounts, as the kubelet makes them (`pkg/volume/util/subpath`
//! on Linux): the path a mount's subPath names is opened without leaving
//! its volume, and that open file is bind-mounted on a target under the
//! pod's `volume-subpaths` directory, which the container then mounts. A
//! symlink swapped into the volume after the check cannot lead the runtime
//! out of it, because the runtime never resolves the subPath itself.
//!
//! Invariants: nothing is opened or created outside the volume (the kernel
//! resolves every path beneath the volume's root, `RESOLVE_BENEATH`, and no
//! magic links); a missing subPath is created as a directory with the
//! volume root's mode, as the kubelet's `SafeMakeDir`. A pod directory is
//! only ever removed once no mount is left under it: [`remove_pod_dir`]
//! unmounts the binds first and refuses when something stays mounted, so a
//! recursive removal never reaches into a volume. The parse of
//! `/proc/self/mountinfo` is pure.

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};

/// Binds `volume_path`/`sub_path` on `target`: creates the subPath as a
/// directory when missing, the target (a directory or an empty file, as the
/// source is) and its parents, then bind-mounts. A target already mounted
/// is kept (a restarted container reuses its bind, as with the kubelet).
pub fn prepare(volume_path: &Path, sub_path: &Path, target: &Path) -> io::Result<()> {
    if is_mount_point(target)? {
        return Ok(());
    }
    let source = open_beneath(volume_path, sub_path)?;
    let is_dir =
        FileType::from_raw_mode(rustix::fs::fstat(&source)?.st_mode) == FileType::Directory;
    if let Some(parent) = target.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o750)
            .create(parent)?;
    }
    let made = if is_dir {
        std::fs::DirBuilder::new().mode(0o750).create(target)
    } else {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o640)
            .open(target);
        file.map(drop)
    };
    match made {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    // The open file, by its /proc link: what the kernel resolved, beneath.
    let from = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&source));
    bind_mount(Path::new(&from), target)
}

/// Opens `sub` beneath `root` (`O_PATH`), creating the missing directories
/// on the way with the mode of `root`.
fn open_beneath(root: &Path, sub: &Path) -> io::Result<std::os::fd::OwnedFd> {
    if sub.is_absolute() || sub.components().any(|c| !matches!(c, Component::Normal(_))) {
        let why = format!("subPath {} must be relative without '..'", sub.display());
        return Err(io::Error::new(io::ErrorKind::InvalidInput, why));
    }
    let flags = OFlags::PATH | OFlags::CLOEXEC;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
    let root_fd = rustix::fs::open(
        root,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    match rustix::fs::openat2(&root_fd, sub, flags, Mode::empty(), resolve) {
        Err(rustix::io::Errno::NOENT) => {}
        other => return other.map_err(io::Error::from),
    }
    let mode = Mode::from_raw_mode(rustix::fs::fstat(&root_fd)?.st_mode & 0o7777);
    let mut walked = PathBuf::new();
    for part in sub.components() {
        walked.push(part);
        match rustix::fs::mkdirat(&root_fd, &walked, mode) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
        // Each step resolved beneath the root: a symlink made in between
        // cannot carry the next mkdirat out of the volume.
        rustix::fs::openat2(&root_fd, &walked, flags, Mode::empty(), resolve)?;
    }
    Ok(rustix::fs::openat2(
        &root_fd,
        sub,
        flags,
        Mode::empty(),
        resolve,
    )?)
}

fn bind_mount(source: &Path, target: &Path) -> io::Result<()> {
    let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes()).map_err(io::Error::other);
    let (source, target) = (c(source)?, c(target)?);
    // SAFETY: both are valid NUL-terminated strings; a bind takes no type
    // and no data.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND,
            std::ptr::null(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn unmount(target: &Path) -> io::Result<()> {
    let target = std::ffi::CString::new(target.as_os_str().as_bytes()).map_err(io::Error::other)?;
    // SAFETY: a valid NUL-terminated path.
    let rc = unsafe { libc::umount2(target.as_ptr(), 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The mount points in `mountinfo` (the text of `/proc/self/mountinfo`) at
/// `dir` or under it, deepest first.
pub fn mount_points_under(mountinfo: &str, dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|field| PathBuf::from(unescape_mountinfo(field)))
        .filter(|p| p.starts_with(dir))
        .collect();
    found.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    found.dedup();
    found
}

/// mountinfo writes a space, tab, newline and backslash as `\ooo`.
fn unescape_mountinfo(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match (bytes[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn is_mount_point(path: &Path) -> io::Result<bool> {
    let info = std::fs::read_to_string("/proc/self/mountinfo")?;
    Ok(mount_points_under(&info, path).iter().any(|p| p == path))
}

/// Removes a pod's directory: first every mount under it is unmounted
/// (its subPath binds, deepest first), then, when none is left, the
/// directory and all it holds. A mount that cannot be unmounted stops the
/// removal with an error naming it: the recursive removal would otherwise
/// delete a volume's files through it.
pub fn remove_pod_dir(dir: &Path) -> io::Result<()> {
    let info = std::fs::read_to_string("/proc/self/mountinfo")?;
    for mount in mount_points_under(&info, dir) {
        if let Err(e) = unmount(&mount) {
            return Err(io::Error::new(
                e.kind(),
                format!(
                    "unmounting {} before removing {}: {e}",
                    mount.display(),
                    dir.display()
                ),
            ));
        }
    }
    let info = std::fs::read_to_string("/proc/self/mountinfo")?;
    if let Some(left) = mount_points_under(&info, dir).first() {
        let why = format!(
            "{} is still mounted, so {} is kept",
            left.display(),
            dir.display()
        );
        return Err(io::Error::other(why));
    }
    std::fs::remove_dir_all(dir)
}

#[cfg(test)]
#[path = "subpath_tests.rs"]
mod tests;
