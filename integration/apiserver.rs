//! A double of the Kubernetes API server, kept for the faults a real
//! kube-apiserver cannot produce on cue: injected 500s, 401s and 403s that
//! clear when told, hung requests, dropped watches, and a server that is
//! down. What a real server decides (admission, owner references, graceful
//! deletion, field selectors) is tested against the real kube-apiserver
//! (`kube.rs`, `mirror.rs`); this double only has to behave enough like one
//! for crilet to work through the faults. Plain HTTP/1.1 on 127.0.0.1, JSON
//! only, serving pods, nodes and leases the way a kubelet-like client sees
//! them (server-assigned uid and resourceVersion, Status errors, graceful
//! pod deletion, NodeRestriction, watches).
//!
//! Invariant: all state sits in one `State` behind a std mutex that is never
//! held across an `.await`, and every change goes through `State::write`,
//! which stamps the next resourceVersion and publishes the watch event while
//! the lock is held. A watch therefore sees changes in resourceVersion order,
//! with no gap between the history it replays and the live feed.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::hash::{BuildHasher, RandomState};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use http_body_util::BodyExt;
use hyper::body::{Bytes, Frame, Incoming, SizeHint};
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HeaderName, USER_AGENT};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{broadcast, mpsc, watch};
use tokio_util::sync::CancellationToken;

// Kept beside this file: the benches include apiserver.rs by path.
#[path = "apiserver_events.rs"]
mod events_api;
#[path = "apiserver_reviews.rs"]
mod reviews;

const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
/// Watch events kept for watches that resume from a resourceVersion.
const HISTORY: usize = 4096;
/// A watch without timeoutSeconds ends after this (a real server picks 30 to 60 minutes).
const DEFAULT_WATCH_SECONDS: u64 = 1800;
const NAMESPACE_MISMATCH: &str =
    "the namespace of the provided object does not match the namespace sent on the request";

type Query = BTreeMap<String, String>;
/// The node a request speaks for: its bearer token is "node-token-<node>".
type Who<'a> = Option<&'a str>;

// ================================================================ public API

/// A fault applied to every request until cleared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    Status500,
    /// Requests are held unanswered until the fault is cleared or the server dropped.
    Hang,
    Unauthorized401,
    Forbidden403,
    /// Connections are closed without an answer.
    Down,
}

/// One HTTP request as the double saw it; `status` is 0 while unanswered (Hang).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    pub method: String,
    pub path: String,
    pub query: String,
    pub user_agent: String,
    pub status: u16,
}

/// The running double; dropping it stops the listener, its connections and watches.
pub struct ApiServer {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    fault: watch::Sender<Option<Fault>>,
    shutdown: CancellationToken,
    addr: SocketAddr,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A test that panicked with the lock held must not hide the state from the rest.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl ApiServer {
    pub async fn start() -> ApiServer {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let addr = listener.local_addr().expect("listener address");
        let shutdown = CancellationToken::new();
        let shared = Arc::new(Shared {
            state: Mutex::new(State::new(shutdown.child_token())),
            fault: watch::Sender::new(None),
            shutdown,
            addr,
        });
        tokio::spawn(accept_loop(listener, shared.clone()));
        ApiServer { shared }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.shared.addr)
    }

    /// Writes `<dir>/<node>.kubeconfig` for the node's identity and returns its path.
    pub fn kubeconfig(&self, dir: &Path, node: &str) -> PathBuf {
        let path = dir.join(format!("{node}.kubeconfig"));
        let user = format!("\"system:node:{node}\"");
        let text = format!(
            "apiVersion: v1\nkind: Config\n\
             clusters:\n- name: double\n  cluster:\n    server: {url}\n\
             contexts:\n- name: {user}\n  context:\n    cluster: double\n    user: {user}\n\
             current-context: {user}\n\
             users:\n- name: {user}\n  user:\n    token: node-token-{node}\n",
            url = self.url()
        );
        std::fs::write(&path, text).expect("write kubeconfig");
        path
    }

    pub fn pods(&self) -> Vec<Pod> {
        self.all(Kind::Pod)
    }

    pub fn pod(&self, ns: &str, name: &str) -> Option<Pod> {
        let key = Key::new(Kind::Pod, ns, name);
        self.shared.lock().objects.get(&key).cloned().map(typed)
    }

    pub fn nodes(&self) -> Vec<Node> {
        self.all(Kind::Node)
    }

    pub fn leases(&self) -> Vec<Lease> {
        self.all(Kind::Lease)
    }

    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared.lock().requests.clone()
    }

    /// As `kubectl delete [--grace-period=N]`: a bound pod is only marked for
    /// deletion unless the grace period is 0. A pod already gone is ignored.
    pub fn delete_pod(&self, ns: &str, name: &str, grace_seconds: Option<i64>) {
        let options = DeleteOptions {
            grace: grace_seconds,
            ..DeleteOptions::default()
        };
        let key = Key::new(Kind::Pod, ns, name);
        match self.shared.lock().delete(&key, &options, None) {
            Ok(_) => {}
            Err(e) if e.code == 404 => {}
            Err(e) => panic!("delete_pod {ns}/{name}: {}", e.message),
        }
    }

    /// As `kubectl edit`: replaces metadata and spec, keeps the status. Unconditional
    /// (the pod's resourceVersion is ignored); panics if the pod does not exist.
    pub fn update_pod(&self, pod: Pod) {
        let mut body = to_json(&pod);
        remove_meta(&mut body, "resourceVersion");
        let key = Key::new(Kind::Pod, &namespace_of(&body), meta(&body, "name"));
        if let Err(e) = self.shared.lock().update(&key, body, Part::Main, None) {
            panic!("update_pod {}/{}: {}", key.1, key.2, e.message);
        }
    }

    /// As another client would; panics on refusal (for example AlreadyExists).
    pub fn create_pod(&self, pod: Pod) -> Pod {
        let body = to_json(&pod);
        let ns = namespace_of(&body);
        match self.shared.lock().create(Kind::Pod, &ns, body, None) {
            Ok(created) => typed(created),
            Err(e) => panic!("create_pod in {ns}: {}", e.message),
        }
    }

    /// Removes the Node at once (nodes have no graceful deletion); a missing one is ignored.
    pub fn delete_node(&self, name: &str) {
        let key = Key::new(Kind::Node, "", name);
        let _ = self
            .shared
            .lock()
            .delete(&key, &DeleteOptions::default(), None);
    }

    pub fn set_fault(&self, fault: Fault) {
        self.shared.fault.send_replace(Some(fault));
    }

    pub fn clear_fault(&self) {
        self.shared.fault.send_replace(None);
    }

    /// Ends every open watch stream cleanly, as a server closing its watches does.
    pub fn drop_watches(&self) {
        let fresh = self.shared.shutdown.child_token();
        std::mem::replace(&mut self.shared.lock().watch_stop, fresh).cancel();
    }

    /// Some: every request must carry "Authorization: Bearer <token>" (else 401).
    pub fn set_token(&self, token: Option<String>) {
        self.shared.lock().token = token;
    }

    /// TokenReviews answer `token` with this user and groups.
    pub fn add_review_token(&self, token: &str, user: &str, groups: &[&str]) {
        self.shared.lock().reviews.add_token(token, user, groups);
    }

    /// SubjectAccessReviews allow `user` `verb` on `nodes/<subresource>`.
    pub fn grant(&self, user: &str, verb: &str, subresource: &str) {
        self.shared.lock().reviews.grant(user, verb, subresource);
    }

    /// How many SubjectAccessReviews were asked.
    pub fn access_reviews(&self) -> usize {
        let state = self.shared.lock();
        let path = reviews::ACCESS_REVIEWS;
        state.requests.iter().filter(|r| r.path == path).count()
    }

    /// From now on every Events request (events.k8s.io/v1 or core/v1) is
    /// refused with 403, as by a server whose RBAC lacks the node's events
    /// rule; nothing else changes.
    pub fn refuse_events(&self) {
        self.shared.lock().refuse_events = true;
    }

    /// The Events requests seen so far.
    pub fn event_requests(&self) -> Vec<RequestRecord> {
        let requests = self.requests().into_iter();
        requests
            .filter(|r| {
                let path: Vec<&str> = r.path.split('/').filter(|s| !s.is_empty()).collect();
                events_api::is_events(&path)
            })
            .collect()
    }

    /// How many TokenReviews were asked.
    pub fn token_reviews(&self) -> usize {
        let state = self.shared.lock();
        let path = reviews::TOKEN_REVIEWS;
        state.requests.iter().filter(|r| r.path == path).count()
    }

    fn all<T: DeserializeOwned>(&self, kind: Kind) -> Vec<T> {
        let state = self.shared.lock();
        let objects = state.objects.iter().filter(|(key, _)| key.0 == kind);
        objects.map(|(_, object)| typed(object.clone())).collect()
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.shared.shutdown.cancel();
    }
}

// =================================================================== HTTP

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let accepted = tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((stream, _)) = accepted else { continue };
        if *shared.fault.borrow() == Some(Fault::Down) {
            continue; // dropping the stream closes it
        }
        tokio::spawn(serve_connection(stream, shared.clone()));
    }
}

async fn serve_connection(stream: TcpStream, shared: Arc<Shared>) {
    let mut faults = shared.fault.subscribe();
    let shutdown = shared.shutdown.clone();
    let service = hyper::service::service_fn(move |req| handle(shared.clone(), req));
    let http = hyper::server::conn::http1::Builder::new();
    let connection = http.serve_connection(TokioIo::new(stream), service);
    // Leaving the select drops the connection, which closes the socket.
    tokio::select! {
        _ = connection => {}
        _ = shutdown.cancelled() => {}
        _ = faults.wait_for(|f| *f == Some(Fault::Down)) => {}
    }
}

/// What a request asks, taken from its head.
struct Call {
    method: String,
    path: String,
    query: Query,
    content_type: String,
    authorization: String,
}

enum Reply {
    Json(u16, Value),
    Watch(mpsc::UnboundedReceiver<Bytes>),
}

fn header(req: &Request<Incoming>, name: HeaderName) -> String {
    let value = req.headers().get(name).and_then(|v| v.to_str().ok());
    value.unwrap_or_default().to_owned()
}

/// Answers one request. An error return makes hyper close the connection
/// without writing a response: that is how a request meets `Fault::Down`.
async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> std::io::Result<Response<Body>> {
    let raw_query = req.uri().query().unwrap_or_default().to_owned();
    let call = Call {
        method: req.method().to_string(),
        path: req.uri().path().to_owned(),
        query: parse_query(&raw_query),
        content_type: header(&req, CONTENT_TYPE),
        authorization: header(&req, AUTHORIZATION),
    };
    let record = RequestRecord {
        method: call.method.clone(),
        path: call.path.clone(),
        query: raw_query,
        user_agent: header(&req, USER_AGENT),
        status: 0,
    };
    let index = {
        let mut state = shared.lock();
        state.requests.push(record);
        state.requests.len() - 1
    };

    let mut faults = shared.fault.subscribe();
    let fault = match faults.wait_for(|f| *f != Some(Fault::Hang)).await {
        Ok(fault) => *fault,
        Err(_) => None,
    };
    if fault == Some(Fault::Down) {
        return Err(std::io::Error::other("the API server double is down"));
    }
    let body = match req.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let reply = match fault {
        Some(Fault::Status500) => Err(ApiError::internal("injected fault")),
        Some(Fault::Unauthorized401) => Err(ApiError::unauthorized()),
        Some(Fault::Forbidden403) => Err(ApiError::new(403, "Forbidden", "injected fault")),
        _ => route(&shared, &call, &body),
    };
    let (status, body) = match reply {
        Ok(Reply::Json(code, value)) => (code, Body::json(&value)),
        Ok(Reply::Watch(events)) => (200, Body::Watch(events)),
        Err(e) => (e.code, Body::json(&e.status())),
    };
    shared.lock().requests[index].status = status;
    let response = Response::builder().status(status);
    let response = response.header(CONTENT_TYPE, "application/json").body(body);
    Ok(response.expect("a valid status and header"))
}

/// Which part of an object a write may change.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Main,
    Status,
}

fn route(shared: &Shared, call: &Call, body: &[u8]) -> Result<Reply, ApiError> {
    let mut state = shared.lock();
    if let Some(token) = &state.token
        && call.authorization != format!("Bearer {token}")
    {
        return Err(ApiError::unauthorized());
    }
    let reviews = [reviews::TOKEN_REVIEWS, reviews::ACCESS_REVIEWS];
    if call.method == "POST"
        && reviews.contains(&call.path.as_str())
        && let Some(review) = state.reviews.answer(&call.path, &parse(body)?)
    {
        return Ok(Reply::Json(201, review));
    }
    let path: Vec<&str> = call.path.split('/').filter(|s| !s.is_empty()).collect();
    if events_api::is_events(&path) {
        let who = call.authorization.strip_prefix("Bearer node-token-");
        let body = if body.is_empty() {
            Value::Null
        } else {
            parse(body)?
        };
        let stamp = state.requests.len() as u64;
        let refused = state.refuse_events;
        let answer = events_api::answer(refused, &call.method, &path, who, &body, stamp);
        return answer
            .map(|(code, object)| Reply::Json(code, object))
            .map_err(|(code, reason, message)| ApiError::new(code, reason, message));
    }
    let Some((kind, ns, rest)) = resource_path(&path) else {
        return match call.method.as_str() {
            "GET" => discovery(&path, shared.addr).map(|doc| Reply::Json(200, doc)),
            _ => Err(ApiError::method_not_allowed()),
        };
    };
    let (name, part) = match rest.as_slice() {
        [] => (None, Part::Main),
        [name] => (Some(*name), Part::Main),
        [name, "status"] if kind.has_status() => (Some(*name), Part::Status),
        _ => return Err(ApiError::path_not_found()),
    };
    let method = call.method.as_str();
    let media = call.content_type.as_str();
    if matches!(method, "POST" | "PUT" | "PATCH") && !media.contains("json") {
        return Err(ApiError::new(415, "UnsupportedMediaType", "JSON only"));
    }
    let who = call.authorization.strip_prefix("Bearer node-token-");
    let key = |name: &str| Key::new(kind, ns.unwrap_or_default(), name);
    let watch = call.query.get("watch").map(String::as_str);
    let value = match (method, name) {
        ("GET", None) => {
            let filter = Filter::new(kind, ns, &call.query)?;
            if let Some("true" | "1") = watch {
                return state.watch(filter, &call.query).map(Reply::Watch);
            }
            state.list(&filter)
        }
        ("POST", None) if ns.is_some() || !kind.namespaced() => {
            let created = state.create(kind, ns.unwrap_or_default(), parse(body)?, who)?;
            return Ok(Reply::Json(201, created));
        }
        ("GET", Some(name)) => state.get(&key(name))?,
        ("PUT", Some(name)) => state.update(&key(name), parse(body)?, part, who)?,
        ("PATCH", Some(name)) => state.patch(&key(name), &parse(body)?, media, part, who)?,
        ("DELETE", Some(name)) if part == Part::Main => {
            let options = DeleteOptions::parse(&call.query, body)?;
            state.delete(&key(name), &options, who)?
        }
        _ => return Err(ApiError::method_not_allowed()),
    };
    Ok(Reply::Json(200, value))
}

/// Splits `/api/v1/[namespaces/<ns>/]<plural>/...` (or the coordination group's
/// equivalent) into kind, namespace and what follows the collection.
fn resource_path<'a>(path: &[&'a str]) -> Option<(Kind, Option<&'a str>, Vec<&'a str>)> {
    let (group, rest) = match path {
        ["api", "v1", rest @ ..] => ("", rest),
        ["apis", "coordination.k8s.io", "v1", rest @ ..] => ("coordination.k8s.io", rest),
        _ => return None,
    };
    let (ns, rest) = match rest {
        ["namespaces", ns, rest @ ..] => (Some(*ns), rest),
        _ => (None, rest),
    };
    let (plural, rest) = rest.split_first()?;
    let kinds = [Kind::Pod, Kind::Node, Kind::Lease];
    let kind = kinds
        .into_iter()
        .find(|k| k.plural() == *plural && k.group() == group)?;
    (ns.is_none() || kind.namespaced()).then(|| (kind, ns, rest.to_vec()))
}

// ========================================================== generic store

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Pod,
    Node,
    Lease,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Pod => "Pod",
            Kind::Node => "Node",
            Kind::Lease => "Lease",
        }
    }

    fn plural(self) -> &'static str {
        match self {
            Kind::Pod => "pods",
            Kind::Node => "nodes",
            Kind::Lease => "leases",
        }
    }

    fn group(self) -> &'static str {
        match self {
            Kind::Lease => "coordination.k8s.io",
            _ => "",
        }
    }

    fn api_version(self) -> &'static str {
        match self {
            Kind::Lease => "coordination.k8s.io/v1",
            _ => "v1",
        }
    }

    fn namespaced(self) -> bool {
        self != Kind::Node
    }

    fn has_status(self) -> bool {
        self != Kind::Lease
    }

    /// Decodes a body as the typed object, as the real server does: a wrong field
    /// type is a 400, unknown fields are dropped, kind and apiVersion get set.
    fn normalize(self, body: Value) -> Result<Value, ApiError> {
        fn via<T: DeserializeOwned + Serialize>(body: Value) -> Result<Value, ApiError> {
            let decoded: Result<T, _> = serde_json::from_value(body);
            decoded
                .map(|object| to_json(&object))
                .map_err(ApiError::bad_request)
        }
        match self {
            Kind::Pod => via::<Pod>(body),
            Kind::Node => via::<Node>(body),
            Kind::Lease => via::<Lease>(body),
        }
    }
}

/// Where an object is stored: kind, namespace ("" when cluster-scoped), name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Key(Kind, String, String);

impl Key {
    fn new(kind: Kind, ns: &str, name: &str) -> Key {
        let ns = if kind.namespaced() { ns } else { "" };
        Key(kind, ns.to_owned(), name.to_owned())
    }

    fn of(kind: Kind, object: &Value) -> Key {
        Key::new(kind, meta(object, "namespace"), meta(object, "name"))
    }
}

struct Event {
    kind: Kind,
    rv: u64,
    verb: &'static str,
    old: Option<Value>,
    object: Value,
}

struct State {
    objects: BTreeMap<Key, Value>,
    /// The last resourceVersion handed out.
    rv: u64,
    history: VecDeque<Arc<Event>>,
    /// Events up to this resourceVersion have left `history`.
    compacted: u64,
    events: broadcast::Sender<Arc<Event>>,
    requests: Vec<RequestRecord>,
    token: Option<String>,
    watch_stop: CancellationToken,
    reviews: reviews::Reviews,
    /// Events requests are answered 403 (`ApiServer::refuse_events`).
    refuse_events: bool,
}

enum Verb {
    Create,
    Update,
    UpdateStatus,
    Delete,
}

impl State {
    fn new(watch_stop: CancellationToken) -> State {
        State {
            objects: BTreeMap::new(),
            rv: 0,
            history: VecDeque::new(),
            compacted: 0,
            events: broadcast::channel(1024).0,
            requests: Vec::new(),
            token: None,
            watch_stop,
            reviews: Default::default(),
            refuse_events: false,
        }
    }

    /// The one place objects change: stamps the next resourceVersion, stores the
    /// object (removes it for DELETED) and publishes the event.
    fn write(
        &mut self,
        kind: Kind,
        verb: &'static str,
        old: Option<Value>,
        mut object: Value,
    ) -> Value {
        self.rv += 1;
        object["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        let key = Key::of(kind, &object);
        if verb == "DELETED" {
            self.objects.remove(&key);
        } else {
            self.objects.insert(key, object.clone());
        }
        let rv = self.rv;
        let event = Arc::new(Event {
            kind,
            rv,
            verb,
            old,
            object: object.clone(),
        });
        self.history.push_back(event.clone());
        if self.history.len() > HISTORY
            && let Some(gone) = self.history.pop_front()
        {
            self.compacted = gone.rv;
        }
        let _ = self.events.send(event); // nobody watching is fine
        object
    }

    fn get(&self, key: &Key) -> Result<Value, ApiError> {
        let found = self.objects.get(key).cloned();
        found.ok_or_else(|| ApiError::not_found(key))
    }

    fn list(&self, filter: &Filter) -> Value {
        let items: Vec<Value> = (self.selected(filter).into_iter())
            .map(|mut item| {
                // The items of a real list carry no kind or apiVersion of their own.
                if let Some(fields) = item.as_object_mut() {
                    fields.remove("kind");
                    fields.remove("apiVersion");
                }
                item
            })
            .collect();
        json!({
            "kind": format!("{}List", filter.kind.name()),
            "apiVersion": filter.kind.api_version(),
            "metadata": {"resourceVersion": self.rv.to_string()},
            "items": items,
        })
    }

    fn selected(&self, filter: &Filter) -> Vec<Value> {
        let objects = self.objects.iter().filter(|(key, _)| key.0 == filter.kind);
        let selected = objects.filter(|(_, object)| filter.matches(object));
        selected.map(|(_, object)| object.clone()).collect()
    }

    fn create(&mut self, kind: Kind, ns: &str, body: Value, who: Who) -> Result<Value, ApiError> {
        let mut object = kind.normalize(body)?;
        match meta(&object, "namespace").to_owned() {
            _ if !kind.namespaced() => remove_meta(&mut object, "namespace"),
            given if given.is_empty() => object["metadata"]["namespace"] = json!(ns),
            given if given != ns => return Err(ApiError::bad_request(NAMESPACE_MISMATCH)),
            _ => {}
        }
        let key = Key::of(kind, &object);
        validate(&key, &object)?;
        self.admit(&key, Verb::Create, who, &object)?;
        if !meta(&object, "resourceVersion").is_empty() {
            let why = "resourceVersion should not be set on objects to be created";
            return Err(ApiError::internal(why));
        }
        if self.objects.contains_key(&key) {
            return Err(ApiError::already_exists(&key));
        }
        let now = to_json(&Time(Timestamp::now()));
        let metadata = object["metadata"]
            .as_object_mut()
            .expect("objects have metadata");
        metadata.insert("uid".into(), json!(new_uid()));
        metadata.insert("creationTimestamp".into(), now);
        metadata.remove("deletionTimestamp");
        metadata.remove("deletionGracePeriodSeconds");
        if kind == Kind::Pod {
            default_pod(&mut object);
        }
        Ok(self.write(kind, "ADDED", None, object))
    }

    /// PUT: the main resource takes everything but the status and the fields the
    /// server owns; the status subresource takes only the status.
    fn update(&mut self, key: &Key, body: Value, part: Part, who: Who) -> Result<Value, ApiError> {
        let old = self.get(key)?;
        let body = key.0.normalize(body)?;
        check_update(key, &body, &old)?;
        let verb = if part == Part::Main {
            Verb::Update
        } else {
            Verb::UpdateStatus
        };
        self.admit(key, verb, who, &old)?;
        let (mut new, status) = match part {
            Part::Main => (body, old.get("status").cloned()),
            Part::Status => (old.clone(), body.get("status").cloned()),
        };
        let owned_by_server = [
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ];
        for field in owned_by_server {
            set_or_remove(&mut new["metadata"], field, old["metadata"].get(field));
        }
        if key.0.has_status() {
            set_or_remove(&mut new, "status", status.as_ref());
        }
        // A write that changes nothing is not stored: it neither bumps the
        // resourceVersion nor wakes watchers, as with etcd-backed storage.
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
        if new == old {
            return Ok(old);
        }
        Ok(self.write(key.0, "MODIFIED", Some(old), new))
    }

    /// PATCH: the merged object is then written as a PUT would be. It keeps the
    /// stored resourceVersion unless the patch names one, which is then a precondition.
    fn patch(
        &mut self,
        key: &Key,
        patch: &Value,
        media: &str,
        part: Part,
        who: Who,
    ) -> Result<Value, ApiError> {
        let mut merged = self.get(key)?;
        match media.split(';').next().unwrap_or_default().trim() {
            "application/merge-patch+json" => merge_patch(&mut merged, patch),
            "application/strategic-merge-patch+json" => strategic_merge(&mut merged, patch, ""),
            other => {
                let why =
                    format!("the double takes merge and strategic merge patches, not {other:?}");
                return Err(ApiError::new(415, "UnsupportedMediaType", why));
            }
        }
        self.update(key, merged, part, who)
    }

    fn delete(&mut self, key: &Key, options: &DeleteOptions, who: Who) -> Result<Value, ApiError> {
        let old = self.get(key)?;
        self.admit(key, Verb::Delete, who, &old)?;
        let (uid, rv) = (meta(&old, "uid"), meta(&old, "resourceVersion"));
        if let Some(want) = options.uid.as_deref().filter(|want| *want != uid) {
            let why = format!(
                "Precondition failed: UID in precondition: {want}, UID in object meta: {uid}"
            );
            return Err(ApiError::conflict(key, &why));
        }
        if let Some(want) = options
            .resource_version
            .as_deref()
            .filter(|want| *want != rv)
        {
            let why = format!(
                "Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {rv}"
            );
            return Err(ApiError::conflict(key, &why));
        }
        if key.0 == Kind::Pod {
            return Ok(self.delete_pod(old, options.grace));
        }
        let details = json!({"name": key.2, "kind": key.0.plural(), "uid": uid});
        self.write(key.0, "DELETED", Some(old.clone()), old);
        Ok(json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Success", "details": details,
        }))
    }

    /// The Node authorizer and the NodeRestriction admission plugin, for requests
    /// made with a node's token. `object` is the new object for a create and the
    /// stored one otherwise.
    fn admit(&self, key: &Key, verb: Verb, who: Who, object: &Value) -> Result<(), ApiError> {
        let Some(node) = who else { return Ok(()) };
        match key.0 {
            Kind::Pod => self.admit_pod(key, node, verb, object),
            Kind::Node => admit_node(key, node),
            Kind::Lease => admit_lease(key, node),
        }
    }
}

/// An update must name the stored object, and its resourceVersion and uid,
/// when given, must be the stored ones.
fn check_update(key: &Key, body: &Value, old: &Value) -> Result<(), ApiError> {
    let (name, ns) = (meta(body, "name"), meta(body, "namespace"));
    if name != key.2 {
        let why = format!(
            "the name of the object ({name}) does not match the name on the URL ({})",
            key.2
        );
        return Err(ApiError::bad_request(why));
    }
    if key.0.namespaced() && !ns.is_empty() && ns != key.1 {
        return Err(ApiError::bad_request(NAMESPACE_MISMATCH));
    }
    let (rv, stored_rv) = (meta(body, "resourceVersion"), meta(old, "resourceVersion"));
    if !rv.is_empty() && rv != stored_rv {
        let why = "the object has been modified; please apply your changes to the latest version and try again";
        return Err(ApiError::conflict(key, why));
    }
    let (uid, stored_uid) = (meta(body, "uid"), meta(old, "uid"));
    if !uid.is_empty() && uid != stored_uid {
        let why = format!(
            "Precondition failed: UID in precondition: {uid}, UID in object meta: {stored_uid}"
        );
        return Err(ApiError::conflict(key, &why));
    }
    Ok(())
}

fn validate(key: &Key, object: &Value) -> Result<(), ApiError> {
    let name = key.2.as_str();
    if name.is_empty() {
        let why = "metadata.name: Required value: name or generateName is required";
        return Err(ApiError::invalid(key, why));
    }
    let alphanumeric = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let label_ok = |label: &str| {
        let ends = label.starts_with(alphanumeric) && label.ends_with(alphanumeric);
        ends && label.chars().all(|c| alphanumeric(c) || c == '-')
    };
    if name.len() > 253 || !name.split('.').all(label_ok) {
        let why = format!(
            "metadata.name: Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case \
             alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
        );
        return Err(ApiError::invalid(key, &why));
    }
    if key.0 == Kind::Pod {
        return validate_pod(key, object);
    }
    Ok(())
}

#[derive(Default)]
struct DeleteOptions {
    grace: Option<i64>,
    uid: Option<String>,
    resource_version: Option<String>,
}

impl DeleteOptions {
    /// From the body (a DeleteOptions object) when there is one, else from the query.
    fn parse(query: &Query, body: &[u8]) -> Result<DeleteOptions, ApiError> {
        if body.iter().any(|b| !b.is_ascii_whitespace()) {
            let options = parse(body)?;
            let preconditions = &options["preconditions"];
            let string = |v: &Value| v.as_str().map(str::to_owned);
            return Ok(DeleteOptions {
                grace: options["gracePeriodSeconds"].as_i64(),
                uid: string(&preconditions["uid"]),
                resource_version: string(&preconditions["resourceVersion"]),
            });
        }
        let grace = match query.get("gracePeriodSeconds") {
            Some(g) => Some(g.parse().map_err(ApiError::bad_request)?),
            None => None,
        };
        Ok(DeleteOptions {
            grace,
            ..DeleteOptions::default()
        })
    }
}

// =================================================================== pods

fn validate_pod(key: &Key, pod: &Value) -> Result<(), ApiError> {
    let containers = items(&pod["spec"]["containers"]);
    if containers.is_empty() {
        return Err(ApiError::invalid(key, "spec.containers: Required value"));
    }
    match containers.iter().position(|c| text(&c["image"]).is_empty()) {
        Some(i) => {
            let why = format!("spec.containers[{i}].image: Required value");
            Err(ApiError::invalid(key, &why))
        }
        None => Ok(()),
    }
}

/// Part of the defaulting a created pod gets, and its initial status.
fn default_pod(pod: &mut Value) {
    let defaults = [
        ("restartPolicy", json!("Always")),
        ("dnsPolicy", json!("ClusterFirst")),
        ("terminationGracePeriodSeconds", json!(30)),
        ("schedulerName", json!("default-scheduler")),
    ];
    for (field, value) in defaults {
        if pod["spec"].get(field).is_none() {
            pod["spec"][field] = value;
        }
    }
    pod["status"] = json!({"phase": "Pending"});
}

impl State {
    /// Pod deletion as the pod registry does it: a bound pod that has not
    /// finished is only marked (deletionTimestamp = now + grace) and waits for
    /// its kubelet to delete it with grace 0; a shorter grace on a marked pod
    /// brings its deadline forward, a longer one changes nothing.
    fn delete_pod(&mut self, old: Value, grace: Option<i64>) -> Value {
        let finished = matches!(text(&old["status"]["phase"]), "Succeeded" | "Failed");
        let unbound = text(&old["spec"]["nodeName"]).is_empty();
        let default = old["spec"]["terminationGracePeriodSeconds"].as_i64();
        let grace = grace.or(default).unwrap_or(30).max(0);
        if grace == 0 || unbound || finished {
            return self.write(Kind::Pod, "DELETED", Some(old.clone()), old);
        }
        let marked: Option<Timestamp> = text(&old["metadata"]["deletionTimestamp"]).parse().ok();
        let deadline = match marked {
            None => Timestamp::now() + SignedDuration::from_secs(grace),
            Some(at) => {
                let current = old["metadata"]["deletionGracePeriodSeconds"].as_i64();
                let current = current.unwrap_or(0);
                if grace >= current {
                    return old;
                }
                at - SignedDuration::from_secs(current - grace)
            }
        };
        let mut new = old.clone();
        new["metadata"]["deletionTimestamp"] = to_json(&Time(deadline));
        new["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
        self.write(Kind::Pod, "MODIFIED", Some(old), new)
    }

    /// What a node may do to pods: create its own mirror pods, write the status
    /// of and delete the pods bound to it, and nothing else.
    fn admit_pod(&self, key: &Key, node: &str, verb: Verb, pod: &Value) -> Result<(), ApiError> {
        let deny = |why: String| Err(ApiError::forbidden(key, &why));
        let bound_here = text(&pod["spec"]["nodeName"]) == node;
        match verb {
            Verb::Create => self.admit_mirror_pod(key, node, pod),
            Verb::Update => deny(format!(
                "User \"system:node:{node}\" cannot update resource \"pods\" in API group \"\" in the namespace {:?}",
                key.1
            )),
            Verb::UpdateStatus if !bound_here => deny(format!(
                "node {node:?} can only update pod status for pods with spec.nodeName set to itself"
            )),
            Verb::Delete if !bound_here => deny(format!(
                "node {node:?} can only delete pods with spec.nodeName set to itself"
            )),
            _ => Ok(()),
        }
    }

    /// A node may create only mirror pods bound to itself, owned by its Node as
    /// controller, and referring to no other API object.
    fn admit_mirror_pod(&self, key: &Key, node: &str, pod: &Value) -> Result<(), ApiError> {
        let deny = |why: String| Err(ApiError::forbidden(key, &why));
        if pod["metadata"]["annotations"]
            .get(MIRROR_ANNOTATION)
            .is_none()
        {
            return deny(format!(
                "pod does not have {MIRROR_ANNOTATION:?} annotation, node {node:?} can only create mirror pods"
            ));
        }
        if text(&pod["spec"]["nodeName"]) != node {
            return deny(format!(
                "node {node:?} can only create pods with spec.nodeName set to itself"
            ));
        }
        let owners = items(&pod["metadata"]["ownerReferences"]);
        let [owner] = owners else {
            let which = match owners {
                [] => "an owner reference",
                _ => "a single owner reference",
            };
            return deny(format!(
                "node {node:?} can only create pods with {which} set to itself"
            ));
        };
        if owner["apiVersion"] != "v1" || owner["kind"] != "Node" || owner["name"] != node {
            return deny(format!(
                "node {node:?} can only create pods with an owner reference set to itself"
            ));
        }
        if owner["controller"] != true {
            return deny(format!(
                "node {node:?} can only create pods with a controller owner reference set to itself"
            ));
        }
        if owner["blockOwnerDeletion"] == true {
            return deny(format!(
                "node {node:?} must not set blockOwnerDeletion on an owner reference"
            ));
        }
        let registered = self.get(&Key::new(Kind::Node, "", node))?;
        let (given, actual) = (text(&owner["uid"]), meta(&registered, "uid"));
        if given != actual {
            return deny(format!(
                "node {node} UID mismatch: expected {given} got {actual}"
            ));
        }
        let spec = &pod["spec"];
        if !text(&spec["serviceAccountName"]).is_empty() {
            return deny(format!(
                "node {node:?} can not create pods that reference a service account"
            ));
        }
        let references = [
            (
                "secrets",
                &["secret", "secretKeyRef", "secretRef", "imagePullSecrets"][..],
            ),
            (
                "configmaps",
                &["configMap", "configMapKeyRef", "configMapRef"][..],
            ),
            ("persistentvolumeclaims", &["persistentVolumeClaim"][..]),
        ];
        match references.iter().find(|(_, keys)| mentions(spec, keys)) {
            Some((what, _)) => deny(format!(
                "node {node:?} can not create pods that reference {what}"
            )),
            None => Ok(()),
        }
    }
}

/// Whether any of `keys` is set (not null, not empty) anywhere under `value`.
fn mentions(value: &Value, keys: &[&str]) -> bool {
    let set = |v: &Value| !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty());
    match value {
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| (keys.contains(&k.as_str()) && set(v)) || mentions(v, keys)),
        Value::Array(values) => values.iter().any(|v| mentions(v, keys)),
        _ => false,
    }
}

// ================================================================== nodes

/// A node may write only its own Node object.
fn admit_node(key: &Key, node: &str) -> Result<(), ApiError> {
    if key.2 == node {
        return Ok(());
    }
    let why = format!("node {node:?} is not allowed to modify node {:?}", key.2);
    Err(ApiError::forbidden(key, &why))
}

// ================================================================= leases

/// A node may write only its own Lease, in kube-node-lease.
fn admit_lease(key: &Key, node: &str) -> Result<(), ApiError> {
    let why = if key.1 != NODE_LEASE_NAMESPACE {
        format!("can only access leases in the {NODE_LEASE_NAMESPACE:?} system namespace")
    } else if key.2 != node {
        "can only access node lease with the same name as the requesting node".to_owned()
    } else {
        return Ok(());
    };
    Err(ApiError::forbidden(key, &why))
}

// ================================================================ watches

/// Which objects a list or watch is about.
struct Filter {
    kind: Kind,
    namespace: Option<String>,
    fields: Vec<Term>,
    labels: Vec<Term>,
}

/// One term of an equality-based selector.
enum Term {
    Is(String, String),
    IsNot(String, String),
    Has(String),
    HasNot(String),
}

impl Term {
    fn key(&self) -> &str {
        match self {
            Term::Is(key, _) | Term::IsNot(key, _) | Term::Has(key) | Term::HasNot(key) => key,
        }
    }

    fn holds(&self, value: Option<&str>) -> bool {
        match self {
            Term::Is(_, want) => value == Some(want),
            Term::IsNot(_, want) => value != Some(want),
            Term::Has(_) => value.is_some(),
            Term::HasNot(_) => value.is_none(),
        }
    }
}

/// Field selectors each kind supports, with the value of an absent field.
fn selectable_fields(kind: Kind) -> &'static [(&'static str, &'static str)] {
    match kind {
        Kind::Pod => &[
            ("metadata.name", ""),
            ("metadata.namespace", ""),
            ("spec.nodeName", ""),
            ("spec.restartPolicy", ""),
            ("spec.schedulerName", ""),
            ("spec.serviceAccountName", ""),
            ("spec.hostNetwork", "false"),
            ("status.phase", ""),
            ("status.podIP", ""),
            ("status.nominatedNodeName", ""),
        ],
        Kind::Node => &[("metadata.name", ""), ("spec.unschedulable", "false")],
        Kind::Lease => &[("metadata.name", ""), ("metadata.namespace", "")],
    }
}

impl Filter {
    fn new(kind: Kind, namespace: Option<&str>, query: &Query) -> Result<Filter, ApiError> {
        let selector = |name: &str| query.get(name).map(String::as_str).unwrap_or_default();
        let fields = parse_selector(selector("fieldSelector"), false)?;
        let supported = |term: &&Term| selectable_fields(kind).iter().any(|f| f.0 == term.key());
        if let Some(term) = fields.iter().find(|term| !supported(term)) {
            let why = format!("field label not supported: {}", term.key());
            return Err(ApiError::bad_request(why));
        }
        let labels = parse_selector(selector("labelSelector"), true)?;
        let namespace = namespace.map(str::to_owned);
        Ok(Filter {
            kind,
            namespace,
            fields,
            labels,
        })
    }

    fn matches(&self, object: &Value) -> bool {
        if let Some(ns) = &self.namespace
            && ns != meta(object, "namespace")
        {
            return false;
        }
        let fields = selectable_fields(self.kind);
        let field = |key: &str| {
            let absent = fields.iter().find(|f| f.0 == key).map_or("", |f| f.1);
            match key.split('.').fold(object, |v, k| &v[k]) {
                Value::Null => absent.to_owned(),
                Value::String(s) => s.clone(),
                other => other.to_string(),
            }
        };
        let labels = &object["metadata"]["labels"];
        let fields_hold = self
            .fields
            .iter()
            .all(|t| t.holds(Some(field(t.key()).as_str())));
        fields_hold
            && self
                .labels
                .iter()
                .all(|t| t.holds(labels[t.key()].as_str()))
    }

    /// The event this watch sends for a change, if any: an object entering the
    /// selection is ADDED, one leaving it DELETED (as its last selected state).
    fn render(&self, event: &Event) -> Option<Bytes> {
        if event.kind != self.kind {
            return None;
        }
        let before = event.old.as_ref().is_some_and(|old| self.matches(old));
        let after = self.matches(&event.object);
        match (event.verb, before, after) {
            ("DELETED", true, _) | ("ADDED", _, true) | ("MODIFIED", true, true) => {
                Some(event_line(event.verb, &event.object))
            }
            ("MODIFIED", false, true) => Some(event_line("ADDED", &event.object)),
            ("MODIFIED", true, false) => {
                let mut last = event.old.clone().unwrap_or_default();
                last["metadata"]["resourceVersion"] = json!(event.rv.to_string());
                Some(event_line("DELETED", &last))
            }
            _ => None,
        }
    }
}

/// `k=v`, `k==v`, `k!=v`, and for labels also `k` and `!k`.
fn parse_selector(selector: &str, labels: bool) -> Result<Vec<Term>, ApiError> {
    let term = |t: &str| {
        let pair = |sep: &str| {
            let (k, v) = t.split_once(sep)?;
            Some((k.trim().to_owned(), v.trim().to_owned()))
        };
        if let Some((k, v)) = pair("!=") {
            Some(Term::IsNot(k, v))
        } else if let Some((k, v)) = pair("==").or_else(|| pair("=")) {
            Some(Term::Is(k, v))
        } else if !labels || t.contains([' ', '(']) {
            None
        } else if let Some(k) = t.strip_prefix('!') {
            Some(Term::HasNot(k.to_owned()))
        } else {
            Some(Term::Has(t.to_owned()))
        }
    };
    let terms = selector.split(',').map(str::trim).filter(|t| !t.is_empty());
    let parsed = terms.map(|t| {
        let why =
            format!("unable to parse requirement {t:?}: the double takes equality selectors only");
        term(t).ok_or_else(|| ApiError::bad_request(why))
    });
    parsed.collect()
}

fn event_line(verb: &str, object: &Value) -> Bytes {
    let event = json!({"type": verb, "object": object});
    let mut line = serde_json::to_vec(&event).expect("JSON serializes");
    line.push(b'\n');
    Bytes::from(line)
}

impl State {
    /// Starts a watch. Without a resourceVersion (or with "0") it first sends
    /// ADDED for each current object; with one, every change after it. A version
    /// older than the kept history gets an ERROR event with a 410 Expired Status.
    fn watch(
        &mut self,
        filter: Filter,
        query: &Query,
    ) -> Result<mpsc::UnboundedReceiver<Bytes>, ApiError> {
        let (tx, rx) = mpsc::unbounded_channel();
        let since = query.get("resourceVersion").map_or("", String::as_str);
        let after = match since {
            "" | "0" => {
                let current = self.selected(&filter).into_iter();
                current.for_each(|object| drop(tx.send(event_line("ADDED", &object))));
                self.rv
            }
            version => {
                let why = format!("invalid resourceVersion {version:?}");
                let rv: u64 = version.parse().map_err(|_| ApiError::bad_request(why))?;
                if rv < self.compacted {
                    let why = format!("too old resource version: {rv} ({})", self.compacted + 1);
                    let expired = ApiError::new(410, "Expired", why).status();
                    let _ = tx.send(event_line("ERROR", &expired));
                    return Ok(rx);
                }
                let replay = self.history.iter().filter(|e| e.rv > rv);
                replay
                    .filter_map(|e| filter.render(e))
                    .for_each(|line| drop(tx.send(line)));
                rv
            }
        };
        let mut live = self.events.subscribe();
        let stop = self.watch_stop.clone();
        let timeout = query.get("timeoutSeconds").and_then(|t| t.parse().ok());
        let timeout = Duration::from_secs(timeout.unwrap_or(DEFAULT_WATCH_SECONDS));
        tokio::spawn(async move {
            let deadline = tokio::time::sleep(timeout);
            tokio::pin!(deadline);
            loop {
                let event = tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = &mut deadline => return,
                    _ = tx.closed() => return,
                    event = live.recv() => event,
                };
                // Lagging behind the feed ends the watch, as a real server drops slow watchers.
                let Ok(event) = event else { return };
                if event.rv > after
                    && let Some(line) = filter.render(&event)
                    && tx.send(line).is_err()
                {
                    return;
                }
            }
        });
        Ok(rx)
    }
}

// ============================================================== discovery

fn discovery(path: &[&str], addr: SocketAddr) -> Result<Value, ApiError> {
    let resource = |name: &str, kind: Kind, verbs: &[&str]| {
        let namespaced = kind.namespaced();
        json!({"name": name, "singularName": "", "namespaced": namespaced, "kind": kind.name(), "verbs": verbs})
    };
    let all = [
        "create", "delete", "get", "list", "patch", "update", "watch",
    ];
    let status = ["get", "patch", "update"];
    let version = json!({"groupVersion": "coordination.k8s.io/v1", "version": "v1"});
    let group = json!({
        "name": "coordination.k8s.io", "versions": [version], "preferredVersion": version,
    });
    let document = match path {
        ["version"] => json!({
            "major": "1", "minor": "33", "gitVersion": "v1.33.0", "gitTreeState": "clean",
            "gitCommit": "0000000000000000000000000000000000000000", "buildDate": "2025-04-23T00:00:00Z",
            "goVersion": "go1.24.2", "compiler": "gc", "platform": "linux/amd64",
        }),
        ["api"] => {
            let address = json!({"clientCIDR": "0.0.0.0/0", "serverAddress": addr.to_string()});
            json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [address]})
        }
        ["api", "v1"] => {
            let resources = [
                resource("pods", Kind::Pod, &all),
                resource("pods/status", Kind::Pod, &status),
                resource("nodes", Kind::Node, &all),
                resource("nodes/status", Kind::Node, &status),
            ];
            json!({"kind": "APIResourceList", "groupVersion": "v1", "resources": resources})
        }
        ["apis"] => json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [group]}),
        ["apis", "coordination.k8s.io"] => {
            let mut group = group;
            group["kind"] = json!("APIGroup");
            group["apiVersion"] = json!("v1");
            group
        }
        ["apis", "coordination.k8s.io", "v1"] => {
            let resources = [resource("leases", Kind::Lease, &all)];
            let group_version = "coordination.k8s.io/v1";
            json!({"kind": "APIResourceList", "groupVersion": group_version, "resources": resources})
        }
        _ => return Err(ApiError::path_not_found()),
    };
    Ok(document)
}

// ========================================================= Status errors

#[derive(Debug)]
struct ApiError {
    code: u16,
    reason: &'static str,
    message: String,
    /// The object concerned, for the Status details.
    about: Option<Key>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl ToString) -> ApiError {
        let message = message.to_string();
        ApiError {
            code,
            reason,
            message,
            about: None,
        }
    }

    fn about(key: &Key, code: u16, reason: &'static str, message: String) -> ApiError {
        let about = Some(key.clone());
        ApiError {
            about,
            ..ApiError::new(code, reason, message)
        }
    }

    fn not_found(key: &Key) -> ApiError {
        let message = format!("{} {:?} not found", key.0.plural(), key.2);
        ApiError::about(key, 404, "NotFound", message)
    }

    fn already_exists(key: &Key) -> ApiError {
        let message = format!("{} {:?} already exists", key.0.plural(), key.2);
        ApiError::about(key, 409, "AlreadyExists", message)
    }

    fn conflict(key: &Key, why: &str) -> ApiError {
        let (plural, name) = (key.0.plural(), &key.2);
        let message = format!("Operation cannot be fulfilled on {plural} {name:?}: {why}");
        ApiError::about(key, 409, "Conflict", message)
    }

    fn forbidden(key: &Key, why: &str) -> ApiError {
        let message = format!("{} {:?} is forbidden: {why}", key.0.plural(), key.2);
        ApiError::about(key, 403, "Forbidden", message)
    }

    fn invalid(key: &Key, why: &str) -> ApiError {
        let message = format!("{} {:?} is invalid: {why}", key.0.name(), key.2);
        ApiError::about(key, 422, "Invalid", message)
    }

    fn bad_request(why: impl ToString) -> ApiError {
        ApiError::new(400, "BadRequest", why)
    }

    fn unauthorized() -> ApiError {
        ApiError::new(401, "Unauthorized", "Unauthorized")
    }

    fn internal(why: &str) -> ApiError {
        ApiError::new(
            500,
            "InternalError",
            format!("Internal error occurred: {why}"),
        )
    }

    fn method_not_allowed() -> ApiError {
        let why = "the server does not allow this method on the requested resource";
        ApiError::new(405, "MethodNotAllowed", why)
    }

    fn path_not_found() -> ApiError {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    fn status(&self) -> Value {
        let mut status = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "reason": self.reason, "code": self.code,
        });
        if let Some(Key(kind, _, name)) = &self.about {
            status["details"] = json!({"name": name, "kind": kind.plural()});
        }
        status
    }
}

// ================================================================ helpers

/// A response body: one JSON document, or the lines of a watch as they come.
enum Body {
    Full(Option<Bytes>),
    Watch(mpsc::UnboundedReceiver<Bytes>),
}

impl Body {
    fn json(value: &Value) -> Body {
        let bytes = serde_json::to_vec(value).expect("JSON serializes");
        Body::Full(Some(Bytes::from(bytes)))
    }
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let frame = |bytes| Ok(Frame::data(bytes));
        match self.get_mut() {
            Body::Full(bytes) => Poll::Ready(bytes.take().map(frame)),
            Body::Watch(lines) => lines.poll_recv(cx).map(|line| line.map(frame)),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Body::Full(bytes) => SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64)),
            Body::Watch(_) => SizeHint::default(),
        }
    }
}

fn parse(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(ApiError::bad_request)
}

fn to_json<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).expect("API objects serialize")
}

fn typed<T: DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("stored objects decode as their type")
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

fn items(value: &Value) -> &[Value] {
    value.as_array().map_or(&[], Vec::as_slice)
}

fn meta<'a>(object: &'a Value, field: &str) -> &'a str {
    text(&object["metadata"][field])
}

fn namespace_of(object: &Value) -> String {
    match meta(object, "namespace") {
        "" => "default".to_owned(),
        ns => ns.to_owned(),
    }
}

fn remove_meta(object: &mut Value, field: &str) {
    set_or_remove(&mut object["metadata"], field, None);
}

fn set_or_remove(object: &mut Value, field: &str, value: Option<&Value>) {
    let Some(fields) = object.as_object_mut() else {
        return;
    };
    match value {
        Some(value) => fields.insert(field.to_owned(), value.clone()),
        None => fields.remove(field),
    };
}

/// RFC 7386 JSON merge patch.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let fields = target.as_object_mut().expect("an object");
    for (k, v) in patch {
        if v.is_null() {
            fields.remove(k);
        } else {
            merge_patch(fields.entry(k.as_str()).or_insert(Value::Null), v);
        }
    }
}

/// The key of the lists that strategic merge patch merges item by item (the
/// `patchMergeKey` of the fields served here); any other list is replaced.
fn merge_key(path: &str) -> Option<&'static str> {
    match path {
        "status.conditions" | "status.addresses" => Some("type"),
        "status.podIPs" | "status.hostIPs" => Some("ip"),
        "status.resourceClaimStatuses" | "spec.containers" | "spec.volumes" => Some("name"),
        "metadata.ownerReferences" => Some("uid"),
        _ => None,
    }
}

/// Strategic merge patch, the part clients use: maps merge, null removes, a list
/// with a merge key merges by key (`$patch: delete` removes an item, `$patch:
/// replace` replaces the list). Ordering and retain-keys directives are ignored.
fn strategic_merge(target: &mut Value, patch: &Value, path: &str) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let fields = target.as_object_mut().expect("an object");
    for (k, v) in patch.iter().filter(|(k, _)| !k.starts_with('$')) {
        if v.is_null() {
            fields.remove(k);
            continue;
        }
        let child = if path.is_empty() {
            k.clone()
        } else {
            format!("{path}.{k}")
        };
        let slot = fields.entry(k.as_str()).or_insert(Value::Null);
        match (v, merge_key(&child)) {
            (Value::Array(patches), Some(id)) => merge_list(slot, patches, id, &child),
            _ => strategic_merge(slot, v, &child),
        }
    }
}

fn merge_list(target: &mut Value, patches: &[Value], id: &str, path: &str) {
    let replace = patches.iter().any(|p| p["$patch"] == "replace");
    if replace || !target.is_array() {
        *target = json!([]);
    }
    let list = target.as_array_mut().expect("a list");
    for patch in patches.iter().filter(|p| p["$patch"] != "replace") {
        let at = list.iter().position(|item| item[id] == patch[id]);
        match (at, patch["$patch"] == "delete") {
            (Some(at), true) => drop(list.remove(at)),
            (None, true) => {}
            (Some(at), false) => strategic_merge(&mut list[at], patch, path),
            (None, false) => {
                let mut item = Value::Null;
                strategic_merge(&mut item, patch, path);
                list.push(item);
            }
        }
    }
}

fn parse_query(query: &str) -> Query {
    let decode = |s: &str| {
        let (bytes, mut out, mut i) = (s.as_bytes(), Vec::new(), 0);
        while i < bytes.len() {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            match (bytes[i], hex) {
                (b'%', Some(byte)) => {
                    out.push(byte);
                    i += 2;
                }
                (b'+', _) => out.push(b' '),
                (byte, _) => out.push(byte),
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    };
    let pairs = query.split('&').filter(|p| !p.is_empty());
    let pairs = pairs.map(|pair| pair.split_once('=').unwrap_or((pair, "")));
    pairs.map(|(k, v)| (decode(k), decode(v))).collect()
}

/// A random version-4 UUID, as the server assigns to metadata.uid.
fn new_uid() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let random = || {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        // Each RandomState holds fresh random keys.
        RandomState::new().hash_one((n, std::time::SystemTime::now()))
    };
    let (a, b) = (random(), random());
    let variant = 0x8000 | ((b >> 48) & 0x3fff);
    let (a1, a2, a3) = (a >> 32, (a >> 16) & 0xffff, a & 0xfff);
    format!(
        "{a1:08x}-{a2:04x}-4{a3:03x}-{variant:04x}-{:012x}",
        b & 0xffff_ffff_ffff
    )
}
