//! The host side of a pod's volumes (the kubelet's `pkg/volume`):
//! `hostpath`, the hostPath `type` checks made before the sandbox.
//!
//! Invariant: a check only reads the host; it creates what the type asks
//! for (DirectoryOrCreate, FileOrCreate) and nothing else.

pub mod hostpath;
