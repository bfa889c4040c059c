//! Hard eviction thresholds (`--eviction-hard`, `evictionHard`) as the
//! kubelet parses and defaults them, and which of them one observation meets.
//!
//! Invariant: pure; a threshold whose signal has no observation is never
//! met, so an unknown reading can never raise pressure.
//!
//! What this follows, file by file (kubernetes/kubernetes):
//! - `pkg/kubelet/eviction/api/types.go`: the signals, `OpLessThan` the only
//!   operator, and `GetThresholdQuantity`: a percentage is
//!   `int64(float64(capacity) * float64(float32 percentage))`, truncated.
//! - `pkg/kubelet/eviction/helpers.go`: `parseThresholdStatement` (unknown
//!   signal -> "unsupported eviction signal"; `0%` and `100%` written so are
//!   dropped; a percentage must be within 0..=100; a quantity must be
//!   positive), `validSignal` (the keys of `signalToResource`, which include
//!   `allocatableMemory.available` and the `containerfs.*` pair),
//!   `thresholdsMet` (met when threshold > available, strictly) and
//!   `addAllocatableThresholds` (with `enforceNodeAllocatable: [pods]`, the
//!   default, `memory.available` is copied to `allocatableMemory.available`).
//! - `staging/src/k8s.io/component-base/cli/flag/langle_separated_map_string_string.go`:
//!   the flag form `k<v,k<v`: empty items skipped, each split at the first
//!   `<`, both sides trimmed, a later key wins, and the first use of the
//!   flag replaces the defaults.
//! - `pkg/kubelet/eviction/defaults_linux.go`: the defaults, and
//!   `cmd/kubelet/app/server.go` `loadConfigFile`: "if kc.EvictionHard == nil
//!   { kc.EvictionHard = eviction.DefaultEvictionHard }". So in v1.32/v1.33 a
//!   given map, even a partial or empty one, *replaces* the defaults: the
//!   signals it leaves out have no hard threshold at all (the docs' "set to
//!   0"). v1.34 added `mergeDefaultEvictionSettings` (default false) to fill
//!   the left-out signals from the defaults instead; [`eviction_hard`] takes
//!   that switch too.
//!
//! Choices where the kubelet is odd or silent:
//! - `NaN%` passes the kubelet's range checks (it compares false both ways)
//!   and then yields an undefined int64; it is refused here.
//! - `containerfs.available` / `containerfs.inodesFree` are accepted, as the
//!   kubelet accepts them, but the kubelet then overwrites their values with
//!   the nodefs or imagefs ones (`UpdateContainerFsThresholds`) and observes
//!   them on that same filesystem; [`Observation`] therefore has no
//!   containerfs reading and they are never met here (the nodefs/imagefs
//!   thresholds they copy already decide DiskPressure).
//! - Threshold quantities are kept in whole units rounded up: for `a`
//!   integral, `q > a` exactly when `ceil(q) > a`, so decisions are exact.
//! - No soft thresholds, grace periods or minimum reclaim: hard thresholds
//!   have a zero grace period, and a minimum reclaim only matters for evicting.

use std::collections::BTreeMap;

use crate::units::quantity;

/// An eviction signal, named as the kubelet names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Signal {
    /// `memory.available`: capacity − working set, bytes.
    MemoryAvailable,
    /// `allocatableMemory.available`: the pods cgroup's headroom, bytes.
    AllocatableMemoryAvailable,
    /// `nodefs.available`: free bytes on the kubelet's filesystem.
    NodeFsAvailable,
    /// `nodefs.inodesFree`.
    NodeFsInodesFree,
    /// `imagefs.available`: free bytes on the runtime's image filesystem.
    ImageFsAvailable,
    /// `imagefs.inodesFree`.
    ImageFsInodesFree,
    /// `containerfs.available` (see the module doc).
    ContainerFsAvailable,
    /// `containerfs.inodesFree` (see the module doc).
    ContainerFsInodesFree,
    /// `pid.available`: max PIDs − running processes.
    PidAvailable,
}

impl Signal {
    pub const ALL: [Signal; 9] = [
        Signal::MemoryAvailable,
        Signal::AllocatableMemoryAvailable,
        Signal::NodeFsAvailable,
        Signal::NodeFsInodesFree,
        Signal::ImageFsAvailable,
        Signal::ImageFsInodesFree,
        Signal::ContainerFsAvailable,
        Signal::ContainerFsInodesFree,
        Signal::PidAvailable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Signal::MemoryAvailable => "memory.available",
            Signal::AllocatableMemoryAvailable => "allocatableMemory.available",
            Signal::NodeFsAvailable => "nodefs.available",
            Signal::NodeFsInodesFree => "nodefs.inodesFree",
            Signal::ImageFsAvailable => "imagefs.available",
            Signal::ImageFsInodesFree => "imagefs.inodesFree",
            Signal::ContainerFsAvailable => "containerfs.available",
            Signal::ContainerFsInodesFree => "containerfs.inodesFree",
            Signal::PidAvailable => "pid.available",
        }
    }

    /// The signal a name spells, exactly (the kubelet is case-sensitive).
    pub fn from_name(name: &str) -> Option<Signal> {
        Signal::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

impl std::fmt::Display for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a threshold compares the available amount against.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ThresholdValue {
    /// An absolute amount in whole units (bytes, inodes, PIDs), rounded up;
    /// `i64::MAX` when larger.
    Quantity(i64),
    /// A fraction of capacity in `0.0..=1.0`, as the kubelet's float32.
    Percentage(f32),
}

impl ThresholdValue {
    /// `GetThresholdQuantity`: the amount this value means for `capacity`.
    pub fn quantity(self, capacity: i64) -> i64 {
        match self {
            ThresholdValue::Quantity(q) => q,
            // Go: int64(float64(capacity.Value()) * float64(percentage)).
            ThresholdValue::Percentage(p) => (capacity as f64 * f64::from(p)) as i64,
        }
    }
}

/// One hard threshold: `<signal> < <value>` (the only operator).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Threshold {
    pub signal: Signal,
    pub value: ThresholdValue,
}

/// Why an eviction threshold was refused; each names what it refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ThresholdError {
    #[error("malformed pair {entry:?}, expect string<string")]
    MalformedPair { entry: String },
    #[error("unsupported eviction signal {signal:?}")]
    UnsupportedSignal { signal: String },
    #[error("eviction threshold {signal}: bad percentage {value:?}")]
    BadPercentage { signal: Signal, value: String },
    #[error("eviction percentage threshold {signal} must be >= 0%: {value}")]
    NegativePercentage { signal: Signal, value: String },
    #[error("eviction percentage threshold {signal} must be <= 100%: {value}")]
    PercentageOver100 { signal: Signal, value: String },
    #[error("eviction threshold {signal}: bad quantity {value:?}: {reason}")]
    BadQuantity {
        signal: Signal,
        value: String,
        reason: String,
    },
    #[error("eviction threshold {signal} must be positive: {value}")]
    NotPositive { signal: Signal, value: String },
}

/// The kubelet's Linux `evictionHard` defaults.
pub const DEFAULT_EVICTION_HARD: [(&str, &str); 5] = [
    ("memory.available", "100Mi"),
    ("nodefs.available", "10%"),
    ("nodefs.inodesFree", "5%"),
    ("imagefs.available", "15%"),
    ("imagefs.inodesFree", "5%"),
];

/// [`DEFAULT_EVICTION_HARD`] as the config map.
pub fn default_eviction_hard() -> BTreeMap<String, String> {
    DEFAULT_EVICTION_HARD
        .iter()
        .map(|&(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The `evictionHard` map in effect: the defaults when none was given
/// (`None`); otherwise the given map, which replaces them, or with
/// `merge_defaults` (v1.34's `mergeDefaultEvictionSettings`) is laid over
/// them so the signals it leaves out keep their defaults.
pub fn eviction_hard(
    configured: Option<&BTreeMap<String, String>>,
    merge_defaults: bool,
) -> BTreeMap<String, String> {
    match configured {
        None => default_eviction_hard(),
        Some(given) if merge_defaults => {
            let mut merged = default_eviction_hard();
            merged.extend(given.iter().map(|(k, v)| (k.clone(), v.clone())));
            merged
        }
        Some(given) => given.clone(),
    }
}

/// The `--eviction-hard` flag's text as its map:
/// `memory.available<100Mi,nodefs.available<10%`.
pub fn parse_eviction_hard_flag(text: &str) -> Result<BTreeMap<String, String>, ThresholdError> {
    split_map_flag(text, '<').map_err(|entry| ThresholdError::MalformedPair { entry })
}

/// A map flag's text, `k<sep>v,k<sep>v`, as a map (items trimmed, a later
/// key wins), or the first entry without `sep`.
pub(super) fn split_map_flag(text: &str, sep: char) -> Result<BTreeMap<String, String>, String> {
    let mut map = BTreeMap::new();
    for entry in text.split(',').filter(|s| !s.is_empty()) {
        let (key, value) = entry.split_once(sep).ok_or_else(|| entry.to_string())?;
        map.insert(key.trim().to_string(), value.trim().to_string());
    }
    Ok(map)
}

/// `parseThresholdStatements`: every statement of the map, in signal-name
/// order; `0%` and `100%` give no threshold.
pub fn parse_thresholds(
    statements: &BTreeMap<String, String>,
) -> Result<Vec<Threshold>, ThresholdError> {
    let mut out = Vec::new();
    for (signal, value) in statements {
        if let Some(t) = parse_threshold(signal, value)? {
            out.push(t);
        }
    }
    Ok(out)
}

/// `parseThresholdStatement`: one `signal`, `value` pair; `None` for the
/// ignored `0%` and `100%`.
pub fn parse_threshold(signal: &str, value: &str) -> Result<Option<Threshold>, ThresholdError> {
    let signal = Signal::from_name(signal).ok_or_else(|| ThresholdError::UnsupportedSignal {
        signal: signal.to_string(),
    })?;
    let text = || value.to_string();
    if let Some(number) = value.strip_suffix('%') {
        if value == "0%" || value == "100%" {
            return Ok(None);
        }
        // Go trims every trailing '%' (strings.TrimRight) before ParseFloat.
        let number = number.trim_end_matches('%');
        // ParseFloat(_, 32), then float32(value) / 100 in float32.
        let parsed: f32 = number.parse().map_err(|_| ThresholdError::BadPercentage {
            signal,
            value: text(),
        })?;
        let percentage = parsed / 100.0;
        if percentage.is_nan() {
            return Err(ThresholdError::BadPercentage {
                signal,
                value: text(),
            });
        }
        if percentage < 0.0 {
            return Err(ThresholdError::NegativePercentage {
                signal,
                value: text(),
            });
        }
        if percentage > 1.0 {
            return Err(ThresholdError::PercentageOver100 {
                signal,
                value: text(),
            });
        }
        return Ok(Some(Threshold {
            signal,
            value: ThresholdValue::Percentage(percentage),
        }));
    }
    let q = quantity::parse(value).map_err(|reason| ThresholdError::BadQuantity {
        signal,
        value: text(),
        reason,
    })?;
    // Sign() < 0 || IsZero(); a sub-unit positive amount rounds up to 1.
    if q.is_negative() || q.milli_value() == Some(0) {
        return Err(ThresholdError::NotPositive {
            signal,
            value: text(),
        });
    }
    Ok(Some(Threshold {
        signal,
        value: ThresholdValue::Quantity(q.value().unwrap_or(i64::MAX)),
    }))
}

/// `addAllocatableThresholds`: with node allocatable enforced on pods (the
/// kubelet's default `enforceNodeAllocatable: [pods]`), every
/// `memory.available` threshold also applies to `allocatableMemory.available`.
pub fn add_allocatable_thresholds(thresholds: &[Threshold]) -> Vec<Threshold> {
    let copies = thresholds
        .iter()
        .filter(|t| t.signal == Signal::MemoryAvailable)
        .map(|t| Threshold {
            signal: Signal::AllocatableMemoryAvailable,
            value: t.value,
        })
        .collect::<Vec<_>>();
    thresholds.iter().copied().chain(copies).collect()
}

/// One signal's reading: what is available of how much.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observed {
    pub available: i64,
    pub capacity: i64,
}

/// One sample of the node, each reading `None` when unknown
/// (`makeSignalObservations`). With no separate image filesystem, imagefs
/// is the nodefs reading, as the kubelet's stats report it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Observation {
    /// Bytes: available = capacity − working set.
    pub memory: Option<Observed>,
    /// Bytes, of the pods cgroup: available of (available + working set).
    pub allocatable_memory: Option<Observed>,
    /// Bytes available / capacity of the kubelet's filesystem.
    pub nodefs: Option<Observed>,
    /// Inodes free / total of the kubelet's filesystem.
    pub nodefs_inodes: Option<Observed>,
    /// Bytes available / capacity of the runtime's image filesystem.
    pub imagefs: Option<Observed>,
    /// Inodes free / total of the runtime's image filesystem.
    pub imagefs_inodes: Option<Observed>,
    /// PIDs: available = max − running processes, of max.
    pub pid: Option<Observed>,
}

impl Observation {
    /// The reading `signal` is measured on; `None` when unknown (and always
    /// for containerfs: see the module doc).
    pub fn get(&self, signal: Signal) -> Option<Observed> {
        match signal {
            Signal::MemoryAvailable => self.memory,
            Signal::AllocatableMemoryAvailable => self.allocatable_memory,
            Signal::NodeFsAvailable => self.nodefs,
            Signal::NodeFsInodesFree => self.nodefs_inodes,
            Signal::ImageFsAvailable => self.imagefs,
            Signal::ImageFsInodesFree => self.imagefs_inodes,
            Signal::ContainerFsAvailable | Signal::ContainerFsInodesFree => None,
            Signal::PidAvailable => self.pid,
        }
    }
}

/// `thresholdsMet`: the thresholds whose signal reads less available than
/// the threshold's amount. Thresholds without a reading are skipped.
pub fn thresholds_met(thresholds: &[Threshold], observation: &Observation) -> Vec<Threshold> {
    thresholds
        .iter()
        .filter(|t| {
            observation
                .get(t.signal)
                .is_some_and(|o| t.value.quantity(o.capacity) > o.available)
        })
        .copied()
        .collect()
}

#[cfg(test)]
#[path = "eviction_tests.rs"]
mod tests;
