//! `crilet validate [FILE|DIR|-]…`: the agent's own read of static pod
//! manifests (parse, validation, defaulting, manifest trust), without a
//! runtime, for an operator's CI before a file lands in
//! `/etc/kubernetes/manifests`. No kubelet offers this.
//!
//! Invariant: a manifest is reported valid exactly when `crilet run` would
//! admit its pod: the same functions read it (`config::file`), two pods
//! with one full name keep only the first (the merge's rule), and
//! `--manifest-trust=strict` refuses what the agent would refuse.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use serde::Serialize;

use crate::config::file::{ManifestRead, load_manifest, read_manifests_trusting};
use crate::config::trust::ManifestTrust;
use crate::pod::model::{MAX_MANIFEST_BYTES, ManifestError};
use crate::pod::{full_name, uid};

/// The flags of `crilet validate`.
#[derive(Debug, Clone, clap::Args)]
pub struct ValidateArgs {
    /// Manifest files, directories of manifests (read as --pod-manifest-path
    /// reads them), or - for one manifest on standard input.
    #[arg(required = true, value_name = "FILE|DIR|-")]
    pub paths: Vec<String>,
    /// text: one line per problem and a summary; json: one object.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = ValidateOutput::Text)]
    pub output: ValidateOutput,
    /// The node name the pods' names and UIDs are made for (default: the
    /// hostname, lowercased, as `crilet run`).
    #[arg(long)]
    pub hostname_override: Option<String>,
    /// As `crilet run --manifest-trust`: warn about (default) or refuse
    /// manifests others than root can change.
    #[arg(long, value_enum, default_value_t)]
    pub manifest_trust: ManifestTrust,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ValidateOutput {
    Text,
    Json,
}

/// What `crilet validate` found in one manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ManifestReport {
    /// The file (or `-`, or a directory that could not be read).
    pub origin: String,
    /// The static pod's full name (`name_namespace`) and UID, when valid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    pub valid: bool,
    pub problems: Vec<Problem>,
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    pub message: String,
}

/// Every report, valid or not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Validation {
    pub valid: bool,
    pub manifests: Vec<ManifestReport>,
}

/// `crilet validate`: no async runtime; the report on standard output, exit
/// 1 on any refused manifest (or when the node name cannot be read).
pub fn run(args: &ValidateArgs) -> std::process::ExitCode {
    use std::process::ExitCode;
    let report = match validate(args, &mut std::io::stdin()) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("crilet: error: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    let text = match args.output {
        ValidateOutput::Json => serde_json::to_string_pretty(&report)
            .map(|t| t + "\n")
            .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}\n")),
        ValidateOutput::Text => render_text(&report),
    };
    print!("{text}");
    if report.valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Reads every path as the agent would and reports on each manifest.
pub fn validate(args: &ValidateArgs, stdin: &mut dyn Read) -> anyhow::Result<Validation> {
    let node = crate::nodestatus::machine::node_name(args.hostname_override.as_deref())
        .map_err(|e| anyhow::anyhow!("cannot read the hostname for the node name: {e}"))?;
    let now = jiff::Timestamp::now();
    let mut reads = Vec::new();
    for path in &args.paths {
        reads.push(if path == "-" {
            read_stdin(stdin, &node, now)
        } else {
            read_manifests_trusting(Path::new(path), &node, now, args.manifest_trust)
        });
    }
    Ok(reports(reads))
}

fn read_stdin(stdin: &mut dyn Read, node: &str, now: jiff::Timestamp) -> ManifestRead {
    let mut bytes = Vec::new();
    let mut read = ManifestRead::default();
    match stdin
        .take(MAX_MANIFEST_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
    {
        Ok(_) => match load_manifest("-", &bytes, node, now) {
            Ok(pod) => read.pods.push(pod),
            Err(e) => read.errors.push(e),
        },
        Err(e) => read.errors.push(ManifestError::new(
            "-",
            None,
            format!("cannot read standard input: {e}"),
        )),
    }
    read
}

/// The reports of the reads, in the order read: errors and warnings by
/// origin, and a pod whose full name an earlier manifest holds refused as
/// the merge refuses it.
pub fn reports(reads: Vec<ManifestRead>) -> Validation {
    let mut manifests: Vec<ManifestReport> = Vec::new();
    let mut warnings: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut holders: BTreeMap<String, String> = BTreeMap::new();
    for read in reads {
        for w in read.untrusted {
            warnings
                .entry(w.origin.clone())
                .or_default()
                .push(w.message);
        }
        for e in read.errors {
            manifests.push(refused(&e.origin, problems(&e)));
        }
        for sp in read.pods {
            let name = full_name(&sp.pod);
            if let Some(first) = holders.get(&name) {
                let message =
                    format!("the pod {name} is also defined in {first}, which crilet runs instead");
                let field = Some("metadata.name".to_owned());
                manifests.push(refused(&sp.origin, vec![Problem { field, message }]));
                continue;
            }
            holders.insert(name.clone(), sp.origin.clone());
            manifests.push(ManifestReport {
                origin: sp.origin,
                pod: Some(name),
                uid: Some(uid(&sp.pod).to_owned()),
                valid: true,
                problems: Vec::new(),
                warnings: Vec::new(),
            });
        }
    }
    for (origin, texts) in warnings {
        match manifests.iter_mut().find(|m| m.origin == origin) {
            Some(m) => m.warnings = texts,
            // The directory itself.
            None => manifests.push(ManifestReport {
                warnings: texts,
                ..refused(&origin, Vec::new())
            }),
        }
    }
    for m in &mut manifests {
        m.valid = m.problems.is_empty();
    }
    Validation {
        valid: manifests.iter().all(|m| m.valid),
        manifests,
    }
}

fn refused(origin: &str, problems: Vec<Problem>) -> ManifestReport {
    ManifestReport {
        origin: origin.to_owned(),
        pod: None,
        uid: None,
        valid: false,
        problems,
        warnings: Vec::new(),
    }
}

fn problems(e: &ManifestError) -> Vec<Problem> {
    e.problems()
        .map(|(field, message)| Problem {
            field: field.map(str::to_owned),
            message: message.to_owned(),
        })
        .collect()
}

/// One line per problem and warning, `ok` lines for valid manifests, then a
/// summary line.
pub fn render_text(v: &Validation) -> String {
    let mut out = String::new();
    let mut valid = 0;
    let mut problems = 0;
    for m in &v.manifests {
        for w in &m.warnings {
            out.push_str(&format!("{}: warning: {w}\n", m.origin));
        }
        for p in &m.problems {
            match &p.field {
                Some(f) => out.push_str(&format!("{}: {f}: {}\n", m.origin, p.message)),
                None => out.push_str(&format!("{}: {}\n", m.origin, p.message)),
            }
        }
        problems += m.problems.len();
        if let (Some(pod), Some(uid)) = (&m.pod, &m.uid) {
            valid += 1;
            out.push_str(&format!("{}: ok: pod {pod} (uid {uid})\n", m.origin));
        }
    }
    let files = v
        .manifests
        .iter()
        .filter(|m| m.pod.is_some() || !m.problems.is_empty());
    out.push_str(&format!(
        "{} manifest(s): {valid} valid, {} refused ({problems} problem(s))\n",
        files.count(),
        v.manifests
            .iter()
            .filter(|m| !m.problems.is_empty())
            .count(),
    ));
    out
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
