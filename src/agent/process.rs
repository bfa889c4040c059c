//! How the crilet process is set up for a small, steady footprint: glibc
//! malloc with one arena, the async runtime with few threads, and the
//! allocator's free pages handed back to the kernel after bursts.
//!
//! Measured (issue 16, 100 pods on containerd 1.6, release build): the
//! peak heap was 8.8 MiB (heaptrack) but the anonymous RSS 16 MiB. glibc
//! gives threads arenas of their own (up to 8 per core) and pages freed in
//! one are not reused by another; one arena is enough for crilet's few
//! threads, which mostly wait.
//!
//! With probes (issue 26, 100 pods each probed over HTTP every second and by
//! exec every 10 s) the heap's RSS held about 4 MiB more than was live:
//! glibc raises its mmap threshold, and the trim threshold with it, each
//! time a large mmapped block is freed, and then keeps freed heap pages up
//! to twice that. Fixed thresholds turn that off: crilet's RSS with those
//! pods went from 25.0 to 20.3 MiB in one run each.
//!
//! The trim follows the heap ([`HeapTrim`]): it is looked at every
//! [`TRIM_CHECK`], and trimmed as soon as a burst has freed
//! [`TRIM_AFTER_FREED`] of what it held at its height, and every
//! [`TRIM_PERIOD`] anyway. With 50 pods started at once on an API server
//! (containerd 1.6, release build) the anonymous RSS stayed at 9.8 MiB for
//! up to 30 s after the start, until the periodic trim took it to 8.0 MiB.
//!
//! Invariant: [`tune_allocator`] runs before any thread is spawned (so
//! that no thread has an arena of its own yet); [`runtime`] calls it.

use std::time::Duration;

/// The blocking-pool threads of the runtime: manifest reads, the stats
/// collector's /proc and disk walks, log rotation and log file reads run
/// there, a few at a time (tokio's default allows 512).
pub const MAX_BLOCKING_THREADS: usize = 8;

/// How long an idle blocking thread is kept: the stats collector's period
/// (10 s) reuses one instead of spawning a new one each round.
pub const BLOCKING_KEEP_ALIVE: Duration = Duration::from_secs(30);

/// How often free heap pages are returned to the kernel at the least.
pub const TRIM_PERIOD: Duration = Duration::from_secs(30);

/// How often the heap's use is looked at (glibc's `mallinfo2`, a walk of
/// the one arena's bins: microseconds).
pub const TRIM_CHECK: Duration = Duration::from_secs(2);

/// A heap whose use fell this far below its height since the last trim is
/// trimmed at the next check, not at the next period.
pub const TRIM_AFTER_FREED: usize = 1 << 20;

/// Blocks from this size on are mmapped, and freed heap above it at the
/// top is returned at once: glibc's default, fixed so that it no longer
/// grows (up to 32 MiB) after large blocks are freed.
pub const MALLOC_THRESHOLD: i32 = 128 * 1024;

/// One malloc arena for every thread, and fixed mmap and trim thresholds.
/// glibc only: other C libraries have no such knobs, and then nothing is
/// changed.
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets parameters of the allocator; it is called
    // before the runtime's threads exist.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
        libc::mallopt(libc::M_MMAP_THRESHOLD, MALLOC_THRESHOLD);
        libc::mallopt(libc::M_TRIM_THRESHOLD, MALLOC_THRESHOLD);
    }
}

/// Returns free pages at the top and in the middle of the heap to the
/// kernel (glibc's malloc_trim), e.g. after the start of many pods.
pub fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim is thread-safe and takes no pointers.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The bytes of heap in use (glibc's `mallinfo2().uordblks`), or `None`
/// where the C library cannot say.
pub fn heap_in_use() -> Option<usize> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallinfo2 only reads the allocator's statistics.
    return Some(unsafe { libc::mallinfo2() }.uordblks);
    #[allow(unreachable_code)]
    None
}

/// When to trim: pure, fed the heap's use at each check and the time since
/// the last trim.
#[derive(Debug, Default)]
pub struct HeapTrim {
    /// The most the heap held since the last trim.
    height: usize,
}

impl HeapTrim {
    /// Whether to trim now, with `in_use` bytes in use and `since` the last
    /// trim (or the start); a trim is assumed to follow a `true`.
    pub fn check(&mut self, in_use: Option<usize>, since: Duration) -> bool {
        let in_use = in_use.unwrap_or(0);
        self.height = self.height.max(in_use);
        let trim = since >= TRIM_PERIOD || self.height - in_use >= TRIM_AFTER_FREED;
        if trim {
            self.height = in_use;
        }
        trim
    }
}

/// The async runtime of every crilet command: multi-threaded with at most
/// two workers (crilet is I/O bound; a third core buys nothing but
/// another stack and arena), a bounded blocking pool, and the allocator
/// tuned first.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tune_allocator();
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(2));
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .max_blocking_threads(MAX_BLOCKING_THREADS)
        .thread_keep_alive(BLOCKING_KEEP_ALIVE)
        .enable_all()
        .build()
}

/// Trims the heap as [`HeapTrim`] says until `cancel`: the allocator keeps
/// what bursts (pod starts, a large ListContainers reply) freed otherwise.
pub async fn trim_heap_periodically(cancel: tokio_util::sync::CancellationToken) {
    let mut ticker = tokio::time::interval(TRIM_CHECK);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut policy = HeapTrim::default();
    let mut last = tokio::time::Instant::now();
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = ticker.tick() => {
                if policy.check(heap_in_use(), last.elapsed()) {
                    trim_heap();
                    last = tokio::time::Instant::now();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtime_runs_tasks_and_blocking_work() {
        let rt = runtime().unwrap();
        let got = rt.block_on(async {
            let a = tokio::spawn(async { 20 }).await.unwrap();
            let b = tokio::task::spawn_blocking(|| 22).await.unwrap();
            a + b
        });
        assert_eq!(got, 42);
        // Trimming is harmless at any time, also with the runtime's threads up.
        trim_heap();
        let v = vec![1u8; 1 << 20];
        drop(v);
        trim_heap();
    }

    #[test]
    fn the_heap_is_trimmed_once_a_burst_has_freed_enough_and_every_period() {
        let s = Duration::from_secs;
        let mib = |n: f64| Some((n * (1 << 20) as f64) as usize);
        let mut t = HeapTrim::default();
        // Growing, and steady: no trim before the period.
        assert!(!t.check(mib(2.0), s(2)));
        assert!(!t.check(mib(5.0), s(4)));
        assert!(!t.check(mib(4.5), s(6)), "0.5 MiB freed is not enough");
        // The burst is over: 1 MiB below its height.
        assert!(t.check(mib(4.0), s(8)));
        // The height starts again from there.
        assert!(!t.check(mib(3.5), s(2)));
        assert!(!t.check(mib(4.0), s(4)));
        assert!(t.check(mib(3.0), s(6)));
        // Steady use is trimmed every period.
        assert!(!t.check(mib(3.0), TRIM_PERIOD - s(1)));
        assert!(t.check(mib(3.0), TRIM_PERIOD));
        // Without statistics, the period alone.
        let mut blind = HeapTrim::default();
        assert!(!blind.check(None, s(2)));
        assert!(blind.check(None, TRIM_PERIOD));
    }

    #[test]
    fn the_heap_in_use_is_read_from_glibc() {
        // 800 KiB in blocks under the mmap threshold (so on the heap); the
        // other tests' threads allocate and free meanwhile, so only half is
        // asked for.
        let before = heap_in_use().expect("glibc's statistics");
        let blocks: Vec<Vec<u8>> = (0..8).map(|i| vec![i; 100 << 10]).collect();
        let during = heap_in_use().unwrap();
        assert!(during >= before + (400 << 10), "{before} -> {during}");
        drop(blocks);
    }

    #[tokio::test(start_paused = true)]
    async fn periodic_trimming_stops_when_cancelled() {
        let cancel = tokio_util::sync::CancellationToken::new();
        let task = tokio::spawn(trim_heap_periodically(cancel.clone()));
        tokio::time::sleep(TRIM_PERIOD * 3).await;
        assert!(!task.is_finished());
        cancel.cancel();
        task.await.unwrap();
    }
}
