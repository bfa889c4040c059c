//! Where container logs go: `--pod-logs-dir` / `podLogsDir` (the kubelet's
//! field, default `/var/log/pods`) and `--container-logs-dir` /
//! `containerLogsDir` (crilet's own: the kubelet hard-codes
//! `/var/log/containers`, where it keeps the symlinks log shippers tail).
//!
//! Both are checked as the kubelet checks `podLogsDir`: an absolute path,
//! normalized (what Go's `filepath.Clean` leaves unchanged: no `.`, `..`,
//! `//` or trailing `/`), ASCII only. In the config file an empty value is
//! the default and a relative one is taken relative to the file's
//! directory, as the kubelet resolves the path fields of its config file.
//!
//! Invariant: flag over file over default, and every value is checked
//! wherever it came from; an error names the flag, or the file and the
//! field, that gave the bad value.

use std::path::{Path, PathBuf};

use super::logs::pick;
use super::{ConfigError, ConfigFile, RunArgs};
use crate::logs::layout::{DEFAULT_CONTAINER_LOGS_DIR, DEFAULT_POD_LOGS_DIR, LogDirs};

/// Flags over file over defaults, each checked.
pub(super) fn resolve_log_dirs(
    args: &RunArgs,
    file: &ConfigFile,
    origin: &str,
) -> Result<LogDirs, ConfigError> {
    let pod_logs_dir = resolve_dir(
        args.pod_logs_dir.as_deref(),
        "--pod-logs-dir",
        file.pod_logs_dir.as_deref(),
        origin,
        "podLogsDir",
        DEFAULT_POD_LOGS_DIR,
    )?;
    let container_logs_dir = resolve_dir(
        args.container_logs_dir.as_deref(),
        "--container-logs-dir",
        file.container_logs_dir.as_deref(),
        origin,
        "containerLogsDir",
        DEFAULT_CONTAINER_LOGS_DIR,
    )?;
    Ok(LogDirs {
        pod_logs_dir,
        container_logs_dir,
    })
}

fn resolve_dir(
    flag: Option<&str>,
    flag_name: &'static str,
    file: Option<&str>,
    path: &str,
    field: &'static str,
    default: &str,
) -> Result<PathBuf, ConfigError> {
    // An empty field is Go's zero value: the default applies.
    let file = file
        .filter(|v| !v.is_empty())
        .map(|v| relative_to_file(path, v));
    let (value, at) = pick(
        flag.map(str::to_owned),
        flag_name,
        file,
        path,
        field,
        default.to_owned(),
    );
    check_dir(&value).map_err(|problem| at.error(&format!("{value:?}"), &problem))?;
    Ok(PathBuf::from(value))
}

/// A relative path of the config file, joined to the file's directory (and
/// cleaned, as Go's `filepath.Join` does); an absolute one as it is.
fn relative_to_file(config_file: &str, value: &str) -> String {
    if value.starts_with('/') {
        return value.to_owned();
    }
    let dir = match Path::new(config_file).parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_string_lossy().into_owned(),
        _ => ".".to_owned(),
    };
    go_clean(&format!("{dir}/{value}"))
}

/// The kubelet's checks of `podLogsDir`; the problem, if any.
pub(super) fn check_dir(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err("must not be empty".into());
    }
    if !value.starts_with('/') {
        return Err("must be an absolute path".into());
    }
    let clean = go_clean(value);
    if clean != value {
        return Err(format!("must be normalized (as {clean:?})"));
    }
    if !value.is_ascii() {
        return Err("must contain ASCII characters only".into());
    }
    Ok(())
}

/// Go's `filepath.Clean` on a Unix path: one `/` between names, no `.`,
/// each `..` taking out the name before it (or dropped at the root), no
/// trailing `/`; `.` for nothing left of a relative path.
pub(super) fn go_clean(path: &str) -> String {
    let rooted = path.starts_with('/');
    let mut names: Vec<&str> = Vec::new();
    for name in path.split('/') {
        match name {
            "" | "." => {}
            ".." => match names.last() {
                Some(&last) if last != ".." => {
                    names.pop();
                }
                // `/..` is `/`; a relative path keeps leading `..`s.
                _ if rooted => {}
                _ => names.push(".."),
            },
            name => names.push(name),
        }
    }
    let joined = names.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_owned(),
        (false, false) => joined,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::config::{parse_config_file, parse_flags, resolve};

    fn dirs(args: &[&str], file: &str, origin: &str) -> Result<LogDirs, String> {
        let f = parse_config_file(origin, file).unwrap();
        resolve(&parse_flags(args), &f, origin)
            .map(|s| s.log_dirs)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn go_clean_as_go() {
        let rows = [
            ("", "."),
            ("/", "/"),
            ("//", "/"),
            ("/var/log/pods", "/var/log/pods"),
            ("/var/log/pods/", "/var/log/pods"),
            ("/var//log/./pods", "/var/log/pods"),
            ("/var/log/../pods", "/var/pods"),
            ("/..", "/"),
            ("/../var", "/var"),
            ("a/../..", ".."),
            ("../a/./b/..", "../a"),
            ("./logs", "logs"),
            (".", "."),
        ];
        for (path, want) in rows {
            assert_eq!(go_clean(path), want, "{path:?}");
        }
    }

    #[test]
    fn defaults_are_the_kubelets() {
        let d = dirs(&[], "", "").unwrap();
        assert_eq!(d, LogDirs::default());
        assert_eq!(d.pod_logs_dir, Path::new("/var/log/pods"));
        assert_eq!(d.container_logs_dir, Path::new("/var/log/containers"));
    }

    #[test]
    fn flag_over_file_over_default() {
        let file = "podLogsDir: /srv/pods\ncontainerLogsDir: /srv/containers\n";
        let d = dirs(&[], file, "/etc/crilet/config.yaml").unwrap();
        assert_eq!(d.pod_logs_dir, Path::new("/srv/pods"));
        assert_eq!(d.container_logs_dir, Path::new("/srv/containers"));
        let d = dirs(
            &["--pod-logs-dir", "/a", "--container-logs-dir", "/b"],
            file,
            "/etc/crilet/config.yaml",
        )
        .unwrap();
        assert_eq!(d.pod_logs_dir, Path::new("/a"));
        assert_eq!(d.container_logs_dir, Path::new("/b"));
        // The root is a path like any other.
        let d = dirs(&["--pod-logs-dir", "/"], "", "").unwrap();
        assert_eq!(d.pod_logs_dir, Path::new("/"));
    }

    #[test]
    fn the_file_resolves_relative_paths_and_an_empty_one_is_the_default() {
        let file = "podLogsDir: logs/../pods\ncontainerLogsDir: \"\"\n";
        let d = dirs(&[], file, "/etc/crilet/config.yaml").unwrap();
        assert_eq!(d.pod_logs_dir, Path::new("/etc/crilet/pods"));
        assert_eq!(d.container_logs_dir, Path::new("/var/log/containers"));
        // A config file named relative to the working directory leaves the
        // path relative, which is refused (the kubelet's order too).
        let err = dirs(&[], "podLogsDir: pods\n", "k.yaml").unwrap_err();
        assert!(
            err.contains("config file k.yaml: podLogsDir: \"pods\": must be an absolute path"),
            "{err}"
        );
    }

    #[test]
    fn bad_values_name_the_flag_or_the_field() {
        let cases: &[(&[&str], &str, &str)] = &[
            (
                &["--pod-logs-dir", "var/log/pods"],
                "",
                "--pod-logs-dir \"var/log/pods\": must be an absolute path",
            ),
            (
                &["--pod-logs-dir", ""],
                "",
                "--pod-logs-dir \"\": must not be empty",
            ),
            (
                &["--pod-logs-dir", "/var/log/pods/"],
                "",
                "--pod-logs-dir \"/var/log/pods/\": must be normalized (as \"/var/log/pods\")",
            ),
            (
                &["--pod-logs-dir", "/var/log/../pods"],
                "",
                "must be normalized (as \"/var/pods\")",
            ),
            (
                &["--pod-logs-dir", "/var/log/pöds"],
                "",
                "--pod-logs-dir \"/var/log/pöds\": must contain ASCII characters only",
            ),
            (
                &["--container-logs-dir", "containers"],
                "",
                "--container-logs-dir \"containers\": must be an absolute path",
            ),
            (
                &[],
                "podLogsDir: /var/log//pods\n",
                "config file /k.yaml: podLogsDir: \"/var/log//pods\": must be normalized",
            ),
            (
                &[],
                "containerLogsDir: /var/lög\n",
                "config file /k.yaml: containerLogsDir: \"/var/lög\": must contain ASCII",
            ),
        ];
        for (args, file, want) in cases {
            let err = dirs(args, file, "/k.yaml").unwrap_err();
            assert!(err.contains(want), "{args:?} {file:?}: {err}");
        }
        // A good flag hides a bad field.
        let d = dirs(&["--pod-logs-dir", "/p"], "podLogsDir: /x/\n", "/k.yaml").unwrap();
        assert_eq!(d.pod_logs_dir, Path::new("/p"));
    }
}
