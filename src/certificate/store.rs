//! The certificate store under `--cert-dir`, laid out as client-go's
//! `certificate.NewFileStore` lays it out, so a directory the kubelet wrote
//! works with crilet and back: each issued pair is `<pair>-<timestamp>.pem`
//! (0600, the certificates then the key), `<pair>-current.pem` is a symlink
//! to the one in use, switched by renaming a `<pair>-updated.pem` symlink
//! over it; the bootstrap's key waits in `<pair>.key.tmp` (0600) until its
//! certificate is stored.
//!
//! Invariant: `<pair>-current.pem` always names a whole pair (the pair is
//! written and synced before the symlink moves), and the previous pair
//! stays on disk.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::kubeapi::transport::{first_certificate, validity};

/// The client certificate's pair name.
pub const CLIENT_PAIR: &str = "kubelet-client";
/// The serving certificate's pair name.
pub const SERVING_PAIR: &str = "kubelet-server";

fn err(path: &Path, e: impl std::fmt::Display) -> String {
    format!("{}: {e}", path.display())
}

/// One pair's files in one directory.
#[derive(Debug, Clone)]
pub struct FileStore {
    pub dir: PathBuf,
    pub pair: &'static str,
}

impl FileStore {
    pub fn new(dir: &Path, pair: &'static str) -> FileStore {
        FileStore {
            dir: dir.to_path_buf(),
            pair,
        }
    }

    /// `<dir>/<pair>-current.pem`: what kubeconfigs name.
    pub fn current_path(&self) -> PathBuf {
        self.dir.join(format!("{}-current.pem", self.pair))
    }

    fn updated_path(&self) -> PathBuf {
        self.dir.join(format!("{}-updated.pem", self.pair))
    }

    /// `<dir>/<pair>.key.tmp`.
    pub fn tmp_key_path(&self) -> PathBuf {
        self.dir.join(format!("{}.key.tmp", self.pair))
    }

    /// The current pair's first certificate, if there is one that parses.
    pub fn current_certificate(&self) -> Option<rustls::pki_types::CertificateDer<'static>> {
        first_certificate(&self.current_path())
    }

    /// The current certificate's validity, if there is a current pair that
    /// parses.
    pub fn current_validity(&self) -> Option<(SystemTime, SystemTime)> {
        validity(&self.current_certificate()?).ok()
    }

    fn ensure_dir(&self) -> Result<(), String> {
        std::fs::create_dir_all(&self.dir).map_err(|e| err(&self.dir, e))
    }

    /// The bootstrap's key: the one kept in `<pair>.key.tmp` by an earlier
    /// try (so that the CSR's name, and the CSR, are the same), else a new
    /// ECDSA P-256 key written there (0600).
    pub fn load_or_generate_tmp_key(&self) -> Result<rcgen::KeyPair, String> {
        let path = self.tmp_key_path();
        if let Ok(text) = std::fs::read_to_string(&path) {
            match pem::parse(&text)
                .map_err(|e| e.to_string())
                .and_then(|p| rcgen::KeyPair::try_from(p.contents()).map_err(|e| e.to_string()))
            {
                Ok(key) => return Ok(key),
                Err(e) => {
                    tracing::warn!(file = %path.display(), error = %e, "the bootstrap key does not load: a new one replaces it")
                }
            }
        }
        let key = rcgen::KeyPair::generate().map_err(|e| err(&path, e))?;
        self.ensure_dir()?;
        write_atomically(&path, key_pem(&key).as_bytes())?;
        Ok(key)
    }

    /// Removes `<pair>.key.tmp` (once its certificate is stored).
    pub fn remove_tmp_key(&self) {
        let path = self.tmp_key_path();
        if let Err(e) = std::fs::remove_file(&path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(file = %path.display(), error = %e, "removing the bootstrap key");
        }
    }

    /// Writes `<pair>-<timestamp>.pem` (0600): `cert_pem` then the key.
    /// It is not current yet: see [`FileStore::make_current`].
    pub fn write_pair(
        &self,
        cert_pem: &str,
        key: &rcgen::KeyPair,
        timestamp: &str,
    ) -> Result<PathBuf, String> {
        self.ensure_dir()?;
        let path = self.dir.join(format!("{}-{timestamp}.pem", self.pair));
        let mut text = cert_pem.trim_end().to_string();
        text.push('\n');
        text.push_str(&key_pem(key));
        write_atomically(&path, text.as_bytes())?;
        Ok(path)
    }

    /// Points `<pair>-current.pem` at `pair_file`: a new symlink
    /// `<pair>-updated.pem` renamed over it.
    pub fn make_current(&self, pair_file: &Path) -> Result<(), String> {
        let updated = self.updated_path();
        let _ = std::fs::remove_file(&updated);
        std::os::unix::fs::symlink(pair_file, &updated).map_err(|e| err(&updated, e))?;
        let current = self.current_path();
        std::fs::rename(&updated, &current).map_err(|e| err(&current, e))
    }
}

/// A key as PEM (PKCS#8, `PRIVATE KEY`).
pub fn key_pem(key: &rcgen::KeyPair) -> String {
    pem::encode(&pem::Pem::new("PRIVATE KEY", key.serialize_der()))
}

/// Writes `bytes` to `path` with mode 0600 through a temporary file in the
/// same directory, synced and renamed into place.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = path.with_file_name(format!(".{name}.writing"));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| err(&tmp, e))?;
    f.write_all(bytes).map_err(|e| err(&tmp, e))?;
    f.sync_all().map_err(|e| err(&tmp, e))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(|e| err(path, e))
}
