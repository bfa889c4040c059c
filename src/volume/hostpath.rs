//! hostPath `type` checks, the kubelet's `checkType`
//! (`pkg/volume/hostpath/host_path.go`), run by the worker before it runs a
//! pod's sandbox. Without them containerd would create every missing bind
//! source as a directory: kubeadm's `FileOrCreate` kubeconfig mounts would
//! become directories.
//!
//! Invariant: only the `*OrCreate` types change the host, and only by
//! creating what is missing; nothing that exists is modified or removed.
//! Types are those of `pod::model::HOST_PATH_TYPES` (validation refuses
//! others before a pod gets here); symlinks are followed, as `os.Stat` does.

use std::fs::{self, DirBuilder, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, OpenOptionsExt};
use std::path::Path;

use k8s_openapi::api::core::v1::Pod;

/// A volume that failed its check, worded as the kubelet's event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("MountVolume.SetUp failed for volume {volume:?} : {reason}")]
pub struct HostPathError {
    pub volume: String,
    pub path: String,
    pub reason: String,
}

/// Checks every hostPath volume of the pod in spec order; the first failure
/// stops the rest, as it stops the pod.
pub fn check_volumes(pod: &Pod) -> Result<(), HostPathError> {
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_deref());
    for volume in volumes.unwrap_or_default() {
        let Some(host) = &volume.host_path else {
            continue;
        };
        let kind = host.type_.as_deref().unwrap_or_default();
        check_type(Path::new(&host.path), kind).map_err(|reason| HostPathError {
            volume: volume.name.clone(),
            path: host.path.clone(),
            reason,
        })?;
    }
    Ok(())
}

/// Makes `path` match `kind` where the type allows creating it, else checks
/// that it does. Err is the kubelet's wording, e.g. "hostPath type check
/// failed: /x is not a socket file, it's a Directory".
pub fn check_type(path: &Path, kind: &str) -> Result<(), String> {
    match kind {
        "" => Ok(()),
        "DirectoryOrCreate" if !exists(path) => make_dir(path),
        "DirectoryOrCreate" | "Directory" => matches(path, "Directory", "directory"),
        "FileOrCreate" if !exists(path) => make_file(path),
        "FileOrCreate" | "File" => matches(path, "File", "file"),
        "Socket" => matches(path, "Socket", "socket file"),
        "CharDevice" => matches(path, "CharDevice", "character device"),
        "BlockDevice" => matches(path, "BlockDevice", "block device"),
        other => Err(format!("{other} is an invalid volume type")),
    }
}

/// The kubelet's `exists`: stat succeeds (a dangling symlink does not exist).
fn exists(path: &Path) -> bool {
    fs::metadata(path).is_ok()
}

fn matches(path: &Path, want: &str, described: &str) -> Result<(), String> {
    let shown = path.display();
    let Ok(meta) = fs::metadata(path) else {
        return Err(format!("hostPath {shown} doesn't exist"));
    };
    match file_type(&meta) {
        Some(found) if found == want => Ok(()),
        Some(found) => Err(format!(
            "hostPath type check failed: {shown} is not a {described}, it's a {found}"
        )),
        None => Err(format!(
            "hostPath type check failed, {shown} is not a {described}, unable to determine \
             its type: only recognise file, directory, socket, block device and character device"
        )),
    }
}

/// The kubelet's `GetFileType` names; None for a FIFO and the like.
fn file_type(meta: &Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    if t.is_dir() {
        Some("Directory")
    } else if t.is_file() {
        Some("File")
    } else if t.is_socket() {
        Some("Socket")
    } else if t.is_char_device() {
        Some("CharDevice")
    } else if t.is_block_device() {
        Some("BlockDevice")
    } else {
        None
    }
}

/// `MkdirAll(path, 0755)`: parents too; the umask applies, as in the kubelet.
fn make_dir(path: &Path) -> Result<(), String> {
    let made = DirBuilder::new().recursive(true).mode(0o755).create(path);
    made.map_err(|e| format!("mkdir {}: {e}", path.display()))
}

/// `open(path, O_CREATE, 0644)`: never its parents, never truncating a file
/// that appeared meanwhile.
fn make_file(path: &Path) -> Result<(), String> {
    let opened = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .open(path);
    match opened {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(format!("open {}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{PermissionsExt, symlink};
    use std::os::unix::net::UnixListener;

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn each_type_against_each_kind_of_path() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("dir");
        let file = tmp.path().join("file");
        let sock = tmp.path().join("sock");
        let missing = tmp.path().join("missing");
        fs::create_dir(&dir).unwrap();
        fs::write(&file, "x").unwrap();
        let _listener = UnixListener::bind(&sock).unwrap();
        let link_to_dir = tmp.path().join("link-to-dir");
        let link_to_sock = tmp.path().join("link-to-sock");
        let dangling = tmp.path().join("dangling");
        symlink(&dir, &link_to_dir).unwrap();
        symlink(&sock, &link_to_sock).unwrap();
        symlink(&missing, &dangling).unwrap();
        let null = Path::new("/dev/null");

        let ok = |p: &Path, kind: &str| {
            assert_eq!(check_type(p, kind), Ok(()), "{kind} {}", p.display());
        };
        let fails = |p: &Path, kind: &str, words: &str| {
            let err = check_type(p, kind).expect_err(kind);
            assert!(err.contains(words), "{kind} {}: {err}", p.display());
        };
        for p in [&dir, &file, &sock, &missing] {
            ok(p, "");
        }
        ok(&dir, "Directory");
        ok(&dir, "DirectoryOrCreate");
        ok(&link_to_dir, "Directory");
        ok(&file, "File");
        ok(&file, "FileOrCreate");
        ok(&sock, "Socket");
        ok(&link_to_sock, "Socket");
        ok(null, "CharDevice");

        let its = |p: &Path, what: &str, found: &str| {
            format!(
                "hostPath type check failed: {} is not a {what}, it's a {found}",
                p.display()
            )
        };
        fails(&dir, "Socket", &its(&dir, "socket file", "Directory"));
        fails(&dir, "File", &its(&dir, "file", "Directory"));
        fails(&dir, "FileOrCreate", &its(&dir, "file", "Directory"));
        fails(&file, "Directory", &its(&file, "directory", "File"));
        fails(&file, "DirectoryOrCreate", &its(&file, "directory", "File"));
        fails(&sock, "File", &its(&sock, "file", "Socket"));
        fails(
            null,
            "BlockDevice",
            &its(null, "block device", "CharDevice"),
        );
        fails(null, "File", &its(null, "file", "CharDevice"));
        fails(&file, "CharDevice", &its(&file, "character device", "File"));
        for kind in ["Directory", "File", "Socket", "CharDevice", "BlockDevice"] {
            let gone = format!("hostPath {} doesn't exist", missing.display());
            fails(&missing, kind, &gone);
            fails(&dangling, kind, "doesn't exist");
        }
        fails(&dir, "Symlink", "Symlink is an invalid volume type");
        assert!(!missing.exists(), "the checks alone create nothing");
    }

    #[test]
    fn directory_or_create_makes_parents_0755() {
        let tmp = tempfile::tempdir().unwrap();
        let deep = tmp.path().join("a/b/c");
        check_type(&deep, "DirectoryOrCreate").unwrap();
        assert!(deep.is_dir());
        // 0755 under the usual 022 umask (the kubelet's MkdirAll obeys it).
        assert_eq!(mode(&deep) & 0o700, 0o700);
        assert_eq!(mode(&deep) & 0o022, 0);
        // Present now: checked, not recreated.
        fs::write(deep.join("keep"), "kept").unwrap();
        check_type(&deep, "DirectoryOrCreate").unwrap();
        assert_eq!(fs::read(deep.join("keep")).unwrap(), b"kept");
    }

    #[test]
    fn file_or_create_makes_the_file_but_not_its_parent() {
        let tmp = tempfile::tempdir().unwrap();
        let conf = tmp.path().join("admin.conf");
        check_type(&conf, "FileOrCreate").unwrap();
        assert!(conf.is_file());
        assert_eq!(fs::read(&conf).unwrap(), b"");
        assert_eq!(mode(&conf) & 0o755, mode(&conf), "at most 0644");
        // An existing file is left as it is.
        fs::write(&conf, "apiVersion: v1").unwrap();
        check_type(&conf, "FileOrCreate").unwrap();
        assert_eq!(fs::read(&conf).unwrap(), b"apiVersion: v1");

        let orphan = tmp.path().join("no-such-dir/admin.conf");
        let err = check_type(&orphan, "FileOrCreate").unwrap_err();
        assert!(
            err.starts_with(&format!("open {}: ", orphan.display())),
            "{err}"
        );
        assert!(!orphan.parent().unwrap().exists());
    }

    #[test]
    fn check_volumes_names_the_volume_and_stops_at_the_first_failure() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().display();
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "kube-scheduler"},
            "spec": {
                "containers": [{"name": "s", "image": "x"}],
                "volumes": [
                    {"name": "scratch", "emptyDir": {}},
                    {"name": "untyped", "hostPath": {"path": format!("{base}/nowhere")}},
                    {"name": "certs", "hostPath": {"path": format!("{base}/pki"), "type": "DirectoryOrCreate"}},
                    {"name": "kubeconfig", "hostPath": {"path": format!("{base}/pki"), "type": "FileOrCreate"}},
                    {"name": "later", "hostPath": {"path": format!("{base}/later"), "type": "DirectoryOrCreate"}}
                ]
            }
        }))
        .unwrap();
        let err = check_volumes(&pod).unwrap_err();
        assert_eq!(err.volume, "kubeconfig");
        assert_eq!(err.path, format!("{base}/pki"));
        assert_eq!(
            err.to_string(),
            format!(
                "MountVolume.SetUp failed for volume \"kubeconfig\" : hostPath type check \
                 failed: {base}/pki is not a file, it's a Directory"
            )
        );
        assert!(
            tmp.path().join("pki").is_dir(),
            "earlier volumes were set up"
        );
        assert!(!tmp.path().join("later").exists(), "later ones were not");
        assert!(!tmp.path().join("nowhere").exists());
        assert_eq!(check_volumes(&Pod::default()), Ok(()));
    }
}
