//! How a hollow node's fake runtime behaves like a real one: each CRI call
//! takes about as long as containerd's, time is the wall clock, calls are
//! not recorded (a hollow node runs for hours), and running containers'
//! CPU and memory move as a real container's do.
//!
//! Invariant: pure. The latencies and the stats are functions of the
//! operation, the container and the time given; nothing here sleeps.

use std::time::Duration;

/// The pacing of a fake runtime (see the module's header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pacing {
    /// Every latency is multiplied by this (1 = containerd's; 0 = none).
    pub scale: u32,
}

impl Pacing {
    /// containerd's latencies, as crilet's `agent_start` benchmark measured
    /// them on containerd 1.6 (RunPodSandbox 57 ms, CreateContainer 6.4 ms,
    /// StartContainer 41 ms, raw CRI per call).
    pub fn containerd() -> Self {
        Pacing { scale: 1 }
    }

    /// How long `op` (a CRI method name) takes.
    pub fn latency(&self, op: &str) -> Duration {
        let micros: u64 = match op {
            "RunPodSandbox" => 57_000,
            "StartContainer" => 41_000,
            "StopPodSandbox" => 25_000,
            "ExecSync" => 30_000,
            "PullImage" => 400_000,
            "StopContainer" => 12_000,
            "CreateContainer" => 6_400,
            "RemovePodSandbox" | "RemoveContainer" | "RemoveImage" => 5_000,
            "ListContainerStats" | "ListPodSandboxStats" | "ImageFsInfo" => 2_000,
            "PodSandboxStatus" | "ContainerStatus" | "ContainerStats" | "PodSandboxStats" => 800,
            "ListPodSandbox" | "ListContainers" | "ListImages" | "ImageStatus" => 600,
            _ => 300,
        };
        Duration::from_micros(micros * u64::from(self.scale))
    }
}

/// A running container's cumulative CPU (nanocore-seconds) at `now`, for
/// one started at `started_at` (both Unix nanoseconds): between 5 and 20
/// millicores, fixed per container by `seed`.
pub fn cpu_usage_nanos(seed: u64, started_at: i64, now: i64) -> u64 {
    let millicores = 5 + seed % 16;
    let elapsed = u64::try_from(now.saturating_sub(started_at)).unwrap_or(0);
    elapsed / 1000 * millicores
}

/// A running container's working set at `now`: 8 MiB plus up to 4 MiB
/// that rises and falls over a minute, phased per container by `seed`.
pub fn working_set_bytes(seed: u64, now: i64) -> u64 {
    let second = (u64::try_from(now).unwrap_or(0) / 1_000_000_000 + seed) % 60;
    let wave = if second < 30 { second } else { 60 - second };
    (8 << 20) + wave * ((4 << 20) / 30)
}

/// A stable seed from a container's ID (FNV-1a).
pub fn seed(id: &str) -> u64 {
    crate::units::fnv::fnv1a_64(id.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_follow_containerd_and_scale() {
        let p = Pacing::containerd();
        assert_eq!(p.latency("RunPodSandbox"), Duration::from_millis(57));
        assert_eq!(p.latency("CreateContainer"), Duration::from_micros(6_400));
        assert!(p.latency("StartContainer") > p.latency("CreateContainer"));
        assert!(p.latency("ListContainers") < Duration::from_millis(1));
        assert_eq!(p.latency("Version"), Duration::from_micros(300));
        assert_eq!(Pacing { scale: 0 }.latency("RunPodSandbox"), Duration::ZERO);
        assert_eq!(
            Pacing { scale: 3 }.latency("RunPodSandbox"),
            Duration::from_millis(171)
        );
    }

    #[test]
    fn cpu_grows_with_time_at_a_rate_fixed_per_container() {
        let s = 1_000_000_000;
        for seed in [0, 7, 15, 99] {
            let rate = 5 + seed % 16;
            assert_eq!(cpu_usage_nanos(seed, 0, 0), 0);
            assert_eq!(cpu_usage_nanos(seed, 10 * s, 20 * s), 10 * rate * 1_000_000);
            assert!(cpu_usage_nanos(seed, 0, 2 * s) > cpu_usage_nanos(seed, 0, s));
        }
        // A clock before the start reads as no usage, never a wrap.
        assert_eq!(cpu_usage_nanos(3, 10 * s, s), 0);
    }

    #[test]
    fn memory_moves_within_its_band_and_differs_per_container() {
        let s = 1_000_000_000i64;
        let readings: Vec<u64> = (0..120).map(|t| working_set_bytes(1, t * s)).collect();
        assert!(readings.iter().all(|&b| (8 << 20..=12 << 20).contains(&b)));
        let distinct: std::collections::BTreeSet<_> = readings.iter().collect();
        assert!(distinct.len() > 20, "it moves: {distinct:?}");
        assert_ne!(working_set_bytes(1, 0), working_set_bytes(2, 0));
        assert_ne!(seed("a"), seed("b"));
        assert_eq!(seed("abc"), seed("abc"));
    }
}
