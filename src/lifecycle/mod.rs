//! Pod admission (the kubelet's `pkg/kubelet/lifecycle` admit handlers):
//! `admit` says which pods the API server binds to this node crilet rejects
//! (pure); `admission` writes those rejections; `resource_fit` says whether
//! a static pod fits the node's allocatable (pure; the sync loop refuses one
//! that does not).
//!
//! Invariant: a rejected pod is never run, and is written once.

pub(crate) mod admission;
pub mod admit;
pub mod resource_fit;
