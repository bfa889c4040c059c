//! Decoding a manifest's bytes into one JSON or YAML document, within
//! limits.
//!
//! Invariant: decoding is bounded in time and memory whatever the input.
//! Every limit is a named constant below, applied the same way to JSON and
//! YAML where both have the notion, and a breach gives an error naming the
//! input and the limit: more than [`MAX_MANIFEST_BYTES`] is refused before
//! any parsing; nesting deeper than [`MAX_NESTING_DEPTH`] collections (JSON
//! or YAML, aliases included); YAML aliases beyond [`MAX_YAML_ALIASES`], or
//! expanding to more than [`MAX_YAML_ALIAS_EVENTS`] events in all (a
//! "billion laughs"); more than [`MAX_YAML_DOCUMENTS`] documents in a
//! stream. The YAML decoder's counts of nodes, events and scalar bytes are set
//! so that the byte limit binds first. The agent's config file uses the same
//! YAML limits ([`yaml_options`]).

use serde_json::Value;
use serde_saphyr::ExternalMessageSource;
use serde_saphyr::budget::BudgetBreach;
use serde_saphyr::granit_parser::ErrorKind;

use super::problems::{ManifestError, json_type};
use super::typed;

/// Largest manifest accepted, in bytes (1 MiB). Anything larger is refused
/// before parsing so a stray log file in the manifest directory cannot make us
/// build a huge document in memory.
pub const MAX_MANIFEST_BYTES: usize = 1024 * 1024;

/// Deepest nesting of lists and objects accepted, JSON and YAML alike (the
/// top-level object counts as 1). A Pod's deepest field (node affinity's
/// `matchExpressions[].values[]`) sits 10 levels down, 12 inside a PodList;
/// serde_json alone would allow 128 and the YAML decoder 64.
pub const MAX_NESTING_DEPTH: usize = 64;

/// Most alias references (`*name`) a YAML document may hold.
pub const MAX_YAML_ALIASES: usize = 10_000;

/// Most parser events that alias references may replay in all: what bounds
/// the memory of an alias bomb, whose few bytes name an anchor that names
/// anchors, 10 times per level. 100 000 events are thousands of containers.
pub const MAX_YAML_ALIAS_EVENTS: usize = 100_000;

/// Most documents (`---`) of a YAML stream; a manifest holds exactly one, and
/// the count stops a separator storm early.
pub const MAX_YAML_DOCUMENTS: usize = 16;

/// The YAML decoder's options: every budget set here, none left to the
/// library's defaults. Shared by the agent's config file.
pub fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_reader_input_bytes: Some(MAX_MANIFEST_BYTES),
            max_depth: MAX_NESTING_DEPTH,
            flow_nesting_limit: MAX_NESTING_DEPTH,
            max_aliases: MAX_YAML_ALIASES,
            max_anchors: MAX_YAML_ALIASES,
            // Every node and event takes at least one byte of input (aliases
            // are replayed after this count), so these never bind first.
            max_nodes: 2 * MAX_MANIFEST_BYTES,
            max_events: 2 * MAX_MANIFEST_BYTES,
            max_documents: MAX_YAML_DOCUMENTS,
            max_total_scalar_bytes: MAX_MANIFEST_BYTES,
            max_recorded_anchor_events: MAX_YAML_ALIAS_EVENTS,
            max_recorded_anchor_bytes: MAX_MANIFEST_BYTES,
            max_merge_keys: MAX_YAML_ALIASES,
            max_inclusion_depth: 0,
            // The alias events limit bounds the expansion; a ratio heuristic
            // would only make that limit harder to state.
            enforce_alias_anchor_ratio: false,
        },
        alias_limits: serde_saphyr::alias_limits! {
            max_total_replayed_events: MAX_YAML_ALIAS_EVENTS,
            max_replay_stack_depth: MAX_NESTING_DEPTH,
        },
        with_snippet: false,
    }
}

/// A YAML error as one line; a breached limit is named with its value.
pub fn yaml_error(e: &serde_saphyr::Error) -> String {
    let at = e
        .location()
        .map(|l| format!(" at line {} column {}", l.line(), l.column()))
        .unwrap_or_default();
    // The breach itself, under the wrappers that add an alias's locations.
    let mut inner = e;
    while let serde_saphyr::Error::AliasError { error, .. }
    | serde_saphyr::Error::WithSnippet { error, .. } = inner
    {
        inner = error;
    }
    let limit = match inner {
        serde_saphyr::Error::Budget { breach, .. } => match breach {
            BudgetBreach::Depth { .. } => Some(depth_message()),
            BudgetBreach::Aliases { .. } | BudgetBreach::Anchors { .. } => Some(format!(
                "more than {MAX_YAML_ALIASES} YAML aliases or anchors (the limit)"
            )),
            BudgetBreach::Documents { .. } => Some(format!(
                "more than {MAX_YAML_DOCUMENTS} YAML documents (the limit); \
                 a manifest holds exactly one"
            )),
            BudgetBreach::AliasAnchorRatio { .. } | BudgetBreach::RecordedAnchorEvents { .. } => {
                Some(alias_events_message())
            }
            _ => None,
        },
        serde_saphyr::Error::AliasReplayLimitExceeded { .. } => Some(alias_events_message()),
        serde_saphyr::Error::AliasReplayStackDepthExceeded { .. } => Some(depth_message()),
        // The scanner's own nesting limits (set from the same constant) may
        // trip before the depth budget sees the events.
        serde_saphyr::Error::ExternalMessage { source, .. }
            if matches!(
                &**source,
                ExternalMessageSource::Parser(e)
                    if matches!(e.kind(), ErrorKind::RecursionLimitExceeded)
            ) =>
        {
            Some(depth_message())
        }
        _ => None,
    };
    match limit {
        Some(limit) => format!("{limit}{at}"),
        None => format!("invalid YAML: {}", e.without_snippet()),
    }
}

fn depth_message() -> String {
    format!("nested deeper than {MAX_NESTING_DEPTH} levels of lists and objects (the limit)")
}

fn alias_events_message() -> String {
    format!(
        "YAML aliases expand to more than {MAX_YAML_ALIAS_EVENTS} events (the limit; an alias bomb?)"
    )
}

/// Refuses JSON nested deeper than [`MAX_NESTING_DEPTH`] before serde_json
/// sees it (its own limit is 128), with the byte offset of the first list or
/// object too deep. Brackets inside strings do not count; malformed JSON is
/// left to serde_json.
pub fn check_json_depth(text: &str) -> Result<(), String> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for (at, b) in text.bytes().enumerate() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_NESTING_DEPTH {
                    return Err(format!("{} at byte offset {at}", depth_message()));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// One decoded document: the source text (for positioned typed errors) and
/// its untyped value (for the structural checks).
pub(super) struct Document<'a> {
    pub text: &'a str,
    pub json: bool,
    pub value: Value,
}

impl<'a> Document<'a> {
    pub fn decode(origin: &str, bytes: &'a [u8]) -> Result<Self, ManifestError> {
        let err = |message: String| ManifestError::new(origin, None, message);
        if bytes.len() > MAX_MANIFEST_BYTES {
            return Err(err(format!(
                "manifest is {} bytes, over the limit of {MAX_MANIFEST_BYTES} bytes (1 MiB)",
                bytes.len()
            )));
        }
        // A NUL byte never occurs in a text manifest; saying "binary" is more
        // helpful than whatever the UTF-8 or YAML decoder would complain about.
        if let Some(at) = bytes.iter().position(|&b| b == 0) {
            return Err(err(format!(
                "binary content (NUL byte at offset {at}), not a manifest"
            )));
        }
        let text = std::str::from_utf8(bytes).map_err(|e| {
            err(format!(
                "not valid UTF-8 (invalid byte at offset {})",
                e.valid_up_to()
            ))
        })?;
        // Editors on some platforms prepend a byte-order mark; JSON parsers reject it.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let Some(first) = text.trim_start().bytes().next() else {
            return Err(err("empty manifest".into()));
        };
        let json = first == b'{';
        let value = if json {
            Self::decode_json(text).map_err(err)?
        } else {
            // As the kubelet's YAML to JSON step: 30.0 is the integer 30.
            typed::whole_floats_as_integers(Self::decode_yaml(text).map_err(err)?)
        };
        if !value.is_object() {
            return Err(err(format!(
                "expected a Pod object at the top level, found {}",
                json_type(&value)
            )));
        }
        Ok(Self { text, json, value })
    }

    fn decode_json(text: &str) -> Result<Value, String> {
        check_json_depth(text)?;
        serde_json::from_str(text).map_err(|e| {
            // serde_json reports a second object as "trailing characters";
            // name the real problem when that is what happened.
            let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
            if matches!((stream.next(), stream.next()), (Some(Ok(_)), Some(Ok(_)))) {
                format!("more than one JSON document; a manifest holds exactly one ({e})")
            } else {
                format!("invalid JSON: {e}")
            }
        })
    }

    fn decode_yaml(text: &str) -> Result<Value, String> {
        let mut docs: Vec<Value> = serde_saphyr::from_multiple_with_options(text, yaml_options())
            .map_err(|e| yaml_error(&e))?;
        match docs.len() {
            0 => Err("no YAML document (only comments or separators)".into()),
            1 => Ok(docs.remove(0)),
            n => Err(format!(
                "{n} YAML documents; a manifest holds exactly one Pod"
            )),
        }
    }

    /// The Pod, decoded with the types its fields have (see `typed`): JSON
    /// from the text, YAML from `value`, a type error named by its field
    /// path, with its line and column where they are known.
    pub fn typed_pod(
        &self,
        origin: &str,
    ) -> Result<k8s_openapi::api::core::v1::Pod, ManifestError> {
        let decoded = if self.json {
            typed::pod_from_json(self.text)
        } else {
            typed::pod_from_value(self.value.clone()).map_err(|mut e| {
                let at = e.path.as_deref();
                let at = at.and_then(|path| typed::yaml_location(self.text, path, yaml_options()));
                e.at = at.unwrap_or_default();
                e
            })
        };
        decoded.map_err(|e| ManifestError::new(origin, e.path.clone(), format!("invalid Pod: {e}")))
    }
}

#[cfg(test)]
#[path = "document_tests.rs"]
mod tests;
