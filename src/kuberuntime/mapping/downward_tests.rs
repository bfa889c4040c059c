//! `resourceFieldRef` values and their bad inputs, and the image's user in
//! the security context: one row per rule, each failure naming its field.

use serde_json::{Value, json};

use super::*;

const UID: &str = "6f1c0ffee0ddf00d6f1c0ffee0ddf00d";

fn node() -> NodeContext {
    NodeContext {
        node_name: "node-1".into(),
        allocatable: NodeAllocatable {
            cpu_millicores: 3500,
            memory_bytes: 8 << 30,
            ephemeral_storage_bytes: None,
            pods: 110,
        },
        ..Default::default()
    }
}

/// A pod whose container "app" reads `selector` into X; "side" is a
/// second app container, "prep" an init container.
fn pod_reading(selector: Value, app_resources: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "d", "namespace": "default", "uid": UID},
        "spec": {
            "initContainers": [{"name": "prep", "resources": {"limits": {"memory": "64Mi"}}}],
            "containers": [
                {"name": "app", "resources": app_resources,
                 "env": [{"name": "X", "valueFrom": {"resourceFieldRef": selector}}]},
                {"name": "side", "resources": {"limits": {"cpu": "1500m", "hugepages-2Mi": "6Mi"}}}
            ]
        }
    }))
    .unwrap()
}

fn value_of(selector: Value, app_resources: Value) -> Result<String, MappingError> {
    let p = pod_reading(selector, app_resources);
    let app = &spec(&p).containers[0];
    let config = container_config(&node(), &p, app, &ContainerStart::default())?;
    Ok(config.envs[0].1.clone())
}

#[test]
fn resource_field_values() {
    let limited = json!({"limits": {"cpu": "1250m", "memory": "100Mi", "ephemeral-storage": "2G",
                                    "hugepages-1Gi": "2Gi"},
                         "requests": {"cpu": "10m", "memory": "1000"}});
    // (selector, the app container's resources, value)
    let rows = [
        (json!({"resource": "limits.cpu"}), limited.clone(), "2"),
        (
            json!({"resource": "limits.cpu", "divisor": "1m"}),
            limited.clone(),
            "1250",
        ),
        (
            json!({"resource": "limits.cpu", "divisor": "0"}),
            limited.clone(),
            "2",
        ),
        (json!({"resource": "requests.cpu"}), limited.clone(), "1"),
        (
            json!({"resource": "limits.memory"}),
            limited.clone(),
            "104857600",
        ),
        (
            json!({"resource": "limits.memory", "divisor": "1Mi"}),
            limited.clone(),
            "100",
        ),
        (
            json!({"resource": "limits.memory", "divisor": "1M"}),
            limited.clone(),
            "105",
        ),
        (
            json!({"resource": "requests.memory", "divisor": "1k"}),
            limited.clone(),
            "1",
        ),
        (
            json!({"resource": "limits.ephemeral-storage", "divisor": "1Gi"}),
            limited.clone(),
            "2",
        ),
        (
            json!({"resource": "limits.hugepages-1Gi", "divisor": "1Gi"}),
            limited.clone(),
            "2",
        ),
        (
            json!({"resource": "requests.hugepages-1Gi"}),
            limited.clone(),
            "0",
        ),
        // No limit: the Node's allocatable (none for ephemeral storage here).
        (
            json!({"resource": "limits.cpu", "divisor": "1m"}),
            json!({}),
            "3500",
        ),
        (
            json!({"resource": "limits.memory", "divisor": "1Gi"}),
            json!({}),
            "8",
        ),
        (
            json!({"resource": "limits.cpu"}),
            json!({"limits": {"cpu": "0"}}),
            "4",
        ),
        (
            json!({"resource": "limits.ephemeral-storage"}),
            json!({}),
            "0",
        ),
        (json!({"resource": "requests.memory"}), json!({}), "0"),
        // Another app container: its limit, or allocatable; an init
        // container: its own amount only.
        (
            json!({"containerName": "side", "resource": "limits.cpu", "divisor": "1m"}),
            json!({}),
            "1500",
        ),
        (
            json!({"containerName": "side", "resource": "limits.memory"}),
            json!({}),
            "8589934592",
        ),
        (
            json!({"containerName": "side", "resource": "limits.hugepages-2Mi", "divisor": "1Mi"}),
            json!({}),
            "6",
        ),
        (
            json!({"containerName": "prep", "resource": "limits.memory", "divisor": "1Mi"}),
            json!({}),
            "64",
        ),
        (
            json!({"containerName": "prep", "resource": "limits.cpu"}),
            json!({}),
            "0",
        ),
        (
            json!({"containerName": "app", "resource": "limits.cpu"}),
            json!({}),
            "4",
        ),
    ];
    for (selector, resources, want) in rows {
        let got = value_of(selector.clone(), resources.clone());
        assert_eq!(got.as_deref(), Ok(want), "{selector} with {resources}");
    }
}

#[test]
fn bad_resource_field_refs_name_the_field() {
    let base = "spec.containers{app}.env{X}.valueFrom.resourceFieldRef";
    // (selector, the app container's resources, the field named, the input named)
    let rows = [
        (
            json!({"containerName": "ghost", "resource": "limits.cpu"}),
            json!({}),
            "containerName",
            "ghost",
        ),
        (
            json!({"resource": "limits.pods"}),
            json!({}),
            "resource",
            "limits.pods",
        ),
        (json!({"resource": "cpu"}), json!({}), "resource", "cpu"),
        (
            json!({"resource": "limits.gpu"}),
            json!({}),
            "resource",
            "limits.gpu",
        ),
        (
            json!({"resource": "limits.cpu", "divisor": "one"}),
            json!({}),
            "divisor",
            "one",
        ),
        (
            json!({"resource": "limits.memory", "divisor": "-1Mi"}),
            json!({}),
            "divisor",
            "-1Mi",
        ),
    ];
    for (selector, resources, child, input) in rows {
        let err = value_of(selector.clone(), resources).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains(&format!("{base}.{child}")) && text.contains(input),
            "{selector}: {text}"
        );
        assert!(text.contains("d_default"), "names the pod: {text}");
    }
    // A bad limit of the container read names that container's field.
    let err = value_of(
        json!({"resource": "limits.memory"}),
        json!({"limits": {"memory": "lots"}}),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("spec.containers{app}.resources.limits.memory"),
        "{err}"
    );
}

/// The image's user, as ImageStatus gives it, in the container's security
/// context (the kubelet sent `run_as_user: 0` for busybox, which names no
/// user), and `runAsNonRoot` checked against it.
#[test]
fn the_image_user_fills_in_run_as_user() {
    let pod_with = |security: Value| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "u", "namespace": "default", "uid": UID},
            "spec": {"containers": [{"name": "app", "securityContext": security}]}
        }))
        .unwrap()
    };
    let security = |security: Value, user: Option<ImageUser>| {
        let p = pod_with(security);
        let start = ContainerStart {
            image_user: user,
            ..Default::default()
        };
        container_config(&node(), &p, &spec(&p).containers[0], &start)
            .map(|c| c.security.unwrap())
            .map(|s| (s.run_as_user, s.run_as_username))
    };
    // (securityContext, the image's user, run_as_user and run_as_username sent)
    type Row<'a> = (Value, Option<ImageUser<'a>>, (Option<i64>, &'a str));
    let rows: [Row; 8] = [
        (json!({}), None, (None, "")),
        (
            json!({}),
            Some(ImageUser::from_status(None, "")),
            (Some(0), ""),
        ),
        (
            json!({}),
            Some(ImageUser::from_status(Some(1000), "")),
            (Some(1000), ""),
        ),
        (
            json!({}),
            Some(ImageUser::from_status(Some(7), "app")),
            (Some(7), ""),
        ),
        (
            json!({}),
            Some(ImageUser::from_status(None, "nobody")),
            (None, "nobody"),
        ),
        (
            json!({"runAsUser": 5}),
            Some(ImageUser::Uid(0)),
            (Some(5), ""),
        ),
        (
            json!({"runAsNonRoot": true}),
            Some(ImageUser::Uid(1000)),
            (Some(1000), ""),
        ),
        (
            json!({"runAsNonRoot": true, "runAsUser": 9}),
            Some(ImageUser::Uid(0)),
            (Some(9), ""),
        ),
    ];
    for (sc, user, (uid, name)) in rows {
        let got = security(sc.clone(), user).unwrap();
        assert_eq!(got, (uid, name.to_string()), "{sc} with {user:?}");
    }
    let field = "spec.containers{app}.securityContext.runAsNonRoot";
    for user in [ImageUser::Uid(0), ImageUser::Name("nobody")] {
        let err = security(json!({"runAsNonRoot": true}), Some(user)).unwrap_err();
        assert!(err.to_string().contains(field), "{user:?}: {err}");
    }
}
