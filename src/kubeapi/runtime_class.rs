//! RuntimeClass lookup, as the kubelet's runtime class manager answers
//! `LookupRuntimeHandler` (`pkg/kubelet/runtimeclass`): a pod's
//! `runtimeClassName` names a RuntimeClass on the API server, whose
//! `handler` goes to RunPodSandbox as its runtime handler.
//!
//! Invariants: a pod without `runtimeClassName` gets the default handler
//! (empty) and costs no request; without an API server (standalone) there
//! is no manager and every pod gets the default handler, as a standalone
//! kubelet runs them. A class the API server does not have is an error
//! worded as the kubelet's lister words it; so is a failed read. Each
//! lookup is one GET (the kubelet keeps an informer; crilet creates a
//! sandbox rarely enough for a read each time).

use std::sync::Arc;

use super::client::MirrorClient;

/// The workers' handle on the RuntimeClasses.
#[derive(Clone)]
pub struct RuntimeClassLookup {
    client: Option<Arc<dyn MirrorClient>>,
}

impl std::fmt::Debug for RuntimeClassLookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mode = if self.client.is_some() {
            "api"
        } else {
            "standalone"
        };
        f.debug_tuple("RuntimeClassLookup").field(&mode).finish()
    }
}

impl RuntimeClassLookup {
    /// Without an API server: every pod gets the default handler.
    pub fn standalone() -> Self {
        RuntimeClassLookup { client: None }
    }

    /// Looks classes up on `client`'s API server.
    pub fn new(client: Arc<dyn MirrorClient>) -> Self {
        RuntimeClassLookup {
            client: Some(client),
        }
    }

    /// The runtime handler of `runtime_class_name`; `Err` says why there is
    /// none, in the kubelet's words.
    pub async fn handler(&self, runtime_class_name: Option<&str>) -> Result<String, String> {
        let (Some(name), Some(client)) =
            (runtime_class_name.filter(|n| !n.is_empty()), &self.client)
        else {
            return Ok(String::new());
        };
        match client.get_runtime_class(name).await {
            Ok(Some(class)) => Ok(class.handler),
            Ok(None) => Err(format!("runtimeclass.node.k8s.io {name:?} not found")),
            Err(e) => Err(format!("failed to lookup RuntimeClass {name}: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubeapi::fake::FakeMirrorClient;

    #[tokio::test]
    async fn a_class_gives_its_handler_and_a_missing_one_the_kubelet_s_error() {
        let fake = Arc::new(FakeMirrorClient::new());
        fake.add_runtime_class("sandboxed", "runsc");
        let lookup = RuntimeClassLookup::new(fake.clone());
        assert_eq!(lookup.handler(Some("sandboxed")).await, Ok("runsc".into()));
        assert_eq!(
            lookup.handler(Some("parity-missing")).await,
            Err("runtimeclass.node.k8s.io \"parity-missing\" not found".into())
        );
        fake.fail_next("get_runtime_class");
        let failed = lookup.handler(Some("sandboxed")).await.unwrap_err();
        assert!(
            failed.starts_with("failed to lookup RuntimeClass sandboxed: "),
            "{failed}"
        );
    }

    #[tokio::test]
    async fn no_class_or_no_api_server_is_the_default_handler_without_a_request() {
        let fake = Arc::new(FakeMirrorClient::new());
        let lookup = RuntimeClassLookup::new(fake.clone());
        assert_eq!(lookup.handler(None).await, Ok(String::new()));
        assert_eq!(lookup.handler(Some("")).await, Ok(String::new()));
        assert!(fake.calls().is_empty());
        let standalone = RuntimeClassLookup::standalone();
        assert_eq!(
            standalone.handler(Some("sandboxed")).await,
            Ok(String::new())
        );
    }
}
