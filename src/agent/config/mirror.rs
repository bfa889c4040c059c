//! Mirror-pod settings: the kubeconfig that lets crilet register the Node
//! and keep mirror pods on the API server. Invariant: it comes from the flag
//! only (the KubeletConfiguration has no such field); unset means standalone.

use std::path::PathBuf;

use super::RunArgs;

/// `--kubeconfig`, if given.
pub(super) fn resolve_kubeconfig(args: &RunArgs) -> Option<PathBuf> {
    args.kubeconfig.clone()
}
