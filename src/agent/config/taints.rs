//! The taints the Node registers with: `--register-with-taints` (the
//! kubelet's `key=value:Effect,key2:Effect` form) over the file's
//! `registerWithTaints` (a list of `{key, value, effect}`) over crilet's
//! default, one `NoSchedule` taint saying the node runs static pods only.
//!
//! Invariant: the resolved list is one the API server accepts on a Node
//! create: every key a qualified name, every value a label value, every
//! effect one of the three, no two with the same key and effect. An empty
//! list (`--register-with-taints=`, `registerWithTaints: []`) is no taint;
//! a bad entry fails the start, naming the flag or the file and field.
//! The taints go on the Node only when it is created: NodeRestriction
//! forbids a node changing its own taints afterwards.

use std::collections::BTreeSet;

use serde::Deserialize;

use super::{ConfigError, ConfigFile, RunArgs};
use crate::pod::field_validation::{label_value_problem, qualified_name_problem};

/// The key of crilet's default taint, in a domain crilet owns.
pub const STATIC_PODS_ONLY_TAINT_KEY: &str = "crilet.dev/static-pods-only";
/// Its value.
pub const STATIC_PODS_ONLY_TAINT_VALUE: &str = "true";

/// What a taint keeps off the node (the API's `TaintEffect`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

impl std::str::FromStr for TaintEffect {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "NoSchedule" => Ok(TaintEffect::NoSchedule),
            "PreferNoSchedule" => Ok(TaintEffect::PreferNoSchedule),
            "NoExecute" => Ok(TaintEffect::NoExecute),
            other => Err(format!(
                "unknown taint effect {other:?} (NoSchedule, PreferNoSchedule or NoExecute)"
            )),
        }
    }
}

/// One registration taint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeTaint {
    pub key: String,
    /// Empty: no value.
    pub value: String,
    pub effect: TaintEffect,
}

impl NodeTaint {
    /// As the API's Taint (no `timeAdded`: the API server sets it for
    /// `NoExecute`).
    pub fn to_api(&self) -> k8s_openapi::api::core::v1::Taint {
        k8s_openapi::api::core::v1::Taint {
            key: self.key.clone(),
            value: (!self.value.is_empty()).then(|| self.value.clone()),
            effect: self.effect.as_str().to_string(),
            time_added: None,
        }
    }
}

/// crilet's taint when neither the flag nor the file names any:
/// `crilet.dev/static-pods-only=true:NoSchedule`.
pub fn default_register_with_taints() -> Vec<NodeTaint> {
    vec![NodeTaint {
        key: STATIC_PODS_ONLY_TAINT_KEY.to_string(),
        value: STATIC_PODS_ONLY_TAINT_VALUE.to_string(),
        effect: TaintEffect::NoSchedule,
    }]
}

/// The value of `--register-with-taints` (a newtype, so that clap takes
/// the whole comma-separated list as one value).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegisterWithTaints(pub Vec<NodeTaint>);

/// Parses `key=value:Effect,key2:Effect` (the clap value parser of the
/// flag); the empty string is no taint. As the kubelet's parser, except
/// that a taint to remove (`key:Effect-`) is refused rather than dropped.
pub fn parse_register_with_taints(value: &str) -> Result<RegisterWithTaints, String> {
    if value.is_empty() {
        return Ok(RegisterWithTaints::default());
    }
    let taints = value
        .split(',')
        .map(parse_taint)
        .collect::<Result<Vec<_>, _>>()?;
    check_unique(&taints).map_err(|(key, effect)| {
        format!("duplicated taints with the same key and effect: {key}:{effect}")
    })?;
    Ok(RegisterWithTaints(taints))
}

/// One `key=value:Effect` or `key:Effect`.
fn parse_taint(spec: &str) -> Result<NodeTaint, String> {
    let bad = |why: &str| format!("invalid taint spec {spec:?}: {why}");
    if spec.ends_with('-') {
        return Err(bad(
            "a trailing '-' removes a taint, which means nothing at registration",
        ));
    }
    let (key_value, effect) = match spec.split(':').collect::<Vec<_>>()[..] {
        [_] => return Err(bad("no effect (key=value:Effect or key:Effect)")),
        [kv, effect] => (kv, effect),
        _ => return Err(bad("more than one ':'")),
    };
    let effect = effect.parse::<TaintEffect>().map_err(|e| bad(&e))?;
    let (key, value) = match key_value.split('=').collect::<Vec<_>>()[..] {
        [key] => (key, ""),
        [key, value] => (key, value),
        _ => return Err(bad("more than one '='")),
    };
    check_key_value(key, value).map_err(|e| bad(&e))?;
    Ok(NodeTaint {
        key: key.to_string(),
        value: value.to_string(),
        effect,
    })
}

fn check_key_value(key: &str, value: &str) -> Result<(), String> {
    if let Some(problem) = qualified_name_problem(key) {
        return Err(format!("key {key:?}: {problem}"));
    }
    if let Some(problem) = label_value_problem(value) {
        return Err(format!("value {value:?}: {problem}"));
    }
    Ok(())
}

/// The first (key, effect) that repeats, if any.
fn check_unique(taints: &[NodeTaint]) -> Result<(), (String, &'static str)> {
    let mut seen = BTreeSet::new();
    for t in taints {
        if !seen.insert((t.key.as_str(), t.effect)) {
            return Err((t.key.clone(), t.effect.as_str()));
        }
    }
    Ok(())
}

/// One entry of the file's `registerWithTaints`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileTaint {
    pub key: Option<String>,
    pub value: Option<String>,
    pub effect: Option<String>,
    /// Refused, as by the kubelet: the API server sets it.
    pub time_added: Option<serde::de::IgnoredAny>,
}

/// Flag over file over the default; a bad file entry names the file and
/// `registerWithTaints[i]`.
pub(super) fn resolve_register_with_taints(
    args: &RunArgs,
    file: &ConfigFile,
    origin: &str,
) -> Result<Vec<NodeTaint>, ConfigError> {
    let from_file = file
        .register_with_taints
        .as_deref()
        .map(|list| {
            file_taints(list).map_err(|message| ConfigError::File {
                path: origin.to_string(),
                message,
            })
        })
        .transpose()?;
    Ok(match (&args.register_with_taints, from_file) {
        (Some(flag), _) => flag.0.clone(),
        (None, Some(file)) => file,
        (None, None) => default_register_with_taints(),
    })
}

fn file_taints(list: &[FileTaint]) -> Result<Vec<NodeTaint>, String> {
    let mut taints = Vec::with_capacity(list.len());
    for (i, t) in list.iter().enumerate() {
        let field = format!("registerWithTaints[{i}]");
        let key = t.key.as_deref().unwrap_or_default();
        let value = t.value.as_deref().unwrap_or_default();
        if t.time_added.is_some() {
            return Err(format!(
                "{field}.timeAdded: may not be set (the API server sets it)"
            ));
        }
        let effect = match t.effect.as_deref() {
            None | Some("") => return Err(format!("{field}.effect: required")),
            Some(e) => e.parse::<TaintEffect>(),
        }
        .map_err(|e| format!("{field}.effect: {e}"))?;
        check_key_value(key, value).map_err(|e| format!("{field}: {e}"))?;
        taints.push(NodeTaint {
            key: key.to_string(),
            value: value.to_string(),
            effect,
        });
    }
    check_unique(&taints).map_err(|(key, effect)| {
        format!(
            "registerWithTaints: duplicated taints with the same key and effect: {key}:{effect}"
        )
    })?;
    Ok(taints)
}

#[cfg(test)]
#[path = "taints_tests.rs"]
mod tests;
