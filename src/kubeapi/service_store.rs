//! The Services the node knows of, as the kubelet's service informer keeps
//! them for the containers' service environment variables: a list, then
//! the changes the watch reports ([`ServiceStore::apply`]), and whether the
//! first list has come ([`SyncState`]). `service_watch` drives it.
//!
//! Invariant: pure (no I/O, no clock). It holds only Services with a
//! cluster IP (neither empty nor "None": a Service without one gives no
//! variables), trimmed to what the variables are made of (namespace, name,
//! cluster IP, ports), so a large cluster's Services cost the node little
//! memory. Once synced, it stays synced: a failed watch keeps the last
//! Services known, as an informer's cache does.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::client::{ServiceEvent, WatchEvent};

/// Whether the store has had its first list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncState {
    /// No list has come yet, and no attempt has failed: the API server is
    /// being asked.
    #[default]
    Listing,
    /// The first list failed (the API server is down or refuses): readers
    /// go on with what the store has (nothing) rather than wait for it.
    ListFailed,
    /// A list has come; the store follows the changes since.
    Synced,
}

/// The Services with a cluster IP, by namespace and name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServiceStore {
    services: BTreeMap<(String, String), Service>,
    state: SyncState,
}

impl ServiceStore {
    /// An empty store waiting for its first list.
    pub fn new() -> Self {
        Self::default()
    }

    /// The store of a node without an API server: no Services, and nothing
    /// to wait for (the standalone kubelet's empty, synced lister).
    pub fn standalone() -> Self {
        ServiceStore {
            services: BTreeMap::new(),
            state: SyncState::Synced,
        }
    }

    pub fn state(&self) -> SyncState {
        self.state
    }

    /// Every Service held, by namespace then name.
    pub fn services(&self) -> impl Iterator<Item = &Service> {
        self.services.values()
    }

    pub fn get(&self, namespace: &str, name: &str) -> Option<&Service> {
        self.services.get(&(namespace.to_owned(), name.to_owned()))
    }

    pub fn len(&self) -> usize {
        self.services.len()
    }

    pub fn is_empty(&self) -> bool {
        self.services.is_empty()
    }

    /// A list replaces everything (a Service deleted while the watch was
    /// down is gone); a change adds, replaces or removes one Service. A
    /// Service that lost its cluster IP (turned ExternalName) is removed.
    pub fn apply(&mut self, event: ServiceEvent) {
        match event {
            WatchEvent::Restarted(list) => {
                self.services = list.into_iter().filter_map(trimmed).collect();
                self.state = SyncState::Synced;
            }
            WatchEvent::Applied(service) => {
                let key = key(&service);
                match trimmed(service) {
                    Some((key, service)) => self.services.insert(key, service),
                    None => self.services.remove(&key),
                };
            }
            WatchEvent::Deleted(service) => {
                self.services.remove(&key(&service));
            }
        }
    }

    /// The watch reported an error: before the first list, readers stop
    /// waiting for one; after it, nothing changes (the watch resumes).
    pub fn watch_failed(&mut self) {
        if self.state == SyncState::Listing {
            self.state = SyncState::ListFailed;
        }
    }
}

fn key(service: &Service) -> (String, String) {
    let meta = &service.metadata;
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

/// Whether the Service has a cluster IP (the kubelet's `IsServiceIPSet`).
pub fn has_cluster_ip(service: &Service) -> bool {
    let ip = service.spec.as_ref().and_then(|s| s.cluster_ip.as_deref());
    !matches!(ip, None | Some("") | Some("None"))
}

/// The Service with only what its variables need, under its key; none
/// without a cluster IP.
fn trimmed(service: Service) -> Option<((String, String), Service)> {
    if !has_cluster_ip(&service) {
        return None;
    }
    let key = key(&service);
    let spec = service.spec.unwrap_or_default();
    let ports = spec.ports.map(|ports| {
        (ports.into_iter())
            .map(|p| ServicePort {
                name: p.name,
                port: p.port,
                protocol: p.protocol,
                ..Default::default()
            })
            .collect()
    });
    let slim = Service {
        metadata: ObjectMeta {
            namespace: Some(key.0.clone()),
            name: Some(key.1.clone()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            cluster_ip: spec.cluster_ip,
            ports,
            ..Default::default()
        }),
        status: None,
    };
    Some((key, slim))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(namespace: &str, name: &str, ip: &str) -> Service {
        serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": namespace, "name": name, "uid": "u",
                         "labels": {"app": name}, "resourceVersion": "7"},
            "spec": {"clusterIP": ip, "clusterIPs": [ip], "selector": {"app": name},
                     "type": "ClusterIP",
                     "ports": [{"name": "web", "port": 80, "protocol": "TCP", "targetPort": 8080}]},
            "status": {"loadBalancer": {}}
        }))
        .unwrap()
    }

    fn names(store: &ServiceStore) -> Vec<String> {
        store
            .services()
            .map(|s| format!("{}/{}", key(s).0, key(s).1))
            .collect()
    }

    #[test]
    fn a_list_then_changes_keep_the_services_with_a_cluster_ip() {
        let mut store = ServiceStore::new();
        assert_eq!(store.state(), SyncState::Listing);
        store.apply(WatchEvent::Restarted(vec![
            service("default", "kubernetes", "10.96.0.1"),
            service("web", "front", "10.96.0.10"),
            service("web", "headless", "None"),
            service("web", "external", ""),
        ]));
        assert_eq!(store.state(), SyncState::Synced);
        assert_eq!(names(&store), ["default/kubernetes", "web/front"]);

        store.apply(WatchEvent::Applied(service("web", "back", "10.96.0.11")));
        store.apply(WatchEvent::Applied(service("web", "front", "10.96.0.12")));
        assert_eq!(
            names(&store),
            ["default/kubernetes", "web/back", "web/front"]
        );
        let front = store.get("web", "front").unwrap();
        assert_eq!(
            front.spec.as_ref().unwrap().cluster_ip.as_deref(),
            Some("10.96.0.12")
        );

        // Deleted, or turned ExternalName (no cluster IP): gone.
        store.apply(WatchEvent::Deleted(service("web", "back", "10.96.0.11")));
        store.apply(WatchEvent::Applied(service("web", "front", "")));
        assert_eq!(names(&store), ["default/kubernetes"]);
        assert_eq!(store.len(), 1);
    }

    #[test]
    fn a_relist_drops_what_was_deleted_meanwhile() {
        let mut store = ServiceStore::new();
        store.apply(WatchEvent::Restarted(vec![
            service("a", "one", "10.96.0.2"),
            service("a", "two", "10.96.0.3"),
        ]));
        store.apply(WatchEvent::Restarted(vec![service(
            "a",
            "two",
            "10.96.0.3",
        )]));
        assert_eq!(names(&store), ["a/two"]);
        store.apply(WatchEvent::Restarted(vec![]));
        assert!(store.is_empty());
        assert_eq!(store.state(), SyncState::Synced);
    }

    #[test]
    fn only_what_the_variables_need_is_kept() {
        let mut store = ServiceStore::new();
        store.apply(WatchEvent::Restarted(vec![service(
            "a",
            "one",
            "10.96.0.2",
        )]));
        let want: Service = serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": "a", "name": "one"},
            "spec": {"clusterIP": "10.96.0.2",
                     "ports": [{"name": "web", "port": 80, "protocol": "TCP"}]}
        }))
        .unwrap();
        assert_eq!(store.get("a", "one"), Some(&want));
    }

    #[test]
    fn a_failure_before_the_first_list_stops_the_wait_but_not_after() {
        let mut store = ServiceStore::new();
        store.watch_failed();
        assert_eq!(store.state(), SyncState::ListFailed);
        store.apply(WatchEvent::Restarted(vec![service(
            "a",
            "one",
            "10.96.0.2",
        )]));
        assert_eq!(store.state(), SyncState::Synced);
        store.watch_failed();
        assert_eq!(store.state(), SyncState::Synced);
        assert_eq!(store.len(), 1, "a failed watch keeps what was known");

        let standalone = ServiceStore::standalone();
        assert_eq!(standalone.state(), SyncState::Synced);
        assert!(standalone.is_empty());
    }

    #[test]
    fn cluster_ip_set_means_neither_empty_nor_none() {
        assert!(has_cluster_ip(&service("a", "b", "10.0.0.1")));
        assert!(has_cluster_ip(&service("a", "b", "fd00::1")));
        assert!(!has_cluster_ip(&service("a", "b", "None")));
        assert!(!has_cluster_ip(&service("a", "b", "")));
        assert!(!has_cluster_ip(&Service::default()));
    }
}
