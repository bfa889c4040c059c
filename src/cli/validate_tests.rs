use super::*;
use crate::config::file::load_manifest;
use crate::config::merge::SourcePod;

const NODE: &str = "node-a";

fn pod(origin: &str, name: &str) -> SourcePod {
    let text = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: c\n    image: busybox\n"
    );
    load_manifest(origin, text.as_bytes(), NODE, jiff::Timestamp::UNIX_EPOCH).unwrap()
}

fn read(
    pods: Vec<SourcePod>,
    errors: Vec<ManifestError>,
    untrusted: Vec<ManifestError>,
) -> ManifestRead {
    ManifestRead {
        pods,
        errors,
        untrusted,
    }
}

#[test]
fn valid_refused_duplicate_and_untrusted_manifests() {
    let mut bad = ManifestError::new("/m/bad.yaml", Some("spec.dnsPolicy".into()), "Unsupported");
    bad.others.push(("spec.restartPolicy".into(), "no".into()));
    let reads = vec![
        read(
            vec![pod("/m/a.yaml", "web"), pod("/m/b.yaml", "web")],
            vec![bad],
            vec![
                ManifestError::new("/m", None, "the manifest directory is writable by others"),
                ManifestError::new("/m/a.yaml", None, "untrusted: writable by others"),
            ],
        ),
        read(vec![pod("-", "db")], Vec::new(), Vec::new()),
    ];
    let v = reports(reads);
    assert!(!v.valid);
    let by_origin = |o: &str| v.manifests.iter().find(|m| m.origin == o).unwrap();

    let a = by_origin("/m/a.yaml");
    assert!(a.valid);
    assert_eq!(a.pod.as_deref(), Some("web-node-a_default"));
    assert_eq!(a.uid.as_ref().map(String::len), Some(32));
    assert_eq!(a.warnings, ["untrusted: writable by others"]);

    let b = by_origin("/m/b.yaml");
    assert!(!b.valid && b.pod.is_none());
    assert_eq!(b.problems[0].field.as_deref(), Some("metadata.name"));
    assert!(
        b.problems[0].message.contains("also defined in /m/a.yaml"),
        "{b:?}"
    );

    let bad = by_origin("/m/bad.yaml");
    assert_eq!(bad.problems.len(), 2);
    let dir = by_origin("/m");
    assert!(dir.valid && dir.problems.is_empty() && dir.warnings.len() == 1);
    assert!(by_origin("-").valid);

    let text = render_text(&v);
    for line in [
        "/m/a.yaml: warning: untrusted: writable by others\n",
        "/m/a.yaml: ok: pod web-node-a_default (uid ",
        "/m/b.yaml: metadata.name: the pod web-node-a_default is also defined in /m/a.yaml",
        "/m/bad.yaml: spec.dnsPolicy: Unsupported\n",
        "/m/bad.yaml: spec.restartPolicy: no\n",
        "/m: warning: the manifest directory is writable by others\n",
        "4 manifest(s): 2 valid, 2 refused (3 problem(s))\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
}

#[test]
fn all_valid_is_valid_and_json_has_every_field() {
    let v = reports(vec![read(vec![pod("/m/a.yaml", "web")], vec![], vec![])]);
    assert!(v.valid);
    let json = serde_json::to_value(&v).unwrap();
    assert_eq!(json["valid"], true);
    assert_eq!(json["manifests"][0]["origin"], "/m/a.yaml");
    assert_eq!(json["manifests"][0]["pod"], "web-node-a_default");
    assert_eq!(json["manifests"][0]["problems"], serde_json::json!([]));
}

#[test]
fn nothing_to_read_is_valid_and_says_so() {
    let v = reports(vec![ManifestRead::default()]);
    assert!(v.valid);
    assert_eq!(
        render_text(&v),
        "0 manifest(s): 0 valid, 0 refused (0 problem(s))\n"
    );
}
