//! Typed decoding of a manifest: its document into a Pod, with the types
//! the Pod's fields have, as the kubelet decodes it (`tryDecodeSinglePod`:
//! YAML is turned into JSON, then decoded strictly). A boolean or a number
//! where a string belongs (`command: [true]`, `image: 1`, YAML 1.1's
//! `yes`/`on`/`y`), or a string where a number or a boolean belongs
//! (`containerPort: "80"`), is refused, naming the field path:
//! `spec.containers[0].livenessProbe.exec.command[0]: expected a string,
//! found a boolean (true)`. Fields that take either (`IntOrString` ports,
//! quantities) take either.
//!
//! Invariant: pure. YAML is decoded from the document's untyped value, in
//! which a quoted scalar is a string and a plain one is what it looks like
//! (YAML 1.1 booleans included, as in the kubelet's YAML library), with the
//! one rewrite the kubelet's YAML to JSON step makes: a float with no
//! fraction is an integer (`30.0` is 30). JSON is decoded from its text, so
//! `30.0` stays a float there, as in the kubelet's JSON decoding. A YAML
//! type error gets its line when the YAML decoder, told to require quotes
//! on strings that look like numbers or booleans, fails at the same field.

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

/// Why a document is not a Pod: the field path (None: the document
/// itself), what is wrong, where (` at line L column C`, when known) and
/// how to fix it (`; quote it to make it a string`, when there is a rule).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeError {
    pub path: Option<String>,
    pub problem: String,
    pub at: String,
    pub hint: &'static str,
}

impl std::fmt::Display for TypeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}{}", self.problem, self.at, self.hint)
    }
}

impl TypeError {
    fn new(path: &serde_path_to_error::Path, message: &str, at: String) -> Self {
        let (problem, hint) = describe(message);
        TypeError {
            path: path_of(path),
            problem,
            at,
            hint,
        }
    }
}

/// `30.0` → `30`, in every number of `value` that is a whole float within
/// the range of an i64 (what the kubelet's YAML to JSON step writes).
pub fn whole_floats_as_integers(value: Value) -> Value {
    match value {
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or(f64::NAN);
            let whole = f.is_finite() && f.fract() == 0.0 && f.abs() < 9.0e18;
            if whole {
                // Exact: a whole float under 2^63 converts without loss.
                Value::from(f as i64)
            } else {
                Value::Number(n)
            }
        }
        Value::Array(items) => {
            Value::Array(items.into_iter().map(whole_floats_as_integers).collect())
        }
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, whole_floats_as_integers(v)))
                .collect(),
        ),
        other => other,
    }
}

/// A Pod from an untyped value (a YAML document's, or a PodList item's).
pub fn pod_from_value(value: Value) -> Result<Pod, TypeError> {
    serde_path_to_error::deserialize(value)
        .map_err(|e| TypeError::new(e.path(), &e.inner().to_string(), String::new()))
}

/// A Pod from a JSON text, with the line and column of a type error.
pub fn pod_from_json(text: &str) -> Result<Pod, TypeError> {
    let mut de = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let inner = e.inner();
        let at = format!(" at line {} column {}", inner.line(), inner.column());
        let text = inner.to_string();
        let bare = text.strip_suffix(&at).unwrap_or(&text);
        TypeError::new(e.path(), bare, at.clone())
    })
}

/// Where in the YAML `text` the field at `path` is, as ` at line L column
/// C`, if the YAML decoder (requiring quotes on strings that look like
/// numbers or booleans) fails there too.
pub fn yaml_location(text: &str, path: &str, mut options: serde_saphyr::Options) -> Option<String> {
    options.no_schema = true;
    let mut failed_at = None;
    let result = serde_saphyr::with_deserializer_from_str_with_options(text, options, |de| {
        serde_path_to_error::deserialize::<_, Pod>(de).map_err(|e| {
            failed_at = path_of(e.path());
            e.into_inner()
        })
    });
    let location = result.err()?.location()?;
    (failed_at.as_deref() == Some(path))
        .then(|| format!(" at line {} column {}", location.line(), location.column()))
}

/// The Kubernetes spelling of a path (`spec.containers[0].image`); None
/// for the document itself.
fn path_of(path: &serde_path_to_error::Path) -> Option<String> {
    let text = path.to_string();
    (text != ".").then_some(text)
}

/// serde's `invalid type: X, expected Y` in the manifest's words,
/// `expected a string, found a boolean (true)`, and the hint that fixes
/// it. Other messages (a missing field, an unknown enum value) are kept as
/// they are, without a hint.
pub fn describe(message: &str) -> (String, &'static str) {
    let Some(rest) = message.strip_prefix("invalid type: ") else {
        return (message.to_string(), "");
    };
    let Some((found, expected)) = rest.rsplit_once(", expected ") else {
        return (message.to_string(), "");
    };
    let expected = expected_words(expected);
    let found = found_words(found);
    let hint = if expected == "a string"
        && (found.starts_with("a boolean") || found.starts_with("a number"))
    {
        "; quote it to make it a string"
    } else if found.starts_with("a string")
        && (expected.contains("integer") || expected == "a boolean")
    {
        "; write it without quotes"
    } else {
        ""
    };
    (format!("expected {expected}, found {found}"), hint)
}

fn expected_words(expected: &str) -> String {
    let words = match expected {
        "i8" | "i16" | "i32" | "i64" | "u8" | "u16" | "u32" | "u64" => "an integer",
        "f32" | "f64" => "a number",
        "a sequence" => "a list",
        "a map" => "an object",
        "IntOrString" => "an integer or a string",
        "Quantity" => "a quantity (a number or a string)",
        other if other.starts_with("struct ") => "an object",
        other => return other.to_string(),
    };
    words.to_string()
}

fn found_words(found: &str) -> String {
    let value = |prefix: &str| {
        let v = found.strip_prefix(prefix)?;
        Some(v.trim_matches('`').to_string())
    };
    if let Some(v) = value("boolean ") {
        return format!("a boolean ({v})");
    }
    if let Some(v) = value("integer ").or_else(|| value("floating point ")) {
        return format!("a number ({v})");
    }
    if let Some(v) = found.strip_prefix("string ") {
        return format!("a string ({v})");
    }
    match found {
        "sequence" => "a list".into(),
        "map" => "an object".into(),
        "unit value" | "null" => "null".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
#[path = "typed_tests.rs"]
mod tests;
