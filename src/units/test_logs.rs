//! For unit tests: what the tracing macros write while a test runs, kept
//! in memory (tasks on the test's thread log through the guard's
//! subscriber). Invariant: test-only; a capture ends with its guard.

use std::io::Write;
use std::sync::{Arc, Mutex};

/// The captured log text.
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    /// Captures what passes `filter` (`info`, `warn`, ...) until the guard
    /// drops.
    pub fn capture(filter: &str) -> (Logs, tracing::subscriber::DefaultGuard) {
        let logs = Logs::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        (logs, tracing::subscriber::set_default(subscriber))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// How often `needle` was written.
    pub fn count(&self, needle: &str) -> usize {
        self.text().matches(needle).count()
    }
}
