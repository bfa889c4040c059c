//! Writing the pod's status: generated from the worker's last observation,
//! its probe results, waiting reasons and termination messages, put in the
//! status cache (what the mirror manager, `crilet pods` and stats read), and
//! each phase change logged. Part of the pod worker.
//!
//! Invariant: the cache holds the status the worker last generated, one
//! shared object, and `status_changed` fires only when it differs.

use super::*;

impl Worker {
    pub(super) async fn write_status(
        &mut self,
        pod: &Pod,
        obs: &Observation,
        start: jiff::Timestamp,
    ) {
        let sandbox = obs
            .sandboxes
            .iter()
            .max_by_key(|s| (s.metadata.attempt, s.created_at));
        let sandbox_ready = sandbox.is_some_and(|s| s.state == PodSandboxState::Ready);
        let mut pod_ip = String::new();
        if let Some(s) = sandbox.filter(|_| sandbox_ready) {
            if let Ok(st) = self.ctx.runtime.pod_sandbox_status(&s.id).await {
                pod_ip = st.ip;
            }
        }
        self.pod_ip = pod_ip.clone();
        let probes = match &self.prober {
            Some(p) => {
                p.observe(&obs.containers, &pod_ip);
                p.results()
            }
            None => HashMap::new(),
        };
        // A running container clears its waiting reason.
        for c in &obs.containers {
            if c.state == ContainerState::Running {
                self.waiting.remove(&c.metadata.name);
            }
        }
        self.read_messages(pod, obs);
        let waiting = self.waiting_with_volume_error(pod);
        let status = pod_status(&StatusInput {
            pod,
            sandbox_ready,
            pod_ip: &pod_ip,
            host_ip: &self.ctx.node.host_ip,
            containers: &obs.containers,
            waiting: &waiting,
            probes: &probes,
            messages: &self.messages,
            start_time: start,
            runtime_name: &self.ctx.runtime_name,
            previous: self.previous.as_deref(),
            now: jiff::Timestamp::now(),
        });
        let (seen_at, waits) = (now_nanos(), self.waits());
        let phase = |s: Option<&PodStatus>| s.and_then(|s| s.phase.clone()).unwrap_or_default();
        let (was, now) = (phase(self.previous.as_deref()), phase(Some(&status)));
        if was != now {
            // The operator's view of a pod's life: one line per phase change.
            tracing::info!(pod = %pod::full_name(pod), uid = pod::uid(pod), from = %was, to = %now, "pod phase");
        } else if self.previous.as_deref() != Some(&status) {
            tracing::debug!(pod = %pod::full_name(pod), "pod status changed");
        }
        let changed = self.previous.as_deref() != Some(&status);
        let status = Arc::new(status);
        self.ctx
            .statuses
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(pod::uid(pod).to_string(), Arc::clone(&status));
        self.previous = Some(status);
        if changed {
            self.ctx.status_changed.send_replace(());
        }
        self.end_trace(pod, &now, seen_at, waits);
    }

    /// Reads the termination message of every exited container not read
    /// yet (the container is done writing it), and forgets the ones no
    /// longer observed. Small bounded reads, so done inline.
    fn read_messages(&mut self, pod: &Pod, obs: &Observation) {
        self.messages
            .retain(|id, _| obs.containers.iter().any(|c| &c.id == id));
        for c in &obs.containers {
            if self.messages.contains_key(&c.id) {
                continue;
            }
            if let Some(source) = message_source(&self.ctx.node, pod, c) {
                self.messages.insert(c.id.clone(), read_message(&source));
            }
        }
    }

    /// The waiting reasons for the status; while a hostPath check fails,
    /// every container waits where the kubelet's would (ContainerCreating,
    /// or PodInitializing in a pod with init containers) with its message.
    fn waiting_with_volume_error(&self, pod: &Pod) -> HashMap<String, WaitingReason> {
        let mut waiting = self.waiting.clone();
        let (Some(message), Some(spec)) = (&self.volume_error, pod.spec.as_ref()) else {
            return waiting;
        };
        let inits = spec.init_containers.as_deref().unwrap_or_default();
        let reason = if inits.is_empty() {
            CONTAINER_CREATING
        } else {
            POD_INITIALIZING
        };
        for c in inits.iter().chain(&spec.containers) {
            let w = WaitingReason {
                reason: reason.into(),
                message: message.clone(),
            };
            waiting.insert(c.name.clone(), w);
        }
        waiting
    }
}
