//! The securityContext: pod and container fields merged, seccomp and
//! AppArmor profiles, masked and read-only paths. Part of `mapping`.
//!
//! Invariant: pure, like the rest of the mapping. A container always gets
//! a seccomp profile (Unconfined when neither it nor the pod sets one); the
//! sandbox always gets RuntimeDefault, whatever the pod sets, as the
//! kubelet forces on the pause container.

use super::container::ImageUser;
use super::*;

pub(super) const SECCOMP_PROFILE: &str = "seccompProfile";

pub(super) const APPARMOR_PROFILE: &str = "appArmorProfile";

/// The kubelet's masked and read-only /proc and /sys paths
/// (`pkg/securitycontext/util.go`, kept in step with moby's defaults).
pub(super) const DEFAULT_MASKED_PATHS: [&str; 12] = [
    "/proc/asound",
    "/proc/acpi",
    "/proc/interrupts",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
];

pub(super) const DEFAULT_READONLY_PATHS: [&str; 5] = [
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

pub(super) fn is_privileged(c: &Container) -> bool {
    c.security_context.as_ref().and_then(|s| s.privileged) == Some(true)
}

/// A profile as the spec gives it: (type, localhostProfile).
pub(super) type ProfileSpec<'a> = Option<(&'a str, Option<&'a str>)>;

pub(super) fn seccomp_spec(p: &Option<SeccompProfile>) -> ProfileSpec<'_> {
    (p.as_ref()).map(|p| (p.type_.as_str(), p.localhost_profile.as_deref()))
}

pub(super) fn apparmor_spec(p: &Option<AppArmorProfile>) -> ProfileSpec<'_> {
    (p.as_ref()).map(|p| (p.type_.as_str(), p.localhost_profile.as_deref()))
}

/// The container's profile if it sets one, else the pod's. For
/// seccompProfile a Localhost profile is a path under `<root_dir>/seccomp`
/// (as the kubelet resolves it); for appArmorProfile it is a profile name.
pub(super) fn security_profile(
    ctx: &NodeContext,
    pod: &Pod,
    container_field: &str,
    key: &str,
    container: ProfileSpec,
    pod_level: ProfileSpec,
) -> Result<Option<SecurityProfile>, MappingError> {
    let (field, (kind, localhost)) = match (container, pod_level) {
        (Some(p), _) => (format!("{container_field}.securityContext.{key}"), p),
        (None, Some(p)) => (format!("spec.securityContext.{key}"), p),
        (None, None) => return Ok(None),
    };
    let profile = match (kind, localhost.filter(|p| !p.is_empty())) {
        ("RuntimeDefault", _) => SecurityProfile::RuntimeDefault,
        ("Unconfined", _) => SecurityProfile::Unconfined,
        ("Localhost", Some(p)) if key == SECCOMP_PROFILE => {
            let path = ctx.root_dir.join("seccomp").join(p);
            SecurityProfile::Localhost(path.to_string_lossy().into_owned())
        }
        ("Localhost", Some(p)) => SecurityProfile::Localhost(p.to_owned()),
        ("Localhost", None) => {
            let reason = "required for type Localhost";
            return Err(invalid(
                pod,
                format!("{field}.localhostProfile"),
                "",
                reason,
            ));
        }
        (other, _) => {
            let reason = "expected RuntimeDefault, Unconfined or Localhost";
            return Err(invalid(pod, format!("{field}.type"), other, reason));
        }
    };
    Ok(Some(profile))
}

/// The effective security context: container fields override the pod's;
/// without a `runAsUser`, the image's user is sent (its uid, else its user
/// name), as the kubelet sends it, and `runAsNonRoot` is checked against it
/// (the kubelet's `verifyRunAsNonRoot`).
pub(super) fn container_security(
    ctx: &NodeContext,
    pod: &Pod,
    c: &Container,
    field: &str,
    image_user: Option<ImageUser>,
) -> Result<ContainerSecurity, MappingError> {
    let spec = spec(pod);
    let psc = spec.security_context.clone().unwrap_or_default();
    let csc = c.security_context.clone().unwrap_or_default();
    let privileged = csc.privileged == Some(true);
    let spec_user = csc.run_as_user.or(psc.run_as_user);
    let non_root = csc.run_as_non_root.or(psc.run_as_non_root) == Some(true);
    if non_root && spec_user == Some(0) {
        return Err(invalid(
            pod,
            format!("{field}.securityContext.runAsUser"),
            "0",
            "runAsNonRoot forbids user 0",
        ));
    }
    let (run_as_user, run_as_username) = match (spec_user, image_user) {
        (Some(uid), _) => (Some(uid), String::new()),
        (None, Some(ImageUser::Uid(uid))) => (Some(uid), String::new()),
        (None, Some(ImageUser::Name(name))) => (None, name.to_owned()),
        (None, None) => (None, String::new()),
    };
    if non_root && spec_user.is_none() {
        let non_root_field = format!("{field}.securityContext.runAsNonRoot");
        match image_user {
            Some(ImageUser::Uid(0)) => {
                let reason = "the image runs as root (uid 0) and no runAsUser is set";
                return Err(invalid(pod, non_root_field, "true", reason));
            }
            Some(ImageUser::Name(name)) => {
                let reason = format!(
                    "the image runs as the non-numeric user {name:?}, which cannot be \
                     verified as non-root"
                );
                return Err(invalid(pod, non_root_field, "true", &reason));
            }
            _ => {}
        }
    }
    let (c_seccomp, p_seccomp) = (
        seccomp_spec(&csc.seccomp_profile),
        seccomp_spec(&psc.seccomp_profile),
    );
    let (c_apparmor, p_apparmor) = (
        apparmor_spec(&csc.app_armor_profile),
        apparmor_spec(&psc.app_armor_profile),
    );
    // Only an Unmasked /proc (procMount) drops the lists; a privileged
    // container gets them too, as the kubelet sends them (the runtime
    // then ignores them).
    let masked = csc.proc_mount.as_deref() != Some("Unmasked");
    let paths = |list: &[&str]| {
        if masked {
            list.iter().map(|p| p.to_string()).collect()
        } else {
            Vec::new()
        }
    };
    let caps = csc.capabilities.unwrap_or_default();
    Ok(ContainerSecurity {
        capabilities_add: caps.add.unwrap_or_default(),
        capabilities_drop: caps.drop.unwrap_or_default(),
        privileged,
        namespace_options: namespace_options(spec),
        run_as_user,
        run_as_group: csc.run_as_group.or(psc.run_as_group),
        run_as_username,
        readonly_rootfs: csc.read_only_root_filesystem == Some(true),
        supplemental_groups: supplemental_groups(spec),
        no_new_privs: csc.allow_privilege_escalation == Some(false),
        masked_paths: paths(&DEFAULT_MASKED_PATHS),
        readonly_paths: paths(&DEFAULT_READONLY_PATHS),
        // No profile is Unconfined, sent explicitly (the kubelet's
        // `getSeccompProfile` without `seccompDefault`).
        seccomp: Some(
            security_profile(ctx, pod, field, SECCOMP_PROFILE, c_seccomp, p_seccomp)?
                .unwrap_or(SecurityProfile::Unconfined),
        ),
        apparmor: security_profile(ctx, pod, field, APPARMOR_PROFILE, c_apparmor, p_apparmor)?,
    })
}
