//! The kubeconfig the TLS bootstrap writes for the node, as the kubelet's
//! `writeKubeconfigFromBootstrapping`: the bootstrap kubeconfig's server and
//! certificate authority, and the client certificate and key both in
//! `<cert-dir>/kubelet-client-current.pem`.
//!
//! Invariant: pure (the caller reads and writes the files); every string
//! is written as a double-quoted YAML scalar, so no path or URL can change
//! the document's shape.

use std::path::Path;

/// Where the node's cluster is, as the bootstrap kubeconfig says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    pub server: String,
    /// `certificate-authority` (a file), if the bootstrap kubeconfig names one.
    pub certificate_authority: Option<String>,
    /// `certificate-authority-data` (base64, as in the bootstrap kubeconfig).
    pub certificate_authority_data: Option<String>,
    pub insecure_skip_tls_verify: bool,
}

fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// The node's kubeconfig text: cluster `default-cluster`, user
/// `default-auth`, context `default-context` in namespace `default`.
pub fn render(cluster: &Cluster, pair: &Path) -> String {
    let pair = quoted(&pair.display().to_string());
    let mut out = String::from(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: default-cluster\n  cluster:\n",
    );
    out.push_str(&format!("    server: {}\n", quoted(&cluster.server)));
    if let Some(ca) = &cluster.certificate_authority {
        out.push_str(&format!("    certificate-authority: {}\n", quoted(ca)));
    } else if let Some(data) = &cluster.certificate_authority_data {
        out.push_str(&format!(
            "    certificate-authority-data: {}\n",
            quoted(data)
        ));
    }
    if cluster.insecure_skip_tls_verify {
        out.push_str("    insecure-skip-tls-verify: true\n");
    }
    out.push_str("contexts:\n- name: default-context\n  context:\n    cluster: default-cluster\n    user: default-auth\n    namespace: default\n");
    out.push_str("current-context: default-context\n");
    out.push_str(&format!(
        "users:\n- name: default-auth\n  user:\n    client-certificate: {pair}\n    client-key: {pair}\n"
    ));
    out
}

/// The cluster of `kubeconfig`'s current context.
pub fn current_cluster(kubeconfig: &kube::config::Kubeconfig) -> Result<Cluster, String> {
    let context = kubeconfig
        .current_context
        .as_ref()
        .ok_or("no current-context")?;
    let cluster_name = kubeconfig
        .contexts
        .iter()
        .find(|c| &c.name == context)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone())
        .ok_or_else(|| format!("no context {context}"))?;
    let cluster = kubeconfig
        .clusters
        .iter()
        .find(|c| c.name == cluster_name)
        .and_then(|c| c.cluster.as_ref())
        .ok_or_else(|| format!("no cluster {cluster_name}"))?;
    Ok(Cluster {
        server: cluster
            .server
            .clone()
            .ok_or_else(|| format!("cluster {cluster_name} has no server"))?,
        certificate_authority: cluster.certificate_authority.clone(),
        certificate_authority_data: cluster.certificate_authority_data.clone(),
        insecure_skip_tls_verify: cluster.insecure_skip_tls_verify.unwrap_or(false),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster() -> Cluster {
        Cluster {
            server: "https://127.0.0.1:6443".into(),
            certificate_authority: None,
            certificate_authority_data: Some("Q0E=".into()),
            insecure_skip_tls_verify: false,
        }
    }

    #[test]
    fn what_the_bootstrap_writes_reads_back_as_the_kubelets() {
        let text = render(
            &cluster(),
            Path::new("/var/lib/crilet/pki/kubelet-client-current.pem"),
        );
        let k = kube::config::Kubeconfig::from_yaml(&text).unwrap();
        assert_eq!(k.current_context.as_deref(), Some("default-context"));
        let ctx = k.contexts[0].context.as_ref().unwrap();
        assert_eq!(
            (ctx.cluster.as_str(), ctx.user.as_deref()),
            ("default-cluster", Some("default-auth"))
        );
        assert_eq!(ctx.namespace.as_deref(), Some("default"));
        assert_eq!(current_cluster(&k).unwrap(), cluster());
        let user = k.auth_infos[0].auth_info.as_ref().unwrap();
        let pair = "/var/lib/crilet/pki/kubelet-client-current.pem";
        assert_eq!(user.client_certificate.as_deref(), Some(pair));
        assert_eq!(user.client_key.as_deref(), Some(pair));
    }

    #[test]
    fn odd_paths_and_urls_cannot_change_the_document() {
        let mut c = cluster();
        c.server = "https://h:1/\"\nusers: []".into();
        c.certificate_authority = Some("/ca dir/ca.crt: x".into());
        c.insecure_skip_tls_verify = true;
        let text = render(&c, Path::new("/p/with \"quote\"\n- and: list.pem"));
        let k = kube::config::Kubeconfig::from_yaml(&text).unwrap();
        let want = Cluster {
            certificate_authority_data: None,
            ..c
        };
        assert_eq!(
            current_cluster(&k).unwrap(),
            want,
            "the CA file wins over data, as the kubelet writes it"
        );
        let user = k.auth_infos[0].auth_info.as_ref().unwrap();
        assert_eq!(
            user.client_key.as_deref(),
            Some("/p/with \"quote\"\n- and: list.pem")
        );
    }

    #[test]
    fn a_kubeconfig_without_its_cluster_says_what_is_missing() {
        let k = kube::config::Kubeconfig::from_yaml(
            "apiVersion: v1\nkind: Config\ncurrent-context: x\ncontexts:\n- name: x\n  context:\n    cluster: gone\n",
        )
        .unwrap();
        assert_eq!(current_cluster(&k).unwrap_err(), "no cluster gone");
    }
}
