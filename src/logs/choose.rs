//! Which container's log a request means, from the pod's status (the
//! kubelet's `validateContainerLogStatus`). Invariant: a container that
//! never ran, or is waiting, has no log to give and is an error whose text
//! says why; an answer is always a bare runtime container ID.

use k8s_openapi::api::core::v1::{Pod, PodStatus};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChooseError {
    /// The container is not in the pod's spec (404).
    #[error("container {container:?} not found in pod {pod:?}")]
    NotFound { pod: String, container: String },
    /// The container exists but has no log to give (400, as the kubelet).
    #[error("{0}")]
    NoLog(String),
}

/// The container ID to read, given the pod (`name` for messages), its
/// status, and whether the previous instance is wanted.
pub fn choose_container(
    pod: &Pod,
    status: Option<&PodStatus>,
    container: &str,
    previous: bool,
) -> Result<String, ChooseError> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let spec = pod.spec.as_ref();
    let in_spec = spec.is_some_and(|s| {
        s.containers.iter().any(|c| c.name == container)
            || s.init_containers
                .iter()
                .flatten()
                .any(|c| c.name == container)
    });
    if !in_spec {
        return Err(ChooseError::NotFound {
            pod: name,
            container: container.to_string(),
        });
    }
    let no_log = |what: &str| {
        Err(ChooseError::NoLog(format!(
            "container {container:?} in pod {name:?} {what}"
        )))
    };
    let status = status.or(pod.status.as_ref());
    let found = status.and_then(|s| {
        s.container_statuses
            .iter()
            .flatten()
            .chain(s.init_container_statuses.iter().flatten())
            .find(|c| c.name == container)
    });
    let Some(c) = found else {
        return no_log("is not available");
    };
    let state = c.state.clone().unwrap_or_default();
    let last = c.last_state.as_ref().and_then(|s| s.terminated.as_ref());
    let last_id = last
        .and_then(|t| t.container_id.clone())
        .filter(|id| !id.is_empty());
    let id = if previous {
        match last_id {
            Some(id) => id,
            None => {
                return Err(ChooseError::NoLog(format!(
                    "previous terminated container {container:?} in pod {name:?} not found"
                )));
            }
        }
    } else if state.running.is_some() {
        c.container_id.clone().unwrap_or_default()
    } else if let Some(t) = &state.terminated {
        match t
            .container_id
            .clone()
            .filter(|id| !id.is_empty())
            .or(last_id)
        {
            Some(id) => id,
            None => return no_log("is terminated"),
        }
    } else if last.is_some() {
        match last_id {
            Some(id) => id,
            None => return no_log("is terminated"),
        }
    } else if let Some(w) = &state.waiting {
        let reason = w.reason.clone().unwrap_or_default();
        return match reason.as_str() {
            "ErrImagePull" => no_log("is waiting to start: image can't be pulled"),
            "ImagePullBackOff" => no_log("is waiting to start: trying and failing to pull image"),
            _ => no_log(&format!("is waiting to start: {reason}")),
        };
    } else {
        return no_log("is waiting to start - no logs yet");
    };
    match bare_id(&id) {
        "" => no_log("is waiting to start - no logs yet"),
        bare => Ok(bare.to_string()),
    }
}

/// The annotation naming the container `kubectl logs` and `kubectl exec`
/// pick when none is given.
pub const DEFAULT_CONTAINER_ANNOTATION: &str = "kubectl.kubernetes.io/default-container";

/// The container a request without one means, as kubectl picks it: the
/// annotated default if the pod has it, else the only container; else an
/// error listing the choices.
pub fn default_container(pod: &Pod) -> Result<String, ChooseError> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let names: Vec<&str> = pod
        .spec
        .as_ref()
        .map(|s| s.containers.iter().map(|c| c.name.as_str()).collect())
        .unwrap_or_default();
    let annotated = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DEFAULT_CONTAINER_ANNOTATION));
    if let Some(c) = annotated.filter(|c| names.contains(&c.as_str())) {
        return Ok(c.clone());
    }
    match names.as_slice() {
        [only] => Ok(only.to_string()),
        _ => Err(ChooseError::NoLog(format!(
            "a container name must be specified for pod {name:?}, choose one of: [{}]",
            names.join(" ")
        ))),
    }
}

/// `containerd://abc` → `abc`.
fn bare_id(id: &str) -> &str {
    id.split_once("://").map_or(id, |(_, bare)| bare)
}

#[cfg(test)]
#[path = "choose_tests.rs"]
mod tests;
