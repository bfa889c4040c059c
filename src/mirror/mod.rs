//! Mirror pods: the API server's copies of static pods. `decide` says what
//! to create, replace and delete (pure), `status_patch` what status to
//! write and how (pure: the kubelet's two-way status patch); the
//! driver (`manager`) does it through the API server adapter
//! (`kubeapi::MirrorClient`), and starts the Node's sync and the admission
//! of API pods beside it.
//!
//! Invariant: edits to a mirror are never applied to the static pod; status
//! is stored by static UID and written to the mirror.

pub mod decide;
pub mod manager;
pub mod status_patch;
