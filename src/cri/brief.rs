//! Sandboxes and containers in brief: what a relist compares every second
//! (ID, state, a sandbox's name and namespace, one label and one
//! annotation), read straight from the wire of ListPodSandbox and
//! ListContainers replies.
//!
//! A whole reply decoded builds every object's label and annotation maps:
//! two strings and a hash per entry, about fourteen entries per object.
//! With 50 pods that was most of what an idle agent spent each second. The
//! brief reading walks the reply's bytes and copies only the ID and the
//! values asked for.
//!
//! Invariant: pure; for any reply prost decodes, the briefs are those of
//! the decoded objects (`SandboxBrief::of`, `ContainerBrief::of`): the same
//! objects in the same order, a map's last entry for a key winning, as
//! prost's. A reply cut short, a group, or a string read here that is not
//! UTF-8 is an error, as it is to prost.

use super::{Container, ContainerState, PodSandbox, PodSandboxState};

/// The label and the sandbox annotation a brief keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BriefKeys {
    /// Kept of sandboxes and containers.
    pub label: &'static str,
    /// Kept of sandboxes.
    pub annotation: &'static str,
}

/// A sandbox in brief.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxBrief {
    pub id: String,
    pub state: PodSandboxState,
    /// Its metadata's name and namespace.
    pub name: String,
    pub namespace: String,
    /// The value of [`BriefKeys::label`], if set.
    pub label: Option<String>,
    /// The value of [`BriefKeys::annotation`], if set.
    pub annotation: Option<String>,
}

/// A container in brief.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerBrief {
    pub id: String,
    pub state: ContainerState,
    /// The value of [`BriefKeys::label`], if set.
    pub label: Option<String>,
}

impl SandboxBrief {
    /// The brief of a whole sandbox.
    pub fn of(s: &PodSandbox, keys: BriefKeys) -> Self {
        SandboxBrief {
            id: s.id.clone(),
            state: s.state,
            name: s.metadata.name.clone(),
            namespace: s.metadata.namespace.clone(),
            label: s.labels.get(keys.label).cloned(),
            annotation: s.annotations.get(keys.annotation).cloned(),
        }
    }
}

impl ContainerBrief {
    /// The brief of a whole container.
    pub fn of(c: &Container, keys: BriefKeys) -> Self {
        ContainerBrief {
            id: c.id.clone(),
            state: c.state,
            label: c.labels.get(keys.label).cloned(),
        }
    }
}

/// Why a reply could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct WireError(String);

/// The briefs of a ListPodSandboxResponse's `items` (field 1).
pub fn sandboxes(reply: &[u8], keys: BriefKeys) -> Result<Vec<SandboxBrief>, WireError> {
    let mut out = Vec::new();
    for field in Fields(reply) {
        if let (1, Value::Bytes(item)) = field? {
            out.push(sandbox(item, keys)?);
        }
    }
    Ok(out)
}

/// The briefs of a ListContainersResponse's `containers` (field 1).
pub fn containers(reply: &[u8], keys: BriefKeys) -> Result<Vec<ContainerBrief>, WireError> {
    let mut out = Vec::new();
    for field in Fields(reply) {
        if let (1, Value::Bytes(item)) = field? {
            out.push(container(item, keys)?);
        }
    }
    Ok(out)
}

/// PodSandbox: id 1, metadata 2 (name 1, namespace 3), state 3, labels 5,
/// annotations 6.
fn sandbox(msg: &[u8], keys: BriefKeys) -> Result<SandboxBrief, WireError> {
    // A field at its default value is not on the wire: state 0 is Ready.
    let mut b = SandboxBrief {
        id: String::new(),
        state: sandbox_state(0),
        name: String::new(),
        namespace: String::new(),
        label: None,
        annotation: None,
    };
    for field in Fields(msg) {
        match field? {
            (1, Value::Bytes(v)) => b.id = text(v)?.to_string(),
            (2, Value::Bytes(meta)) => {
                for field in Fields(meta) {
                    match field? {
                        (1, Value::Bytes(v)) => b.name = text(v)?.to_string(),
                        (3, Value::Bytes(v)) => b.namespace = text(v)?.to_string(),
                        _ => {}
                    }
                }
            }
            (3, Value::Varint(v)) => b.state = sandbox_state(v),
            (5, Value::Bytes(entry)) => pick(entry, keys.label, &mut b.label)?,
            (6, Value::Bytes(entry)) => pick(entry, keys.annotation, &mut b.annotation)?,
            _ => {}
        }
    }
    Ok(b)
}

/// Container: id 1, state 6, labels 8.
fn container(msg: &[u8], keys: BriefKeys) -> Result<ContainerBrief, WireError> {
    // State 0, Created, is not on the wire.
    let mut b = ContainerBrief {
        id: String::new(),
        state: container_state(0),
        label: None,
    };
    for field in Fields(msg) {
        match field? {
            (1, Value::Bytes(v)) => b.id = text(v)?.to_string(),
            (6, Value::Varint(v)) => b.state = container_state(v),
            (8, Value::Bytes(entry)) => pick(entry, keys.label, &mut b.label)?,
            _ => {}
        }
    }
    Ok(b)
}

/// Sets `value` from a map entry (key 1, value 2) whose key is `key`.
fn pick(entry: &[u8], key: &str, value: &mut Option<String>) -> Result<(), WireError> {
    let (mut k, mut v): (&[u8], &[u8]) = (b"", b"");
    for field in Fields(entry) {
        match field? {
            (1, Value::Bytes(b)) => k = b,
            (2, Value::Bytes(b)) => v = b,
            _ => {}
        }
    }
    text(k)?;
    let v = text(v)?;
    if k == key.as_bytes() {
        *value = Some(v.to_string());
    }
    Ok(())
}

fn text(bytes: &[u8]) -> Result<&str, WireError> {
    std::str::from_utf8(bytes).map_err(|_| WireError("a string field is not UTF-8".into()))
}

/// The values of the CRI's PodSandboxState (unknown numbers: NotReady, as
/// the whole decoding does; an enum is an int32 on the wire).
fn sandbox_state(v: u64) -> PodSandboxState {
    match v as i32 {
        0 => PodSandboxState::Ready,
        _ => PodSandboxState::NotReady,
    }
}

/// The values of the CRI's ContainerState.
fn container_state(v: u64) -> ContainerState {
    match v as i32 {
        0 => ContainerState::Created,
        1 => ContainerState::Running,
        2 => ContainerState::Exited,
        _ => ContainerState::Unknown,
    }
}

/// A field's value, by wire type; fixed-width values are skipped.
enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

/// The fields of one message, in wire order: `(number, value)`.
struct Fields<'a>(&'a [u8]);

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Value<'a>), WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.0.is_empty() {
            return None;
        }
        let field = self.field();
        if field.is_err() {
            // An error ends the walk.
            self.0 = &[];
        }
        Some(field)
    }
}

impl<'a> Fields<'a> {
    fn field(&mut self) -> Result<(u32, Value<'a>), WireError> {
        let key = self.varint()?;
        let number = u32::try_from(key >> 3)
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| WireError(format!("invalid field key {key}")))?;
        let value = match key & 7 {
            0 => Value::Varint(self.varint()?),
            1 => self.skip(8).map(|_| Value::Fixed)?,
            2 => {
                let len = usize::try_from(self.varint()?).unwrap_or(usize::MAX);
                Value::Bytes(self.skip(len)?)
            }
            5 => self.skip(4).map(|_| Value::Fixed)?,
            t => return Err(WireError(format!("field {number}: wire type {t}"))),
        };
        Ok((number, value))
    }

    fn varint(&mut self) -> Result<u64, WireError> {
        prost::encoding::decode_varint(&mut self.0).map_err(|e| WireError(e.to_string()))
    }

    fn skip(&mut self, len: usize) -> Result<&'a [u8], WireError> {
        if len > self.0.len() {
            return Err(WireError("a field runs past the end".into()));
        }
        let (head, rest) = self.0.split_at(len);
        self.0 = rest;
        Ok(head)
    }
}

#[cfg(test)]
#[path = "brief_tests.rs"]
mod tests;
