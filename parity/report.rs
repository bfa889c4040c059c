//! The verdict on a comparison: each difference line marked accepted (by
//! the first entry of the accepted list that covers it on this runtime) or
//! new, and the entries that covered nothing in this run named, so a fixed
//! difference's entry can be taken off the list.
//!
//! Invariant: pure; a line is new exactly when no entry applies to it.

use crate::accepted::Accepted;

pub struct Report {
    /// The whole report, one line per difference, then the unused entries.
    pub text: String,
    /// The differences no entry covers: these fail the run.
    pub unexpected: Vec<String>,
    pub differences: usize,
}

pub fn judge(runtime: &str, lines: &[String], accepted: &[Accepted]) -> Report {
    let mut text = String::new();
    let mut unexpected = Vec::new();
    let mut used = vec![false; accepted.len()];
    for line in lines {
        match accepted.iter().position(|a| a.applies(runtime, line)) {
            Some(i) => {
                used[i] = true;
                text.push_str(&format!("accepted  {line}\n"));
            }
            None => {
                text.push_str(&format!("NEW       {line}\n"));
                unexpected.push(line.clone());
            }
        }
    }
    for (a, used) in accepted.iter().zip(&used) {
        let here = a
            .runtimes
            .as_ref()
            .is_none_or(|r| r.iter().any(|r| r == runtime));
        if here && !used {
            text.push_str(&format!(
                "unused    `{}` (no such difference in this run)\n",
                a.pattern
            ));
        }
    }
    Report {
        text,
        unexpected,
        differences: lines.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(pattern: &str, runtimes: Option<&[&str]>) -> Accepted {
        Accepted {
            pattern: pattern.into(),
            runtimes: runtimes.map(|r| r.iter().map(|s| s.to_string()).collect()),
            reason: "why".into(),
        }
    }

    #[test]
    fn lines_are_accepted_by_an_entry_for_this_runtime_or_are_new() {
        let accepted = [
            entry("a: *", None),
            entry("b: *", Some(&["crio"])),
            entry("c: *", None),
        ];
        let lines = ["a: 1".to_string(), "b: 2".to_string()];
        let r = judge("containerd1", &lines, &accepted);
        assert_eq!(r.unexpected, ["b: 2"]);
        assert_eq!(r.differences, 2);
        assert_eq!(
            r.text,
            "accepted  a: 1\nNEW       b: 2\nunused    `c: *` (no such difference in this run)\n"
        );
        let r = judge("crio", &lines, &accepted);
        assert!(r.unexpected.is_empty());
    }
}
