//! The accepted differences: the table in `docs/kubelet-differences.md`,
//! read by the harness itself, so the page an operator reads and the list
//! the test enforces are one text.
//!
//! Each row of a table there whose first cell is a code span is an entry:
//! the span is a pattern over difference lines (`*` matches any run of
//! characters, `\|` is a literal `|`), the second cell names the runtimes it
//! holds on (`all`, or `containerd1`, `containerd2`, `crio` separated by
//! commas), the third says why. Invariant: pure; an entry without a reason
//! or with an unknown runtime is an error, not a silent skip.

/// One accepted difference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    pub pattern: String,
    /// None: every runtime.
    pub runtimes: Option<Vec<String>>,
    pub reason: String,
}

pub const RUNTIMES: [&str; 3] = ["containerd1", "containerd2", "crio"];

impl Accepted {
    pub fn applies(&self, runtime: &str, line: &str) -> bool {
        let here = match &self.runtimes {
            None => true,
            Some(list) => list.iter().any(|r| r == runtime),
        };
        here && glob(&self.pattern, line)
    }
}

/// The entries of the page, in order.
pub fn parse(markdown: &str) -> Result<Vec<Accepted>, String> {
    let mut out = Vec::new();
    for (n, row) in markdown.lines().enumerate() {
        let Some(cells) = cells(row) else { continue };
        let Some(pattern) = cells
            .first()
            .and_then(|c| c.strip_prefix('`'))
            .and_then(|c| c.strip_suffix('`'))
        else {
            continue;
        };
        let at = format!("docs/kubelet-differences.md line {}", n + 1);
        let (Some(runtimes), Some(reason)) = (cells.get(1), cells.get(2)) else {
            return Err(format!(
                "{at}: an entry needs three cells: pattern, runtimes, why"
            ));
        };
        if reason.trim().is_empty() {
            return Err(format!("{at}: `{pattern}` gives no reason"));
        }
        let runtimes = match runtimes.trim() {
            "all" => None,
            list => {
                let names: Vec<String> = list.split(',').map(|r| r.trim().to_string()).collect();
                if let Some(bad) = names.iter().find(|r| !RUNTIMES.contains(&r.as_str())) {
                    return Err(format!(
                        "{at}: unknown runtime {bad:?} (all, or some of {})",
                        RUNTIMES.join(", ")
                    ));
                }
                Some(names)
            }
        };
        out.push(Accepted {
            pattern: pattern.to_string(),
            runtimes,
            reason: reason.trim().to_string(),
        });
    }
    Ok(out)
}

/// A table row's cells, with `\|` kept as `|` inside a cell; None for a
/// line that is not a row, or the header rule.
fn cells(row: &str) -> Option<Vec<String>> {
    let inner = row.trim().strip_prefix('|')?.strip_suffix('|')?;
    let mut cells = vec![String::new()];
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                chars.next();
                cells.last_mut()?.push('|');
            }
            '|' => cells.push(String::new()),
            c => cells.last_mut()?.push(c),
        }
    }
    let cells: Vec<String> = cells.into_iter().map(|c| c.trim().to_string()).collect();
    let rule = cells
        .iter()
        .all(|c| !c.is_empty() && c.chars().all(|ch| ch == '-' || ch == ':'));
    (!rule).then_some(cells)
}

/// `*` matches any run of characters, everything else itself.
pub fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"
# Where crilet and the kubelet differ

| difference | runtimes | why |
|---|---|---|
| `cri CreateContainer */*: config.annotations["io.kubernetes.container.hash"]: *` | all | The kubelet hashes Go's in-memory form. |
| `pods *: status.x: kubelet 1 \| crilet 2` | crio, containerd2 | A reason. |
| not a pattern | all | prose rows are skipped |
"#;

    #[test]
    fn entries_are_read_from_the_page_table() {
        let got = parse(PAGE).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].runtimes, None);
        assert_eq!(got[1].pattern, "pods *: status.x: kubelet 1 | crilet 2");
        assert_eq!(
            got[1].runtimes,
            Some(vec!["crio".into(), "containerd2".into()])
        );
        assert_eq!(got[1].reason, "A reason.");
    }

    #[test]
    fn an_entry_without_a_reason_or_with_an_unknown_runtime_is_an_error() {
        let err = parse("| `x` | all | |").unwrap_err();
        assert!(err.contains("line 1") && err.contains("no reason"), "{err}");
        let err = parse("| `x` | docker | why |").unwrap_err();
        assert!(err.contains("unknown runtime \"docker\""), "{err}");
        let err = parse("| `x` | all |").unwrap_err();
        assert!(err.contains("three cells"), "{err}");
    }

    #[test]
    fn an_entry_applies_on_its_runtimes_to_lines_its_pattern_matches() {
        let got = parse(PAGE).unwrap();
        let hash = r#"cri CreateContainer web-n/main: config.annotations["io.kubernetes.container.hash"]: kubelet "85580d84" | crilet "1""#;
        assert!(got[0].applies("containerd1", hash));
        assert!(got[1].applies("crio", "pods web: status.x: kubelet 1 | crilet 2"));
        assert!(!got[1].applies("containerd1", "pods web: status.x: kubelet 1 | crilet 2"));
        assert!(!got[1].applies("crio", "pods web: status.x: kubelet 1 | crilet 3"));
    }

    #[test]
    fn glob_matches_stars_across_any_text() {
        for (p, t, want) in [
            ("*", "", true),
            ("a*c", "abbbc", true),
            ("a*c", "abbbd", false),
            ("*x*y", "axbxcy", true),
            ("abc", "abcd", false),
            ("a**", "a", true),
            ("", "", true),
            ("", "a", false),
        ] {
            assert_eq!(glob(p, t), want, "{p} vs {t}");
        }
    }
}
