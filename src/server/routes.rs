//! The kubelet server's paths and queries, parsed (pure). Invariant: any
//! path and query, however hostile, parses to a [`Route`] or to an error
//! naming what was wrong; nothing here panics or allocates beyond the input.

/// A pod named by a path: `{ns}/{pod}[/{uid}]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodPath {
    pub namespace: String,
    pub name: String,
    /// The optional `{uid}` segment: the static or the mirror UID.
    pub uid: Option<String>,
}

/// A container named by a path: `{ns}/{pod}[/{uid}]/{container}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerPath {
    pub pod: PodPath,
    pub container: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Healthz,
    Pods,
    StatsSummary,
    Metrics,
    MetricsProbes,
    Run(ContainerPath),
    Exec(ContainerPath),
    Attach(ContainerPath),
    PortForward(PodPath),
    ContainerLogs(ContainerPath),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// 404.
    #[error("{0}")]
    NotFound(String),
    /// 400.
    #[error("{0}")]
    BadRequest(String),
}

/// Paths longer than this are refused without a look.
pub const MAX_PATH: usize = 8192;

/// Decodes `%XX` escapes of one path segment; a bad escape or a result that
/// is not UTF-8 is an error.
pub fn percent_decode(segment: &str) -> Result<String, RouteError> {
    let bad =
        || RouteError::BadRequest(format!("bad percent-encoding in path segment {segment:?}"));
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).ok_or_else(bad)?;
            let hex = std::str::from_utf8(hex).map_err(|_| bad())?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| bad())
}

fn pod_path(what: &str, segs: &[String], with_uid: bool) -> Result<PodPath, RouteError> {
    match segs {
        [ns, name] => Ok(PodPath {
            namespace: ns.clone(),
            name: name.clone(),
            uid: None,
        }),
        [ns, name, uid] if with_uid => Ok(PodPath {
            namespace: ns.clone(),
            name: name.clone(),
            uid: Some(uid.clone()),
        }),
        _ => Err(RouteError::NotFound(format!(
            "/{what} expects /{what}/{{namespace}}/{{pod}}{}",
            if with_uid { "[/{uid}]" } else { "" }
        ))),
    }
}

fn container_path(
    what: &str,
    segs: &[String],
    with_uid: bool,
) -> Result<ContainerPath, RouteError> {
    let usage = || {
        RouteError::NotFound(format!(
            "/{what} expects /{what}/{{namespace}}/{{pod}}{}/{{container}}",
            if with_uid { "[/{uid}]" } else { "" }
        ))
    };
    let (container, pod) = segs.split_last().ok_or_else(usage)?;
    let pod = pod_path(what, pod, with_uid).map_err(|_| usage())?;
    Ok(ContainerPath {
        pod,
        container: container.clone(),
    })
}

/// The route of a request path (without its query).
pub fn parse(path: &str) -> Result<Route, RouteError> {
    if path.len() > MAX_PATH {
        return Err(RouteError::BadRequest(format!(
            "the path is {} bytes long (at most {MAX_PATH})",
            path.len()
        )));
    }
    let not_found = || RouteError::NotFound(format!("404 page not found: {:?}", truncate(path)));
    let rest = path.strip_prefix('/').ok_or_else(not_found)?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let raw: Vec<&str> = rest.split('/').collect();
    let (head, tail) = raw.split_first().ok_or_else(not_found)?;
    let segs = tail
        .iter()
        .map(|s| percent_decode(s))
        .collect::<Result<Vec<String>, RouteError>>()?;
    if segs.iter().any(String::is_empty) {
        return Err(RouteError::NotFound(format!(
            "an empty path segment in {:?}",
            truncate(path)
        )));
    }
    let none = segs.is_empty();
    let route = match *head {
        "healthz" if none => Route::Healthz,
        "pods" if none => Route::Pods,
        "stats" if segs == ["summary"] => Route::StatsSummary,
        "metrics" if none => Route::Metrics,
        "metrics" if segs == ["probes"] => Route::MetricsProbes,
        "run" => Route::Run(container_path("run", &segs, true)?),
        "exec" => Route::Exec(container_path("exec", &segs, true)?),
        "attach" => Route::Attach(container_path("attach", &segs, true)?),
        "portForward" => Route::PortForward(pod_path("portForward", &segs, true)?),
        "containerLogs" => Route::ContainerLogs(container_path("containerLogs", &segs, false)?),
        _ => return Err(not_found()),
    };
    Ok(route)
}

fn truncate(s: &str) -> &str {
    let mut end = s.len().min(200);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

fn pairs(query: &str) -> impl Iterator<Item = (String, String)> + '_ {
    url::form_urlencoded::parse(query.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned()))
}

/// The streams and command of an exec or attach request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamOptions {
    pub command: Vec<String>,
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
}

fn flag(v: &str) -> bool {
    matches!(v, "1" | "true" | "True" | "TRUE")
}

/// `?command=..&command=..&stdin=1&stdout=1&stderr=1&tty=1`, as the
/// kubelet's remotecommand options: at least one stream; no stderr with a
/// TTY (it is merged into stdout). `exec` needs a command.
pub fn stream_options(query: &str, exec: bool) -> Result<StreamOptions, RouteError> {
    let mut o = StreamOptions::default();
    for (k, v) in pairs(query) {
        match k.as_str() {
            "command" => o.command.push(v),
            "stdin" | "input" => o.stdin = flag(&v),
            "stdout" | "output" => o.stdout = flag(&v),
            "stderr" | "error" => o.stderr = flag(&v),
            "tty" => o.tty = flag(&v),
            _ => {}
        }
    }
    if !(o.stdin || o.stdout || o.stderr) {
        return Err(RouteError::BadRequest(
            "you must specify at least 1 of stdin, stdout, stderr".into(),
        ));
    }
    if o.tty && o.stderr {
        o.stderr = false;
    }
    if exec && o.command.iter().all(String::is_empty) {
        return Err(RouteError::BadRequest(
            "exec needs a command (?command=...)".into(),
        ));
    }
    Ok(o)
}

/// The `port` values of a port-forward request (each may be a comma list).
pub fn ports(query: &str) -> Result<Vec<i32>, RouteError> {
    let mut out = Vec::new();
    for (k, v) in pairs(query) {
        if k != "port" {
            continue;
        }
        for p in v.split(',') {
            let port: u16 = p
                .trim()
                .parse()
                .map_err(|_| RouteError::BadRequest(format!("unable to parse {p:?} as a port")))?;
            if port == 0 {
                return Err(RouteError::BadRequest(format!("port {p:?} must be > 0")));
            }
            out.push(i32::from(port));
        }
    }
    Ok(out)
}

/// `/run`'s `?cmd=`: split on single spaces, as the kubelet does.
pub fn run_command(query: &str) -> Result<Vec<String>, RouteError> {
    let cmd = pairs(query)
        .find(|(k, _)| k == "cmd")
        .map(|(_, v)| v)
        .unwrap_or_default();
    if cmd.trim().is_empty() {
        return Err(RouteError::BadRequest("run needs ?cmd=...".into()));
    }
    Ok(cmd.split(' ').map(str::to_owned).collect())
}

#[cfg(test)]
#[path = "routes_tests.rs"]
mod tests;
