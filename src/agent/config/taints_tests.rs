//! Tests of the registration taints: the flag's parser (the kubelet's
//! cases), the file's field, and flag over file over default.

use super::super::{ConfigError, ConfigFile, RunArgs, parse_config_file, resolve};
use super::*;

fn taint(key: &str, value: &str, effect: TaintEffect) -> NodeTaint {
    NodeTaint {
        key: key.into(),
        value: value.into(),
        effect,
    }
}

#[test]
fn the_flag_parses_as_the_kubelets() {
    use TaintEffect::*;
    let cases: &[(&str, Vec<NodeTaint>)] = &[
        ("", vec![]),
        ("foo=bar:NoSchedule", vec![taint("foo", "bar", NoSchedule)]),
        ("foo:NoExecute", vec![taint("foo", "", NoExecute)]),
        (
            "foo=:PreferNoSchedule",
            vec![taint("foo", "", PreferNoSchedule)],
        ),
        (
            "dedicated-for=user1:NoExecute,baz:NoSchedule,example.com/gpu=a.b_c-1:PreferNoSchedule",
            vec![
                taint("dedicated-for", "user1", NoExecute),
                taint("baz", "", NoSchedule),
                taint("example.com/gpu", "a.b_c-1", PreferNoSchedule),
            ],
        ),
        // The same key with two effects is two taints.
        (
            "k=v:NoSchedule,k=v:NoExecute",
            vec![taint("k", "v", NoSchedule), taint("k", "v", NoExecute)],
        ),
    ];
    for (flag, want) in cases {
        let got = parse_register_with_taints(flag).unwrap_or_else(|e| panic!("{flag:?}: {e}"));
        assert_eq!(&got.0, want, "{flag:?}");
    }
}

#[test]
fn bad_flag_values_say_what_is_wrong() {
    let cases = [
        ("foo", "no effect"),
        ("foo=bar", "no effect"),
        ("foo=bar:", "unknown taint effect \"\""),
        (
            "foo=bar:NoSchedulee",
            "unknown taint effect \"NoSchedulee\"",
        ),
        ("foo=bar:noschedule", "unknown taint effect"),
        ("foo=bar:NoSchedule:x", "more than one ':'"),
        ("foo=bar=baz:NoSchedule", "more than one '='"),
        ("=bar:NoSchedule", "key \"\": name part must be non-empty"),
        ("-foo:NoSchedule", "key \"-foo\""),
        ("Bad_Prefix/foo:NoSchedule", "prefix part"),
        ("foo=bar baz:NoSchedule", "value \"bar baz\""),
        (
            &format!("foo={}:NoSchedule", "v".repeat(64)),
            "no more than 63",
        ),
        ("foo:NoSchedule-", "trailing '-'"),
        ("a:NoSchedule,", "no effect"),
        ("a:NoSchedule, b:NoSchedule", "key \" b\""),
        ("a=1:NoSchedule,a=2:NoSchedule", "duplicated taints"),
    ];
    for (flag, want) in cases {
        let err = parse_register_with_taints(flag).expect_err(flag);
        assert!(err.contains(want), "{flag:?}: {err}");
    }
}

#[test]
fn a_bad_flag_fails_naming_the_flag() {
    #[derive(clap::Parser)]
    struct Cmd {
        #[command(flatten)]
        run: RunArgs,
    }
    let parse = |v: &str| {
        <Cmd as clap::Parser>::try_parse_from(["crilet", &format!("--register-with-taints={v}")])
    };
    let err = parse("foo=bar:Sometimes").err().unwrap().to_string();
    for want in [
        "--register-with-taints",
        "Sometimes",
        "unknown taint effect",
    ] {
        assert!(err.contains(want), "{want}: {err}");
    }
    // `--register-with-taints=` is an explicit empty list, not "unset".
    let empty = parse("").ok().unwrap().run.register_with_taints;
    assert_eq!(empty, Some(RegisterWithTaints(vec![])));
    let two = parse("a=1:NoSchedule,b:NoExecute").ok().unwrap();
    assert_eq!(two.run.register_with_taints.unwrap().0.len(), 2);
}

fn file(text: &str) -> ConfigFile {
    parse_config_file("k.yaml", text).unwrap()
}

fn resolved(args: &RunArgs, text: &str) -> Result<Vec<NodeTaint>, ConfigError> {
    resolve(args, &file(text), "k.yaml").map(|s| s.register_with_taints)
}

#[test]
fn default_is_static_pods_only_and_flag_beats_file() {
    use TaintEffect::*;
    let none = RunArgs::default();
    let ours = vec![taint("crilet.dev/static-pods-only", "true", NoSchedule)];
    assert_eq!(resolved(&none, "{}").unwrap(), ours);
    assert_eq!(default_register_with_taints(), ours);

    let text = "registerWithTaints:\n- key: a\n  value: \"1\"\n  effect: NoSchedule\n- key: example.com/b\n  effect: NoExecute\n";
    let from_file = vec![
        taint("a", "1", NoSchedule),
        taint("example.com/b", "", NoExecute),
    ];
    assert_eq!(resolved(&none, text).unwrap(), from_file);
    // An explicit empty list in the file: no taint.
    assert_eq!(resolved(&none, "registerWithTaints: []\n").unwrap(), []);

    let flag = |v: &str| RunArgs {
        register_with_taints: Some(parse_register_with_taints(v).unwrap()),
        ..Default::default()
    };
    assert_eq!(
        resolved(&flag("c:PreferNoSchedule"), text).unwrap(),
        [taint("c", "", PreferNoSchedule)]
    );
    // `--register-with-taints=` beats a file's list and the default.
    assert_eq!(resolved(&flag(""), text).unwrap(), []);
    assert_eq!(resolved(&flag(""), "{}").unwrap(), []);
}

#[test]
fn bad_file_entries_name_the_file_and_the_field() {
    let cases = [
        (
            "- key: a\n  effect: Sometimes\n",
            "registerWithTaints[0].effect: unknown taint effect \"Sometimes\"",
        ),
        ("- key: a\n", "registerWithTaints[0].effect: required"),
        (
            "- key: a\n  effect: \"\"\n",
            "registerWithTaints[0].effect: required",
        ),
        (
            "- key: a\n  effect: NoSchedule\n- effect: NoSchedule\n",
            "registerWithTaints[1]: key \"\"",
        ),
        (
            "- key: \"a b\"\n  effect: NoSchedule\n",
            "registerWithTaints[0]: key \"a b\"",
        ),
        (
            "- key: a\n  value: \"-x\"\n  effect: NoSchedule\n",
            "registerWithTaints[0]: value \"-x\"",
        ),
        (
            "- key: a\n  effect: NoExecute\n  timeAdded: \"2024-01-01T00:00:00Z\"\n",
            "registerWithTaints[0].timeAdded: may not be set",
        ),
        (
            "- key: a\n  effect: NoSchedule\n- key: a\n  value: x\n  effect: NoSchedule\n",
            "duplicated taints with the same key and effect: a:NoSchedule",
        ),
    ];
    for (list, want) in cases {
        let text = format!("registerWithTaints:\n{list}");
        let err = resolved(&RunArgs::default(), &text)
            .expect_err(&text)
            .to_string();
        assert!(err.starts_with("config file k.yaml: "), "{err}");
        assert!(err.contains(want), "{want}: {err}");
    }
    // An unknown field of an entry fails the parse, naming the file and it.
    let err = parse_config_file(
        "k.yaml",
        "registerWithTaints:\n- key: a\n  efect: NoSchedule\n",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("k.yaml") && err.contains("efect"), "{err}");
}

#[test]
fn taints_go_to_the_api_as_written() {
    let t = taint("a", "", TaintEffect::NoExecute).to_api();
    assert_eq!(
        serde_json::to_value(&t).unwrap(),
        serde_json::json!({"key": "a", "effect": "NoExecute"})
    );
    let t = default_register_with_taints()[0].to_api();
    assert_eq!(
        serde_json::to_value(&t).unwrap(),
        serde_json::json!({"key": "crilet.dev/static-pods-only", "value": "true", "effect": "NoSchedule"})
    );
}
