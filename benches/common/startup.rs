//! crilet's start-up traces, read back from its log: the
//! `crilet::pod_startup` lines its pod workers write when a new pod's
//! Running status is reported (src/agent/worker/startup.rs), turned into one
//! table of where the time goes: each step's median, the runtime's share,
//! the time queued for a mutation slot and crilet's own, and the manifest directory's latency (written → seen)
//! from the bench's own write times.

#![allow(dead_code)]

use std::collections::HashMap;

use crilet::kuberuntime::startup_trace::{ParsedStep, parse_steps};

/// The log level that writes the traces (and the CRI calls, `--v=4`'s).
pub const LOG_LEVEL: &str = "warn,crilet::cri::client=debug,crilet::pod_startup=debug";

/// One pod's trace: its name, when the line was logged (unix ns), and its
/// steps.
#[derive(Debug, Clone)]
pub struct Trace {
    pub pod: String,
    pub logged_ns: i64,
    pub total_ms: f64,
    pub steps: Vec<ParsedStep>,
}

fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let at = line.find(&format!(" {key}="))? + key.len() + 2;
    line[at..].split_whitespace().next()
}

/// Every trace line of `log` (crilet's text log format).
pub fn parse(log: &str) -> Vec<Trace> {
    log.lines()
        .filter(|l| l.contains("pod startup trace"))
        .filter_map(|l| {
            let stamp = l.split_whitespace().next()?;
            let logged_ns = stamp.parse::<jiff::Timestamp>().ok()?.as_nanosecond() as i64;
            let pod = field(l, "pod")?.to_string();
            let total_ms = field(l, "total_ms")?.parse().ok()?;
            let steps = parse_steps(&l[l.find(" steps=")? + 7..]);
            Some(Trace {
                pod,
                logged_ns,
                total_ms,
                steps,
            })
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One row: a step's name and the medians of (took, runtime, queued,
/// crilet's own) in ms, each over the traces (so they need not add up).
pub type Row = (String, f64, f64, f64, f64);

/// Per step, the medians over `traces`, in the order of the longest trace;
/// then the totals' medians.
pub fn step_medians(traces: &[Trace]) -> Vec<Row> {
    let Some(longest) = traces.iter().max_by_key(|t| t.steps.len()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let (mut totals, mut runtimes, mut queues, mut owns) = (vec![], vec![], vec![], vec![]);
    for t in traces {
        let runtime = t.steps.iter().map(|s| s.runtime_ms).sum::<f64>();
        let queued = t.steps.iter().map(|s| s.queued_ms).sum::<f64>();
        totals.push(t.total_ms);
        runtimes.push(runtime);
        queues.push(queued);
        owns.push(t.total_ms - runtime - queued);
    }
    for step in &longest.steps {
        let (mut took, mut rt, mut q, mut own) = (vec![], vec![], vec![], vec![]);
        for t in traces {
            let Some(i) = t.steps.iter().position(|s| s.phase == step.phase) else {
                continue;
            };
            let before = if i == 0 { 0.0 } else { t.steps[i - 1].at_ms };
            let s = &t.steps[i];
            took.push(s.at_ms - before);
            rt.push(s.runtime_ms);
            q.push(s.queued_ms);
            own.push(s.at_ms - before - s.runtime_ms - s.queued_ms);
        }
        let medians = (median(took), median(rt), median(q), median(own));
        out.push((
            step.phase.clone(),
            medians.0,
            medians.1,
            medians.2,
            medians.3,
        ));
    }
    let totals = (
        median(totals),
        median(runtimes),
        median(queues),
        median(owns),
    );
    out.push(("total".into(), totals.0, totals.1, totals.2, totals.3));
    out
}

/// The median of written → seen (ms) over the traces whose pod was
/// written at `written` (unix ns, by pod name prefix `<manifest>-<node>`).
pub fn watch_latency(traces: &[Trace], written: &HashMap<String, i64>) -> f64 {
    median(
        traces
            .iter()
            .filter_map(|t| {
                let w = written
                    .iter()
                    .find(|(name, _)| t.pod.starts_with(&format!("{name}-")))?
                    .1;
                let seen = t.logged_ns as f64 - t.total_ms * 1e6;
                Some((seen - *w as f64) / 1e6)
            })
            .collect(),
    )
}

/// Prints the table: one column pair per (title, traces, watch latency).
pub fn print_table(columns: &[(&str, &[Trace], f64)]) {
    let tables: Vec<_> = columns.iter().map(|(_, t, _)| step_medians(t)).collect();
    let mut head = format!("     {:<22}", "step (medians, ms)");
    for (title, traces, _) in columns {
        head.push_str(&format!(
            " {:>35}",
            format!("{title} ({} traces)", traces.len())
        ));
    }
    println!("{head}");
    let mut sub = format!("     {:<22}", "");
    for _ in columns {
        sub.push_str(&format!(
            " {:>8} {:>8} {:>8} {:>8}",
            "took", "runtime", "queued", "crilet"
        ));
    }
    println!("{sub}");
    let mut row = format!("     {:<22}", "written -> seen");
    for (_, _, watch) in columns {
        row.push_str(&format!(" {watch:>8.2} {:>8} {:>8} {watch:>8.2}", "-", "-"));
    }
    println!("{row}");
    let names: Vec<String> = tables
        .iter()
        .max_by_key(|t| t.len())
        .map(|t| t.iter().map(|s| s.0.clone()).collect())
        .unwrap_or_default();
    for name in names {
        let mut row = format!("     {name:<22}");
        for t in &tables {
            match t.iter().find(|s| s.0 == name) {
                Some((_, took, rt, q, own)) => {
                    row.push_str(&format!(" {took:>8.2} {rt:>8.2} {q:>8.2} {own:>8.2}"))
                }
                None => row.push_str(&format!(" {:>8} {:>8} {:>8} {:>8}", "-", "-", "-", "-")),
            }
        }
        println!("{row}");
    }
}
