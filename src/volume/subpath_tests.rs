//! The mountinfo parse (pure), and the binds themselves against the
//! kernel: those need root, as crilet does (CI runs as root).

use super::*;
use std::os::unix::fs::PermissionsExt;

#[test]
fn mount_points_under_a_directory_deepest_first_with_escapes_undone() {
    let info = "\
22 1 8:1 / / rw shared:1 - ext4 /dev/vda rw
30 22 8:1 /srv/a /var/lib/crilet/pods/u1/volume-subpaths/v/c/0 rw - ext4 /dev/vda rw
31 22 8:1 /srv/b /var/lib/crilet/pods/u1/volume-subpaths/v/c/1 rw - ext4 /dev/vda rw
32 22 8:1 /srv/c /var/lib/crilet/pods/u1/volumes/my\\040vol rw - ext4 /dev/vda rw
33 22 8:1 /srv/d /var/lib/crilet/pods/u10/volume-subpaths/v/c/0 rw - ext4 /dev/vda rw
34 30 8:1 /srv/e /var/lib/crilet/pods/u1/volume-subpaths/v/c/0/deeper/x rw - ext4 /dev/vda rw
";
    let got = mount_points_under(info, Path::new("/var/lib/crilet/pods/u1"));
    let want: Vec<PathBuf> = [
        "/var/lib/crilet/pods/u1/volume-subpaths/v/c/0/deeper/x",
        "/var/lib/crilet/pods/u1/volume-subpaths/v/c/0",
        "/var/lib/crilet/pods/u1/volume-subpaths/v/c/1",
        "/var/lib/crilet/pods/u1/volumes/my vol",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    assert_eq!(got, want);
    assert!(mount_points_under(info, Path::new("/nowhere")).is_empty());
    assert_eq!(unescape_mountinfo("a\\011b\\134c\\9"), "a\tb\\c\\9");
}

fn need_root() {
    assert!(
        rustix::process::geteuid().is_root(),
        "the subPath bind tests mount, as crilet does: run them as root (CI does)"
    );
}

#[test]
fn a_directory_is_bound_and_removing_the_pod_leaves_the_volume_whole() {
    need_root();
    let tmp = tempfile::tempdir().unwrap();
    let volume = tmp.path().join("volume");
    std::fs::create_dir_all(volume.join("sub")).unwrap();
    std::fs::write(volume.join("sub/kept"), "data").unwrap();
    let pod = tmp.path().join("pod");
    let target = pod.join("volume-subpaths/v/c/0");

    prepare(&volume, Path::new("sub"), &target).unwrap();
    assert!(is_mount_point(&target).unwrap());
    assert_eq!(
        std::fs::read_to_string(target.join("kept")).unwrap(),
        "data"
    );
    // A second start of the container reuses the bind.
    prepare(&volume, Path::new("sub"), &target).unwrap();

    remove_pod_dir(&pod).unwrap();
    assert!(!pod.exists());
    assert_eq!(
        std::fs::read_to_string(volume.join("sub/kept")).unwrap(),
        "data"
    );
}

#[test]
fn a_file_is_bound_on_a_file_and_a_missing_path_made_a_directory_with_the_volume_s_mode() {
    need_root();
    let tmp = tempfile::tempdir().unwrap();
    let volume = tmp.path().join("volume");
    std::fs::create_dir_all(&volume).unwrap();
    std::fs::set_permissions(&volume, std::fs::Permissions::from_mode(0o750)).unwrap();
    std::fs::write(volume.join("conf"), "x=1").unwrap();
    let pod = tmp.path().join("pod");

    let file_target = pod.join("volume-subpaths/v/c/0");
    prepare(&volume, Path::new("conf"), &file_target).unwrap();
    assert!(file_target.is_file());
    assert_eq!(std::fs::read_to_string(&file_target).unwrap(), "x=1");

    let dir_target = pod.join("volume-subpaths/v/c/1");
    prepare(&volume, Path::new("made/deeper"), &dir_target).unwrap();
    let made = volume.join("made/deeper");
    assert!(made.is_dir());
    let mode = std::fs::metadata(&made).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode & !0o022, 0o750 & !0o022, "{mode:o}");

    remove_pod_dir(&pod).unwrap();
    assert!(volume.join("conf").is_file() && made.is_dir());
}

#[test]
fn a_symlink_out_of_the_volume_is_refused_and_nothing_is_mounted() {
    need_root();
    let tmp = tempfile::tempdir().unwrap();
    let volume = tmp.path().join("volume");
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&volume).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, volume.join("escape")).unwrap();
    std::os::unix::fs::symlink("../../outside", volume.join("relative")).unwrap();
    let target = tmp.path().join("pod/volume-subpaths/v/c/0");

    for link in ["escape", "relative", "escape/x"] {
        let err = prepare(&volume, Path::new(link), &target).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EXDEV), "{link}: {err}");
        assert!(!is_mount_point(&target).unwrap());
    }
    assert!(
        !outside.join("x").exists(),
        "nothing was made outside the volume"
    );
    let err = prepare(&volume, Path::new("../outside"), &target).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
}
