//! Which container of a pod a debugging request means (`crilet logs`,
//! `crilet exec`): the one named, else the pod's only container, else the
//! one its `kubectl.kubernetes.io/default-container` annotation names. The
//! API server validates the same way (a named container must exist; no
//! name with several containers is an error listing them) and kubectl
//! reads the annotation.
//! Pure: it reads the pod's spec and annotations only.

use super::{Pod, annotation, name, namespace};

/// kubectl's annotation naming the container to use when none is given.
pub const DEFAULT_CONTAINER_ANNOTATION: &str = "kubectl.kubernetes.io/default-container";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContainerChoiceError {
    /// A name was given and the pod has no such container (NOT_FOUND).
    #[error("container {container:?} is not in pod {pod}; choose one of: [{}]", .choices.join(" "))]
    NotFound {
        pod: String,
        container: String,
        choices: Vec<String>,
    },
    /// No name, and nothing to default to (INVALID_ARGUMENT).
    #[error("a container name must be specified for pod {pod}, choose one of: [{}]", .choices.join(" "))]
    NameRequired { pod: String, choices: Vec<String> },
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

/// The container `wanted` names (when given and not blank), or the default.
pub fn choose_container(pod: &Pod, wanted: Option<&str>) -> Result<String, ContainerChoiceError> {
    let who = format!("{}/{}", namespace(pod), name(pod));
    let choices = container_names(pod);
    if let Some(wanted) = wanted.map(str::trim).filter(|w| !w.is_empty()) {
        return if choices.iter().any(|c| c == wanted) {
            Ok(wanted.to_owned())
        } else {
            Err(ContainerChoiceError::NotFound {
                pod: who,
                container: wanted.to_owned(),
                choices,
            })
        };
    }
    let regular: Vec<&String> = pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter().map(|c| &c.name))
        .collect();
    if let [only] = regular.as_slice() {
        return Ok((*only).clone());
    }
    match annotation(pod, DEFAULT_CONTAINER_ANNOTATION) {
        Some(d) if choices.iter().any(|c| c == d) => Ok(d.to_owned()),
        _ => Err(ContainerChoiceError::NameRequired { pod: who, choices }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, EphemeralContainer, PodSpec};
    use proptest::prelude::*;

    fn pod(init: &[&str], regular: &[&str], annotation: Option<&str>) -> Pod {
        let c = |n: &&str| Container {
            name: (*n).to_owned(),
            ..Default::default()
        };
        let mut p = Pod {
            spec: Some(PodSpec {
                init_containers: (!init.is_empty()).then(|| init.iter().map(c).collect()),
                containers: regular.iter().map(c).collect(),
                ..Default::default()
            }),
            ..Default::default()
        };
        p.metadata.name = Some("web-node1".into());
        p.metadata.namespace = Some("default".into());
        p.metadata.annotations = annotation.map(|a| {
            [(DEFAULT_CONTAINER_ANNOTATION.to_owned(), a.to_owned())]
                .into_iter()
                .collect()
        });
        p
    }

    #[test]
    fn choices() {
        use ContainerChoiceError as E;
        let required = |choices: &[&str]| E::NameRequired {
            pod: "default/web-node1".into(),
            choices: choices.iter().map(|s| s.to_string()).collect(),
        };
        let missing = |name: &str, choices: &[&str]| E::NotFound {
            pod: "default/web-node1".into(),
            container: name.into(),
            choices: choices.iter().map(|s| s.to_string()).collect(),
        };
        #[rustfmt::skip]
        let cases: &[(&[&str], &[&str], Option<&str>, Option<&str>, Result<&str, E>)] = &[
            // (init, regular, annotation, wanted) => chosen
            (&[], &["app"], None, None, Ok("app")),
            (&[], &["app"], None, Some(""), Ok("app")),
            (&[], &["app"], None, Some("  "), Ok("app")),
            (&["setup"], &["app"], None, None, Ok("app")),
            (&[], &["app"], Some("other"), None, Ok("app")),
            (&[], &["app", "side"], Some("side"), None, Ok("side")),
            (&["setup"], &["app", "side"], Some("setup"), None, Ok("setup")),
            (&[], &["app", "side"], None, Some("side"), Ok("side")),
            (&["setup"], &["app"], None, Some("setup"), Ok("setup")),
            (&[], &["app", "side"], Some("gone"), None, Err(required(&["app", "side"]))),
            (&[], &["app", "side"], None, None, Err(required(&["app", "side"]))),
            (&["setup"], &["app", "side"], None, None, Err(required(&["setup", "app", "side"]))),
            (&[], &[], None, None, Err(required(&[]))),
            (&[], &["app"], None, Some("nope"), Err(missing("nope", &["app"]))),
            (&[], &["app", "side"], Some("app"), Some("nope"), Err(missing("nope", &["app", "side"]))),
        ];
        for (init, regular, ann, wanted, want) in cases {
            let got = choose_container(&pod(init, regular, *ann), *wanted);
            let want = want.clone().map(str::to_owned);
            assert_eq!(got, want, "{init:?} {regular:?} {ann:?} {wanted:?}");
        }
    }

    #[test]
    fn errors_name_the_pod_the_container_and_the_choices() {
        let p = pod(&[], &["app", "side"], None);
        let e = choose_container(&p, None).unwrap_err().to_string();
        assert_eq!(
            e,
            "a container name must be specified for pod default/web-node1, choose one of: [app side]"
        );
        let e = choose_container(&p, Some("nope")).unwrap_err().to_string();
        assert_eq!(
            e,
            "container \"nope\" is not in pod default/web-node1; choose one of: [app side]"
        );
    }

    #[test]
    fn ephemeral_containers_are_choices_and_a_pod_without_spec_has_none() {
        let mut p = pod(&[], &["app", "side"], None);
        p.spec.as_mut().unwrap().ephemeral_containers = Some(vec![EphemeralContainer {
            name: "debugger".into(),
            ..Default::default()
        }]);
        assert_eq!(container_names(&p), ["app", "side", "debugger"]);
        assert_eq!(choose_container(&p, Some("debugger")).unwrap(), "debugger");
        p.spec = None;
        assert!(container_names(&p).is_empty());
        assert!(matches!(
            choose_container(&p, None),
            Err(ContainerChoiceError::NameRequired { .. })
        ));
    }

    proptest! {
        /// Whatever the pod, a chosen container is one of its containers,
        /// and a named one is chosen exactly when it exists.
        #[test]
        fn a_choice_is_always_a_container_of_the_pod(
            regular in proptest::collection::vec("[a-c]{1,2}", 0..4),
            ann in proptest::option::of("[a-c]{1,2}"),
            wanted in proptest::option::of("[a-c]{0,2}"),
        ) {
            let regular: Vec<&str> = regular.iter().map(String::as_str).collect();
            let p = pod(&[], &regular, ann.as_deref());
            match choose_container(&p, wanted.as_deref()) {
                Ok(c) => {
                    prop_assert!(regular.contains(&c.as_str()));
                    if let Some(w) = wanted.as_deref().filter(|w| !w.is_empty()) {
                        prop_assert_eq!(c.as_str(), w);
                    }
                }
                Err(ContainerChoiceError::NotFound { container, .. }) => {
                    prop_assert!(!regular.contains(&container.as_str()));
                }
                Err(ContainerChoiceError::NameRequired { .. }) => {
                    prop_assert!(wanted.as_deref().is_none_or(str::is_empty));
                    prop_assert!(regular.len() != 1);
                }
            }
        }
    }
}
