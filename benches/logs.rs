//! Container log reads, as `/containerLogs` and `crilet logs` serve them,
//! against a 10 MiB CRI log (goals: tailLines=100 p50 ≤ 5 ms; a full read
//! at ≥ 200 MB/s; follow lag p99 ≤ 100 ms while the container writes
//! 10 MB/s), and the reader's CPU while following.
//!
//! No runtime needed: the reader runs in this process (`crilet::logs`),
//! with the fake runtime answering whether the container still runs.
//! `cargo bench --bench logs`. Prints the figures; asserts nothing.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crilet::cri::{FakeRuntime, Runtime};
use crilet::logs::LogOptions;
use crilet::logs::{LogTarget, stream};

const LOG_BYTES: usize = 10 * 1024 * 1024;
const RATE: usize = 10 * 1000 * 1000;
const FOLLOW_SECS: u64 = 5;

fn cri_line(payload: &str) -> String {
    let ts = jiff::Timestamp::now();
    format!("{ts} stdout F {payload}\n")
}

async fn fake() -> (Arc<FakeRuntime>, String) {
    let rt = FakeRuntime::new();
    let cid = rt.run_container("bench", "bench", "app", "").await;
    (Arc::new(rt), cid)
}

fn target(path: &Path, id: &str) -> LogTarget {
    LogTarget {
        pod_uid: "bench".into(),
        pod_full_name: "bench_default".into(),
        container: "app".into(),
        container_id: id.into(),
        path: path.to_path_buf(),
    }
}

/// Runs one read; calls `each` on every chunk; returns the bytes read out.
async fn read(
    path: &Path,
    id: &str,
    rt: Arc<dyn Runtime>,
    query: &str,
    mut each: impl FnMut(&[u8]),
) -> usize {
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    let task = tokio::spawn(stream(
        target(path, id),
        LogOptions::from_query(query).unwrap(),
        rt,
        tx,
    ));
    let mut n = 0;
    while let Some(chunk) = rx.recv().await {
        n += chunk.len();
        each(&chunk);
    }
    task.await.unwrap().unwrap();
    n
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// CPU time of this process so far (utime + stime of /proc/self/stat).
fn process_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split(' ').collect();
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

/// CPU time of the calling thread (the first field of its schedstat).
fn thread_cpu() -> Duration {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap();
    Duration::from_nanos(s.split(' ').next().unwrap().parse().unwrap())
}

fn write_log(path: &PathBuf) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut written = 0;
    let mut i = 0u64;
    while written < LOG_BYTES {
        let line = cri_line(&format!("line {i:08} {}", "x".repeat(60)));
        written += line.len();
        f.write_all(line.as_bytes()).unwrap();
        i += 1;
    }
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.log");
    write_log(&path);
    let (fake, id) = fake().await;
    let rt: Arc<dyn Runtime> = fake.clone();

    let mut tails = Vec::new();
    for _ in 0..200 {
        let t0 = Instant::now();
        read(&path, &id, rt.clone(), "tailLines=100", |_| {}).await;
        tails.push(t0.elapsed());
    }
    tails.sort();
    println!(
        "logs: tailLines=100 of a 10 MiB log: p50 {:.2} ms, p99 {:.2} ms (goal p50 ≤ 5 ms)",
        percentile(&tails, 0.5).as_secs_f64() * 1e3,
        percentile(&tails, 0.99).as_secs_f64() * 1e3
    );

    let mut rates = Vec::new();
    for _ in 0..5 {
        let t0 = Instant::now();
        read(&path, &id, rt.clone(), "", |_| {}).await;
        rates.push(LOG_BYTES as f64 / t0.elapsed().as_secs_f64() / 1e6);
    }
    rates.sort_by(f64::total_cmp);
    println!(
        "logs: full read of a 10 MiB log: median {:.0} MB/s of log file (min {:.0}, max {:.0}; goal ≥ 200)",
        rates[2], rates[0], rates[4]
    );

    // Follow while a writer thread appends 10 MB/s in 10 ms batches; each
    // line carries its write time.
    let follow_path = dir.path().join("1.log");
    std::fs::write(&follow_path, "").unwrap();
    let writer_path = follow_path.clone();
    let writer = std::thread::spawn(move || {
        let cpu0 = thread_cpu();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(writer_path)
            .unwrap();
        let start = Instant::now();
        let batch = RATE / 100;
        let mut tick = 0u32;
        while start.elapsed() < Duration::from_secs(FOLLOW_SECS) {
            let mut buf = String::with_capacity(batch + 200);
            while buf.len() < batch {
                let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
                buf.push_str(&cri_line(&format!(
                    "t={} {}",
                    now.as_nanos(),
                    "y".repeat(100)
                )));
            }
            f.write_all(buf.as_bytes()).unwrap();
            tick += 1;
            let next = start + Duration::from_millis(10) * tick;
            if let Some(wait) = next.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        thread_cpu() - cpu0
    });
    let mut lags = Vec::new();
    let cpu0 = process_cpu();
    let t0 = Instant::now();
    let stopper = {
        let fake = fake.clone();
        let id = id.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(FOLLOW_SECS) + Duration::from_millis(300)).await;
            fake.exit_container(&id, 0);
        })
    };
    let mut rest = Vec::new();
    let bytes = read(&follow_path, &id, rt.clone(), "follow=true", |chunk| {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        rest.extend_from_slice(chunk);
        let end = rest.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        for line in rest[..end].split(|b| *b == b'\n') {
            if let Some(t) = std::str::from_utf8(line)
                .ok()
                .and_then(|l| l.strip_prefix("t="))
                .and_then(|l| l.split(' ').next())
                .and_then(|t| t.parse::<u128>().ok())
            {
                lags.push(Duration::from_nanos(now.saturating_sub(t) as u64));
            }
        }
        rest.drain(..end);
    })
    .await;
    let wall = t0.elapsed();
    let writer_cpu = writer.join().unwrap();
    stopper.await.unwrap();
    let reader_cpu = process_cpu()
        .saturating_sub(cpu0)
        .saturating_sub(writer_cpu);
    lags.sort();
    println!(
        "logs: follow at 10 MB/s for {FOLLOW_SECS} s: {} lines ({:.1} MB), lag p50 {:.1} ms, p99 {:.1} ms (goal p99 ≤ 100 ms)",
        lags.len(),
        bytes as f64 / 1e6,
        percentile(&lags, 0.5).as_secs_f64() * 1e3,
        percentile(&lags, 0.99).as_secs_f64() * 1e3
    );
    println!(
        "logs: reader CPU while following 10 MB/s: {:.1} % of a core (process CPU less the writer thread's, over {:.1} s; 10 ms ticks)",
        reader_cpu.as_secs_f64() / wall.as_secs_f64() * 100.0,
        wall.as_secs_f64()
    );
}
