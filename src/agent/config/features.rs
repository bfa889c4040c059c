//! Feature gates, as the kubelet takes them: `--feature-gates
//! Name=true,Other=false` over the file's `featureGates` map over each
//! gate's default. Invariant: only gates crilet knows are accepted; any
//! other name is an error, as in the kubelet.

use std::collections::BTreeMap;

use super::{ConfigError, ConfigFile, RunArgs};

/// Follow the runtime's container events (GetContainerEvents) where it
/// serves them, relisting only as a safety net. On by default (the kubelet
/// still defaults it off), except on runtimes with a known bug with
/// subscribers (`pleg::event_choice`: CRI-O before 1.33);
/// `EventedPLEG=false` relists every second.
pub const EVENTED_PLEG: &str = "EventedPLEG";

/// Every gate crilet knows. A gate left unset is `None` in the settings,
/// and its consumer applies the default (EventedPLEG's: `pleg::event_choice`,
/// on unless the runtime has a known bug with subscribers).
const KNOWN: &[&str] = &[EVENTED_PLEG];

/// The value of `--feature-gates`: gate name → enabled.
pub type FeatureGates = BTreeMap<String, bool>;

/// Parses `Name=true,Other=false` (the clap value parser of the flag).
pub fn parse_feature_gates(value: &str) -> Result<FeatureGates, String> {
    let mut gates = FeatureGates::new();
    for pair in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, enabled) = pair
            .split_once('=')
            .ok_or_else(|| format!("{pair:?}: expected Name=true or Name=false"))?;
        let enabled = match enabled.trim() {
            "true" => true,
            "false" => false,
            other => return Err(format!("{name}: {other:?} is not true or false")),
        };
        check_known(name.trim())?;
        gates.insert(name.trim().to_string(), enabled);
    }
    Ok(gates)
}

fn check_known(name: &str) -> Result<(), String> {
    if KNOWN.contains(&name) {
        return Ok(());
    }
    Err(format!(
        "unrecognized feature gate: {name} (crilet knows {})",
        KNOWN.join(", ")
    ))
}

/// `gate` as the flag or the file sets it (the flag first); `None` when
/// neither does, for the caller to apply the default (crilet's choice of
/// the default may depend on the runtime, see `pleg::event_choice`).
pub(super) fn resolve_gate(
    args: &RunArgs,
    file: &ConfigFile,
    origin: &str,
    gate: &str,
) -> Result<Option<bool>, ConfigError> {
    for name in file.feature_gates.iter().flat_map(|g| g.keys()) {
        check_known(name).map_err(|message| ConfigError::File {
            path: origin.to_string(),
            message: format!("featureGates: {message}"),
        })?;
    }
    let from = |gates: Option<&FeatureGates>| gates.and_then(|g| g.get(gate).copied());
    Ok(from(args.feature_gates.as_ref()).or(from(file.feature_gates.as_ref())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::config::{parse_config_file, resolve};

    #[test]
    fn evented_pleg_is_flag_over_file_over_unset() {
        let off = parse_config_file("k.yaml", "featureGates:\n  EventedPLEG: false\n").unwrap();
        let flag = |v: &str| RunArgs {
            feature_gates: Some(parse_feature_gates(v).unwrap()),
            ..Default::default()
        };
        // Unset (None) is left to the runtime's choice (pleg::event_choice).
        let cases = [
            (RunArgs::default(), ConfigFile::default(), None),
            (RunArgs::default(), off.clone(), Some(false)),
            (flag("EventedPLEG=true"), off.clone(), Some(true)),
            (flag("EventedPLEG=true"), ConfigFile::default(), Some(true)),
            (
                flag("EventedPLEG=false"),
                ConfigFile::default(),
                Some(false),
            ),
            (
                flag(" EventedPLEG = false ,"),
                ConfigFile::default(),
                Some(false),
            ),
            // A flag naming other gates leaves this one to the file.
            (flag(""), off, Some(false)),
            (flag(""), ConfigFile::default(), None),
        ];
        for (i, (args, file, want)) in cases.into_iter().enumerate() {
            let s = resolve(&args, &file, "k.yaml").unwrap();
            assert_eq!(s.evented_pleg, want, "case {i}");
        }
    }

    #[test]
    fn unknown_gates_and_bad_values_are_errors() {
        for (value, want) in [
            (
                "Foo=true",
                "unrecognized feature gate: Foo (crilet knows EventedPLEG)",
            ),
            ("EventedPLEG", "expected Name=true or Name=false"),
            ("EventedPLEG=yes", "\"yes\" is not true or false"),
        ] {
            let err = parse_feature_gates(value).unwrap_err();
            assert!(err.contains(want), "{value}: {err}");
        }
        let f = parse_config_file("k.yaml", "featureGates:\n  Foo: true\n").unwrap();
        let err = resolve(&RunArgs::default(), &f, "k.yaml")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("k.yaml") && err.contains("featureGates: unrecognized feature gate: Foo"),
            "{err}"
        );
    }
}
