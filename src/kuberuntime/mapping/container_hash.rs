//! The container hash (`io.kubernetes.container.hash`), computed as kubelet
//! v1.32 computes it, so that the kubelet and crilet recognise each other's
//! containers: a node moves from one to the other without restarts.
//!
//! The kubelet (`HashContainer` in `pkg/kubelet/container/helpers.go`) hashes
//! only the container's name and image: it marshals `{"image":…,"name":…}`
//! with Go's `encoding/json` (a map, so keys sorted), feeds the bytes to
//! `hashutil.DeepHashObject`, which prints them with spew's `%#v` (the type,
//! then each byte in decimal), and takes FNV-32a of that text. The annotation
//! is the hash in lowercase hex, without leading zeros.
//!
//! Before this, crilet hashed the whole container spec (FNV-1a 64 over its
//! JSON): [`legacy_container_hash`]. A container an older crilet created
//! carries that hash, and is still the same container when it matches, so an
//! upgrade restarts nothing.
//!
//! Invariant: pure; the same name and image always give the same hash, on
//! any machine.

use std::fmt::Write;

use k8s_openapi::api::core::v1::Container;

use crate::units::fnv::{fnv1a_32, fnv1a_64};

/// The kubelet's hash of a container: FNV-32a over spew's `%#v` of the
/// JSON of its name and image.
pub fn container_hash(container: &Container) -> u64 {
    let image = container.image.as_deref().unwrap_or_default();
    kubelet_hash(&container.name, image)
}

/// The same, from the name and the image as the spec writes them.
pub fn kubelet_hash(name: &str, image: &str) -> u64 {
    let mut json = String::from("{\"image\":");
    go_json_string(image, &mut json);
    json.push_str(",\"name\":");
    go_json_string(name, &mut json);
    json.push('}');
    let mut spewed = String::with_capacity(json.len() * 4 + 12);
    spewed.push_str("([]uint8)[");
    for (i, b) in json.bytes().enumerate() {
        if i > 0 {
            spewed.push(' ');
        }
        let _ = write!(spewed, "{b}");
    }
    spewed.push(']');
    u64::from(fnv1a_32(spewed.as_bytes()))
}

/// The hash crilet wrote before it took the kubelet's: FNV-1a (64 bit) over
/// the container's JSON.
pub fn legacy_container_hash(container: &Container) -> u64 {
    fnv1a_64(&serde_json::to_vec(container).unwrap_or_default())
}

/// A string as Go's `encoding/json` writes it (Go 1.22 and later): `"` and
/// `\` escaped, `\n \r \t \b \f` by name, other control characters and
/// `< > &`, U+2028 and U+2029 as `\u00XX`/`\u20XX`.
fn go_json_string(text: &str, out: &mut String) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || matches!(c, '<' | '>' | '&' | '\u{2028}' | '\u{2029}') => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUSYBOX: &str = "docker.io/library/busybox:latest";

    /// What kubelet v1.32.13 wrote on this machine (the parity harness's
    /// runs on containerd 1.6 and CRI-O 1.32, 2026-12-06).
    #[test]
    fn the_kubelet_hashes_are_reproduced() {
        for (name, image, want) in [
            ("main", BUSYBOX, "85580d84"),
            ("a", BUSYBOX, "a71d1be"),
            ("big-init", BUSYBOX, "ac96b2ce"),
            ("web", BUSYBOX, "90b33c84"),
            ("second", BUSYBOX, "d62a1553"),
            ("main", "busybox", "b34e1a14"),
        ] {
            assert_eq!(
                format!("{:x}", kubelet_hash(name, image)),
                want,
                "{name} {image}"
            );
        }
    }

    #[test]
    fn only_the_name_and_the_image_count() {
        let mut c = Container {
            name: "main".into(),
            image: Some(BUSYBOX.into()),
            command: Some(vec!["sleep".into()]),
            ..Default::default()
        };
        let before = container_hash(&c);
        c.command = Some(vec!["true".into()]);
        assert_eq!(container_hash(&c), before);
        c.image = Some("busybox".into());
        assert_ne!(container_hash(&c), before);
        assert_ne!(legacy_container_hash(&c), container_hash(&c));
    }

    #[test]
    fn strings_are_escaped_as_go_escapes_them() {
        for (text, want) in [
            ("plain", r#""plain""#),
            ("a\"b\\c", r#""a\"b\\c""#),
            ("<&>", r#""\u003c\u0026\u003e""#),
            ("\n\r\t\u{8}\u{c}\u{1}", r#""\n\r\t\b\f\u0001""#),
            ("\u{2028}\u{2029}é", "\"\\u2028\\u2029é\""),
        ] {
            let mut out = String::new();
            go_json_string(text, &mut out);
            assert_eq!(out, want, "{text:?}");
        }
    }
}
