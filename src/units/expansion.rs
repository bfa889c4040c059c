//! The kubelet's `$(VAR)` expansion (its forked
//! `third_party/forked/golang/expansion`), for container env, command and
//! args and for exec probe commands.
//!
//! Invariant: pure; unknown and malformed references are kept as written.

/// The kubelet's `$(VAR)` expansion: a defined variable is replaced, `$$`
/// is a literal `$` (so `$$(VAR)` gives `$(VAR)`), anything else is kept.
/// When a name repeats in `vars`, the last entry wins. Used for container
/// env, command and args (`kuberuntime::mapping`) and exec probe commands
/// (`prober::probe_command`).
pub fn expand(input: &str, vars: &[(String, String)]) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        rest = match after.chars().next() {
            Some('$') => {
                out.push('$');
                &after[1..]
            }
            Some('(') => match after.find(')') {
                Some(end) => {
                    let var = &after[1..end];
                    match vars.iter().rev().find(|(n, _)| n == var) {
                        Some((_, value)) => out.push_str(value),
                        None => {
                            out.push_str("$(");
                            out.push_str(var);
                            out.push(')');
                        }
                    }
                    &after[end + 1..]
                }
                None => {
                    out.push_str("$(");
                    &after[1..]
                }
            },
            _ => {
                out.push('$');
                after
            }
        };
    }
    out.push_str(rest);
    out
}
