//! The brief reading against prost's whole decoding of the same bytes.

use std::collections::HashMap;

use proptest::prelude::*;
use prost::Message;

use super::super::convert::{container_from, sandbox_from};
use super::*;
use crate::proto::runtime::v1 as pb;

const KEYS: BriefKeys = BriefKeys {
    label: "io.kubernetes.pod.uid",
    annotation: "kubernetes.io/config.source",
};

fn map() -> impl Strategy<Value = HashMap<String, String>> {
    let key = prop_oneof![
        Just(KEYS.label.to_string()),
        Just(KEYS.annotation.to_string()),
        "[a-z./]{0,12}",
    ];
    prop::collection::hash_map(key, "\\PC{0,8}", 0..6)
}

fn state() -> impl Strategy<Value = i32> {
    prop_oneof![0..4i32, Just(-1), Just(7), Just(i32::MAX)]
}

fn sandbox() -> impl Strategy<Value = pb::PodSandbox> {
    (
        ("\\PC{0,8}", "[a-z]{0,6}", "[a-z]{0,6}"),
        state(),
        map(),
        map(),
    )
        .prop_map(
            |((id, name, namespace), state, labels, annotations)| pb::PodSandbox {
                id,
                metadata: Some(pb::PodSandboxMetadata {
                    name,
                    uid: "u".into(),
                    namespace,
                    attempt: 3,
                }),
                state,
                created_at: 42,
                labels,
                annotations,
                runtime_handler: "runc".into(),
            },
        )
}

fn container() -> impl Strategy<Value = pb::Container> {
    ("\\PC{0,8}", state(), map(), map()).prop_map(|(id, state, labels, annotations)| {
        pb::Container {
            id,
            pod_sandbox_id: "sb".into(),
            metadata: Some(pb::ContainerMetadata {
                name: "c".into(),
                attempt: 1,
            }),
            image: Some(pb::ImageSpec {
                image: "busybox".into(),
                ..Default::default()
            }),
            image_ref: "sha256:00".into(),
            state,
            created_at: 7,
            labels,
            annotations,
            ..Default::default()
        }
    })
}

fn decoded_sandboxes(bytes: &[u8]) -> Option<Vec<SandboxBrief>> {
    let r = pb::ListPodSandboxResponse::decode(bytes).ok()?;
    Some(
        r.items
            .into_iter()
            .map(|s| SandboxBrief::of(&sandbox_from(s), KEYS))
            .collect(),
    )
}

fn decoded_containers(bytes: &[u8]) -> Option<Vec<ContainerBrief>> {
    let r = pb::ListContainersResponse::decode(bytes).ok()?;
    Some(
        (r.containers.into_iter())
            .map(|c| ContainerBrief::of(&container_from(c), KEYS))
            .collect(),
    )
}

proptest! {
    #[test]
    fn sandboxes_in_brief_are_those_decoded(items in prop::collection::vec(sandbox(), 0..5), cut in any::<prop::sample::Index>()) {
        let bytes = pb::ListPodSandboxResponse { items }.encode_to_vec();
        prop_assert_eq!(sandboxes(&bytes, KEYS).ok(), decoded_sandboxes(&bytes));
        // Cut anywhere: an error exactly where prost errs.
        let cut = &bytes[..cut.index(bytes.len() + 1)];
        prop_assert_eq!(sandboxes(cut, KEYS).ok(), decoded_sandboxes(cut));
    }

    #[test]
    fn containers_in_brief_are_those_decoded(containers_ in prop::collection::vec(container(), 0..5), cut in any::<prop::sample::Index>()) {
        let bytes = pb::ListContainersResponse { containers: containers_ }.encode_to_vec();
        prop_assert_eq!(containers(&bytes, KEYS).ok(), decoded_containers(&bytes));
        let cut = &bytes[..cut.index(bytes.len() + 1)];
        prop_assert_eq!(containers(cut, KEYS).ok(), decoded_containers(cut));
    }
}

#[test]
fn an_empty_reply_has_no_objects_and_defaults_are_off_the_wire() {
    assert_eq!(containers(b"", KEYS).unwrap(), []);
    // A container with every field at its default is an empty message:
    // state 0 is Created, a sandbox's 0 is Ready.
    let bytes = pb::ListContainersResponse {
        containers: vec![pb::Container::default()],
    }
    .encode_to_vec();
    let got = containers(&bytes, KEYS).unwrap();
    assert_eq!(got[0].state, ContainerState::Created);
    assert_eq!(got, decoded_containers(&bytes).unwrap());
    let bytes = pb::ListPodSandboxResponse {
        items: vec![pb::PodSandbox::default()],
    }
    .encode_to_vec();
    assert_eq!(
        sandboxes(&bytes, KEYS).unwrap()[0].state,
        PodSandboxState::Ready
    );
}

#[test]
fn a_key_set_twice_keeps_its_last_value_as_prost_does() {
    // Two encodings of one message concatenated are one message merged:
    // the map holds both entries, the later value winning.
    let one = |v: &str| pb::Container {
        id: "c1".into(),
        labels: HashMap::from([(KEYS.label.to_string(), v.to_string())]),
        ..Default::default()
    };
    let mut item = one("first").encode_to_vec();
    item.extend(one("second").encode_to_vec());
    let mut reply = Vec::new();
    prost::encoding::bytes::encode(1, &item, &mut reply);
    let got = containers(&reply, KEYS).unwrap();
    assert_eq!(got[0].label.as_deref(), Some("second"));
    assert_eq!(got, decoded_containers(&reply).unwrap());
}

#[test]
fn bad_wire_is_an_error_naming_what_is_wrong() {
    let cases: [(&[u8], &str); 4] = [
        // Field 1, length 5, 2 bytes left.
        (b"\x0a\x05ab", "runs past the end"),
        // A group (wire type 3).
        (b"\x0b", "wire type 3"),
        // Field number 0.
        (b"\x00", "invalid field key"),
        // A container whose ID is not UTF-8.
        (b"\x0a\x04\x0a\x02\xff\xfe", "not UTF-8"),
    ];
    for (bytes, want) in cases {
        let err = containers(bytes, KEYS).unwrap_err().to_string();
        assert!(err.contains(want), "{bytes:?}: {err}");
        assert!(decoded_containers(bytes).is_none(), "{bytes:?}");
    }
}
