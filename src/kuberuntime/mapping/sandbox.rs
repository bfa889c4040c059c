//! The sandbox config for RunPodSandbox: metadata, hostname, DNS, ports,
//! namespaces, the pod cgroup, the pod-level resources and security. Part
//! of `mapping`.
//!
//! Invariant: pure, like the rest of the mapping.

use super::pod_resources::{sandbox_overhead, sandbox_resources};
use super::ports::port_mappings;
use super::*;

pub(super) const MAX_HOSTNAME_LEN: usize = 63;

pub(super) const MAX_DNS_SERVERS: usize = 3;

pub(super) const MAX_DNS_SEARCHES: usize = 32;

pub(super) const MAX_DNS_SEARCH_LEN: usize = 253;

pub(super) const MAX_DNS_SEARCH_LINE: usize = 2048;

pub fn sandbox_config(
    ctx: &NodeContext,
    pod: &Pod,
    attempt: u32,
) -> Result<PodSandboxConfig, MappingError> {
    let spec = spec(pod);
    // Refuse bad quantities now: QoS (and so the cgroup path) depends on them.
    for c in all_containers(pod) {
        amounts(pod, c)?;
    }
    let psc = spec.security_context.clone().unwrap_or_default();
    let labels = PodSandboxLabels {
        pod_name: name(pod).to_owned(),
        pod_namespace: namespace(pod).to_owned(),
        pod_uid: uid(pod).to_owned(),
        pod_labels: pod.metadata.labels.clone().unwrap_or_default(),
        pod_annotations: pod.metadata.annotations.clone().unwrap_or_default(),
    };
    // The pause container runs RuntimeDefault whatever the pod asks (so
    // that a pod can run a stricter profile than the sandbox needs); the
    // pod's own profile is still checked here, before anything is made.
    security_profile(
        ctx,
        pod,
        "",
        SECCOMP_PROFILE,
        None,
        seccomp_spec(&psc.seccomp_profile),
    )?;
    Ok(PodSandboxConfig {
        metadata: PodSandboxMetadata {
            name: name(pod).to_owned(),
            uid: uid(pod).to_owned(),
            namespace: namespace(pod).to_owned(),
            attempt,
        },
        // runc cannot set a hostname without its own UTS namespace.
        hostname: if spec.host_network == Some(true) {
            String::new()
        } else {
            pod_hostname(pod)
        },
        log_directory: pod_log_dir(ctx, pod).to_string_lossy().into_owned(),
        dns_config: Some(dns_config(ctx, pod)?),
        port_mappings: port_mappings(spec),
        labels: labels.to_labels(),
        annotations: labels.to_annotations(),
        cgroup_parent: pod_cgroup_parent(ctx, pod),
        security: SandboxSecurity {
            namespace_options: namespace_options(spec),
            privileged: all_containers(pod).any(is_privileged),
            run_as_user: psc.run_as_user,
            run_as_group: psc.run_as_group,
            readonly_rootfs: false,
            supplemental_groups: supplemental_groups(spec),
            seccomp: Some(SecurityProfile::RuntimeDefault),
        },
        sysctls: (psc.sysctls.into_iter().flatten())
            .map(|s| (s.name, s.value))
            .collect::<HashMap<_, _>>(),
        runtime_handler: String::new(),
        resources: Some(sandbox_resources(ctx, pod)?),
        overhead: Some(sandbox_overhead(ctx, pod)?),
    })
}

/// spec.hostname or the pod name; past 63 bytes it is cut and trailing
/// '-'/'.' dropped (the kubelet's rule, applied only when truncating).
pub(super) fn pod_hostname(pod: &Pod) -> String {
    let host = non_empty(&spec(pod).hostname).unwrap_or(name(pod));
    if host.len() <= MAX_HOSTNAME_LEN {
        return host.to_owned();
    }
    let cut = (0..=MAX_HOSTNAME_LEN)
        .rev()
        .find(|i| host.is_char_boundary(*i));
    host[..cut.unwrap_or(0)]
        .trim_end_matches(['-', '.'])
        .to_owned()
}

/// The pod's hostname and host domain for its hosts file (the kubelet's
/// `GeneratePodHostNameAndDomain`): `pod_hostname`, and with a subdomain
/// `<subdomain>.<namespace>.svc.<cluster domain>`, else empty. crilet has
/// no cluster DNS, so the cluster domain is empty, as for a kubelet started
/// without `--cluster-domain` (the name then ends in `svc.`).
pub fn host_name_and_domain(pod: &Pod) -> (String, String) {
    let domain = match non_empty(&spec(pod).subdomain) {
        Some(sub) => format!("{sub}.{}.svc.{CLUSTER_DOMAIN}", namespace(pod)),
        None => String::new(),
    };
    (pod_hostname(pod), domain)
}

/// The cluster domain: none, see [`host_name_and_domain`].
const CLUSTER_DOMAIN: &str = "";

/// dnsPolicy None starts empty; every other policy starts from the node's
/// resolver (see the module notes on ClusterFirst). spec.dnsConfig is then
/// appended without duplicates, its options overriding same-named ones in
/// place, and the kubelet's limits applied: 3 servers; 32 searches, none
/// over 253 chars, the search line at most 2048 chars (dropping from the end).
pub(super) fn dns_config(ctx: &NodeContext, pod: &Pod) -> Result<DnsConfig, MappingError> {
    let spec = spec(pod);
    let mut dns = match spec.dns_policy.as_deref().unwrap_or("ClusterFirst") {
        "None" => DnsConfig::default(),
        "Default" | "ClusterFirst" | "ClusterFirstWithHostNet" => ctx.host_dns.clone(),
        other => {
            let reason = "expected ClusterFirst, ClusterFirstWithHostNet, Default or None";
            return Err(invalid(pod, "spec.dnsPolicy", other, reason));
        }
    };
    let extra = spec.dns_config.clone().unwrap_or_default();
    let mut servers = std::mem::take(&mut dns.servers);
    servers.extend(extra.nameservers.into_iter().flatten());
    let mut searches = std::mem::take(&mut dns.searches);
    searches.extend(extra.searches.into_iter().flatten());
    dns.servers = dedup(servers);
    dns.servers.truncate(MAX_DNS_SERVERS);
    dns.searches = dedup(searches);
    dns.searches.truncate(MAX_DNS_SEARCHES);
    dns.searches.retain(|s| s.len() <= MAX_DNS_SEARCH_LEN);
    while dns.searches.join(" ").len() > MAX_DNS_SEARCH_LINE {
        dns.searches.pop();
    }
    for opt in extra.options.into_iter().flatten() {
        let Some(key) = opt.name else { continue };
        let text = match opt.value {
            Some(v) if !v.is_empty() => format!("{key}:{v}"),
            _ => key.clone(),
        };
        let same = |o: &String| o.split(':').next() == Some(key.as_str());
        match dns.options.iter_mut().find(|o| same(o)) {
            Some(slot) => *slot = text,
            None => dns.options.push(text),
        }
    }
    Ok(dns)
}

pub(super) fn dedup(items: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

pub(super) fn namespace_options(spec: &PodSpec) -> NamespaceOptions {
    let flag = |f: Option<bool>| f.unwrap_or(false);
    let host_pid = flag(spec.host_pid);
    let mut ns = NamespaceOptions::for_pod(flag(spec.host_network), host_pid, flag(spec.host_ipc));
    if !host_pid && flag(spec.share_process_namespace) {
        ns.pid = NamespaceMode::Pod;
    }
    ns
}

/// fsGroup first, then supplementalGroups, as the kubelet appends them.
pub(super) fn supplemental_groups(spec: &PodSpec) -> Vec<i64> {
    let Some(psc) = &spec.security_context else {
        return Vec::new();
    };
    let groups = psc.supplemental_groups.iter().flatten().copied();
    psc.fs_group.into_iter().chain(groups).collect()
}

/// Whether the pod's dnsPolicy asks for the cluster's DNS: ClusterFirst
/// (the default) off the host network, or ClusterFirstWithHostNet. crilet
/// has none to give, so such a pod gets the node's resolver, as the
/// kubelet without `--cluster-dns` gives it, with its MissingClusterDNS
/// events.
pub fn wants_cluster_dns(pod: &Pod) -> bool {
    let spec = spec(pod);
    match spec.dns_policy.as_deref().unwrap_or("ClusterFirst") {
        "ClusterFirstWithHostNet" => true,
        "ClusterFirst" => spec.host_network != Some(true),
        _ => false,
    }
}
