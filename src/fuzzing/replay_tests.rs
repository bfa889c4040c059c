//! Replays every committed seed and regression of every fuzz target
//! (`fuzz/corpus/<target>/*`, `fuzz/regressions/<target>/*`) through its
//! entry function: a seed that panics fails the test, naming the file.

use std::path::{Path, PathBuf};

use super::TARGETS;

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("a readable corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn every_corpus_file_replays_without_a_panic() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut failures = Vec::new();
    for (target, entry) in TARGETS {
        let seeds = files_under(&fuzz.join("corpus").join(target));
        assert!(!seeds.is_empty(), "no seed corpus for {target}");
        let regressions = files_under(&fuzz.join("regressions").join(target));
        for file in seeds.iter().chain(&regressions) {
            let bytes = std::fs::read(file).expect("a readable corpus file");
            if std::panic::catch_unwind(|| entry(&bytes)).is_err() {
                failures.push(format!("{target}: {}", file.display()));
            }
        }
    }
    assert!(failures.is_empty(), "panicked on:\n{}", failures.join("\n"));
}
