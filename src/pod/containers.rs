//! A pod's containers by name, for requests that name one (`crilet exec`,
//! `crilet logs`): a named container must be one of the pod's, init and
//! ephemeral ones included, as the API server checks it. Which container an
//! unnamed request means is `logs::default_container`'s
//! choice, the one policy for both commands.
//! Pure: it reads the pod's spec only.

use super::{Pod, name, namespace};

/// A name the pod has no container of (NOT_FOUND, 404).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("container {container:?} is not in pod {pod}; choose one of: [{}]", .choices.join(" "))]
pub struct UnknownContainer {
    /// `namespace/name`.
    pub pod: String,
    pub container: String,
    pub choices: Vec<String>,
}

/// Every container name of the pod: init, regular, ephemeral, in that order.
pub fn container_names(pod: &Pod) -> Vec<String> {
    let Some(spec) = &pod.spec else {
        return Vec::new();
    };
    let init = spec.init_containers.iter().flatten().map(|c| &c.name);
    let regular = spec.containers.iter().map(|c| &c.name);
    let ephemeral = spec.ephemeral_containers.iter().flatten().map(|c| &c.name);
    init.chain(regular).chain(ephemeral).cloned().collect()
}

/// `container` if the pod has it; otherwise an error listing the choices.
pub fn require_container(pod: &Pod, container: &str) -> Result<(), UnknownContainer> {
    let choices = container_names(pod);
    if choices.iter().any(|c| c == container) {
        return Ok(());
    }
    Err(UnknownContainer {
        pod: format!("{}/{}", namespace(pod), name(pod)),
        container: container.to_owned(),
        choices,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, EphemeralContainer, PodSpec};
    use proptest::prelude::*;

    fn pod(init: &[&str], regular: &[&str], ephemeral: &[&str]) -> Pod {
        let c = |n: &&str| Container {
            name: (*n).to_owned(),
            ..Default::default()
        };
        let mut p = Pod {
            spec: Some(PodSpec {
                init_containers: (!init.is_empty()).then(|| init.iter().map(c).collect()),
                containers: regular.iter().map(c).collect(),
                ephemeral_containers: (!ephemeral.is_empty()).then(|| {
                    ephemeral
                        .iter()
                        .map(|n| EphemeralContainer {
                            name: (*n).to_owned(),
                            ..Default::default()
                        })
                        .collect()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        p.metadata.name = Some("web-node1".into());
        p.metadata.namespace = Some("default".into());
        p
    }

    #[test]
    fn every_kind_of_container_may_be_named() {
        let p = pod(&["setup"], &["app", "side"], &["debugger"]);
        assert_eq!(container_names(&p), ["setup", "app", "side", "debugger"]);
        for c in ["setup", "app", "side", "debugger"] {
            assert_eq!(require_container(&p, c), Ok(()), "{c}");
        }
    }

    #[test]
    fn an_unknown_name_is_refused_with_the_choices() {
        let p = pod(&["setup"], &["app"], &[]);
        let e = require_container(&p, "nope").unwrap_err();
        assert_eq!(
            e.to_string(),
            "container \"nope\" is not in pod default/web-node1; choose one of: [setup app]"
        );
        for bad in ["", "APP", "app ", "setu"] {
            assert!(require_container(&p, bad).is_err(), "{bad:?}");
        }
        let mut no_spec = p.clone();
        no_spec.spec = None;
        assert!(container_names(&no_spec).is_empty());
        let e = require_container(&no_spec, "app").unwrap_err();
        assert!(e.to_string().ends_with("choose one of: []"), "{e}");
    }

    proptest! {
        /// A name is accepted exactly when it is one of the pod's.
        #[test]
        fn accepted_exactly_when_present(
            regular in proptest::collection::vec("[a-c]{1,2}", 0..4),
            init in proptest::collection::vec("[a-c]{1,2}", 0..2),
            wanted in "[a-c]{0,2}",
        ) {
            let regular: Vec<&str> = regular.iter().map(String::as_str).collect();
            let init: Vec<&str> = init.iter().map(String::as_str).collect();
            let p = pod(&init, &regular, &[]);
            let present = regular.contains(&wanted.as_str()) || init.contains(&wanted.as_str());
            prop_assert_eq!(require_container(&p, &wanted).is_ok(), present);
        }
    }
}
