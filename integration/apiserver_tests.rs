//! The API server double, driven over real HTTP on loopback with a small
//! hand-written HTTP/1.1 client (one connection per request, chunked watch
//! streams). These need no runtime and always run.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::time::timeout;

use crate::apiserver::{ApiServer, Fault};

const PATIENCE: Duration = Duration::from_secs(10);

// ------------------------------------------------------------ HTTP client

struct Reply {
    status: u16,
    body: Vec<u8>,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// Asserts a Status error and returns its message.
    fn failure(&self, code: u16, reason: &str) -> String {
        let status = self.json();
        assert_eq!(self.status, code, "{status}");
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["apiVersion"], "v1");
        assert_eq!(status["status"], "Failure");
        assert_eq!(status["reason"], reason, "{status}");
        assert_eq!(status["code"], code);
        status["message"].as_str().expect("a message").to_owned()
    }
}

/// A client with one identity: `token` goes out as a bearer token.
struct Client {
    addr: String,
    token: Option<String>,
}

impl Client {
    fn new(api: &ApiServer, token: Option<&str>) -> Client {
        let addr = api
            .url()
            .strip_prefix("http://")
            .expect("http URL")
            .to_owned();
        Client {
            addr,
            token: token.map(str::to_owned),
        }
    }

    fn head(&self, method: &str, path: &str, content_type: &str, length: Option<usize>) -> String {
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nUser-Agent: double-test/1\r\nAccept: application/json\r\nConnection: close\r\n",
            self.addr
        );
        if let Some(token) = &self.token {
            head += &format!("Authorization: Bearer {token}\r\n");
        }
        if let Some(length) = length {
            head += &format!("Content-Type: {content_type}\r\nContent-Length: {length}\r\n");
        }
        head + "\r\n"
    }

    async fn try_send(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: Option<&Value>,
    ) -> std::io::Result<Reply> {
        let body = body.map(|b| serde_json::to_vec(b).expect("JSON"));
        let mut stream = TcpStream::connect(&self.addr).await?;
        let head = self.head(method, path, content_type, body.as_ref().map(Vec::len));
        stream.write_all(head.as_bytes()).await?;
        if let Some(body) = &body {
            stream.write_all(body).await?;
        }
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await?;
        let split = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .ok_or(std::io::ErrorKind::UnexpectedEof)?;
        let head = String::from_utf8_lossy(&raw[..split]).into_owned();
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("a status line");
        let mut body = raw[split + 4..].to_vec();
        if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            body = dechunk(&body);
        }
        Ok(Reply { status, body })
    }

    async fn send(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: Option<&Value>,
    ) -> Reply {
        let sent = timeout(PATIENCE, self.try_send(method, path, content_type, body)).await;
        sent.unwrap_or_else(|_| panic!("{method} {path}: no answer in {PATIENCE:?}"))
            .expect("HTTP exchange")
    }

    async fn get(&self, path: &str) -> Reply {
        self.send("GET", path, "", None).await
    }

    async fn post(&self, path: &str, body: &Value) -> Reply {
        self.send("POST", path, "application/json", Some(body))
            .await
    }

    async fn put(&self, path: &str, body: &Value) -> Reply {
        self.send("PUT", path, "application/json", Some(body)).await
    }

    async fn patch(&self, path: &str, content_type: &str, body: &Value) -> Reply {
        self.send("PATCH", path, content_type, Some(body)).await
    }

    async fn delete(&self, path: &str, options: Option<&Value>) -> Reply {
        self.send("DELETE", path, "application/json", options).await
    }

    /// Opens a watch and checks it answers 200 with a chunked body.
    async fn watch(&self, path: &str) -> Watch {
        let mut stream = TcpStream::connect(&self.addr).await.expect("connect");
        stream
            .write_all(self.head("GET", path, "", None).as_bytes())
            .await
            .expect("send watch");
        let mut reader = BufReader::new(stream);
        let mut head = String::new();
        loop {
            let mut line = String::new();
            timeout(PATIENCE, reader.read_line(&mut line))
                .await
                .expect("watch head in time")
                .expect("read");
            if line == "\r\n" || line.is_empty() {
                break;
            }
            head += &line;
        }
        assert!(head.starts_with("HTTP/1.1 200"), "watch refused: {head}");
        assert!(
            head.to_ascii_lowercase()
                .contains("transfer-encoding: chunked"),
            "{head}"
        );
        Watch {
            reader,
            pending: Vec::new(),
        }
    }
}

fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(end) = raw.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(
            std::str::from_utf8(&raw[..end]).expect("chunk size").trim(),
            16,
        )
        .expect("hex");
        if size == 0 {
            break;
        }
        out.extend_from_slice(&raw[end + 2..end + 2 + size]);
        raw = &raw[end + 2 + size + 2..];
    }
    out
}

/// The client side of a watch: newline-delimited JSON events inside HTTP chunks.
struct Watch {
    reader: BufReader<TcpStream>,
    pending: Vec<u8>,
}

impl Watch {
    /// The next event, or None when the server ended the stream.
    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=end).collect();
                return Some(serde_json::from_slice(&line).expect("an event is one JSON line"));
            }
            let mut size = String::new();
            if self.reader.read_line(&mut size).await.ok()? == 0 {
                return None;
            }
            let size = usize::from_str_radix(size.trim(), 16).expect("chunk size");
            if size == 0 {
                return None;
            }
            let mut chunk = vec![0; size + 2];
            self.reader.read_exact(&mut chunk).await.ok()?;
            self.pending.extend_from_slice(&chunk[..size]);
        }
    }

    /// The next event's type and object, which must come within PATIENCE.
    async fn expect(&mut self) -> (String, Value) {
        let event = timeout(PATIENCE, self.next())
            .await
            .expect("an event in time")
            .expect("the stream is open");
        (
            event["type"].as_str().expect("type").to_owned(),
            event["object"].clone(),
        )
    }

    async fn expect_end(&mut self) {
        let next = timeout(PATIENCE, self.next())
            .await
            .expect("the stream ends in time");
        assert!(next.is_none(), "unexpected event {next:?}");
    }
}

// ---------------------------------------------------------------- fixtures

fn pod(name: &str, node: Option<&str>) -> Value {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]},
    });
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
    }
    pod
}

/// A mirror pod as a kubelet sends it: bound, annotated, owned by its Node.
fn mirror(name: &str, node: &str, node_uid: &str) -> Value {
    let mut pod = pod(name, Some(node));
    pod["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "0123abcd"});
    pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid, "controller": true}]);
    pod
}

fn node(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}})
}

const PODS: &str = "/api/v1/namespaces/default/pods";

fn rv(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .expect("resourceVersion")
        .parse()
        .expect("numeric")
}

// -------------------------------------------------------------------- pods

#[tokio::test]
async fn create_assigns_uid_resource_version_and_creation_timestamp() {
    let api = ApiServer::start().await;
    let admin = Client::new(&api, None);

    let first = admin.post(PODS, &pod("web", None)).await;
    assert_eq!(first.status, 201);
    let first = first.json();
    let uid = first["metadata"]["uid"].as_str().unwrap();
    assert_eq!(uid.len(), 36, "{uid}");
    assert_eq!(uid.matches('-').count(), 4, "{uid}");
    assert!(
        first["metadata"]["creationTimestamp"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );
    assert_eq!(first["metadata"]["namespace"], "default");
    assert_eq!(first["kind"], "Pod");
    assert_eq!(first["status"]["phase"], "Pending");
    assert_eq!(first["spec"]["restartPolicy"], "Always");

    let second = admin.post(PODS, &pod("db", None)).await.json();
    assert_ne!(second["metadata"]["uid"], first["metadata"]["uid"]);
    assert!(rv(&second) > rv(&first));

    let got = admin.get(&format!("{PODS}/web")).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.json(), first);
    assert_eq!(
        api.pod("default", "web").unwrap().metadata.uid.as_deref(),
        Some(uid)
    );
}

#[tokio::test]
async fn get_of_a_missing_pod_is_a_not_found_status() {
    let api = ApiServer::start().await;
    let reply = Client::new(&api, None)
        .get(&format!("{PODS}/nothing"))
        .await;
    assert_eq!(reply.failure(404, "NotFound"), "pods \"nothing\" not found");
    assert_eq!(
        reply.json()["details"],
        json!({"name": "nothing", "kind": "pods"})
    );
}

#[tokio::test]
async fn duplicate_create_is_already_exists() {
    let api = ApiServer::start().await;
    let admin = Client::new(&api, None);
    assert_eq!(admin.post(PODS, &pod("web", None)).await.status, 201);
    let again = admin.post(PODS, &pod("web", None)).await;
    assert_eq!(
        again.failure(409, "AlreadyExists"),
        "pods \"web\" already exists"
    );
}

#[tokio::test]
async fn create_refuses_a_namespace_mismatch_and_invalid_pods() {
    let api = ApiServer::start().await;
    let admin = Client::new(&api, None);
    let mut elsewhere = pod("web", None);
    elsewhere["metadata"]["namespace"] = json!("kube-system");
    admin
        .post(PODS, &elsewhere)
        .await
        .failure(400, "BadRequest");

    admin
        .post(PODS, &pod("Web_1", None))
        .await
        .failure(422, "Invalid");
    let mut empty = pod("empty", None);
    empty["spec"]["containers"] = json!([]);
    admin.post(PODS, &empty).await.failure(422, "Invalid");
    let mut versioned = pod("versioned", None);
    versioned["metadata"]["resourceVersion"] = json!("5");
    admin
        .post(PODS, &versioned)
        .await
        .failure(500, "InternalError");
    assert!(api.pods().is_empty());
}

#[tokio::test]
async fn list_filters_by_field_and_label_selectors() {
    let api = ApiServer::start().await;
    let admin = Client::new(&api, None);
    admin.post(PODS, &pod("a1", Some("node-a"))).await;
    admin.post(PODS, &pod("a2", Some("node-a"))).await;
    admin.post(PODS, &pod("b1", Some("node-b"))).await;
    let mut other_ns = pod("a3", Some("node-a"));
    other_ns["metadata"]["namespace"] = json!("kube-system");
    let last = admin
        .post("/api/v1/namespaces/kube-system/pods", &other_ns)
        .await
        .json();

    let names = |list: &Value| -> Vec<String> {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["metadata"]["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let all = admin
        .get("/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a")
        .await
        .json();
    assert_eq!(all["kind"], "PodList");
    assert_eq!(names(&all), ["a1", "a2", "a3"]);
    assert_eq!(
        rv(&all),
        rv(&last),
        "the list carries the latest resourceVersion"
    );

    let in_default = admin
        .get(&format!("{PODS}?fieldSelector=spec.nodeName%3Dnode-a"))
        .await
        .json();
    assert_eq!(names(&in_default), ["a1", "a2"]);
    let labelled = admin
        .get(&format!(
            "{PODS}?fieldSelector=spec.nodeName%3Dnode-a&labelSelector=app%3Da2"
        ))
        .await;
    assert_eq!(names(&labelled.json()), ["a2"]);
    let not_a = admin
        .get(&format!("{PODS}?fieldSelector=spec.nodeName!%3Dnode-a"))
        .await
        .json();
    assert_eq!(names(&not_a), ["b1"]);

    let unsupported = admin
        .get(&format!("{PODS}?fieldSelector=spec.hostname%3Dx"))
        .await;
    assert!(
        unsupported
            .failure(400, "BadRequest")
            .contains("field label not supported")
    );
}

#[tokio::test]
async fn update_with_a_stale_resource_version_is_a_conflict() {
    let api = ApiServer::start().await;
    let admin = Client::new(&api, None);
    let created = admin.post(PODS, &pod("web", None)).await.json();

    let mut edited = created.clone();
    edited["metadata"]["labels"]["tier"] = json!("front");
    let updated = admin.put(&format!("{PODS}/web"), &edited).await;
    assert_eq!(updated.status, 200);
    let updated = updated.json();
    assert!(rv(&updated) > rv(&created));
    assert_eq!(updated["metadata"]["labels"]["tier"], "front");
    assert_eq!(updated["metadata"]["uid"], created["metadata"]["uid"]);

    let mut stale = created.clone();
    stale["metadata"]["labels"]["tier"] = json!("back");
    let refused = admin.put(&format!("{PODS}/web"), &stale).await;
    assert!(
        refused
            .failure(409, "Conflict")
            .contains("the object has been modified")
    );

    stale["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    let unconditional = admin.put(&format!("{PODS}/web"), &stale).await;
    assert_eq!(unconditional.status, 200);
    assert_eq!(unconditional.json()["metadata"]["labels"]["tier"], "back");
}

#[tokio::test]
async fn status_put_takes_only_the_status() {
    let api = ApiServer::start().await;
    let admin = Client::new(&api, None);
    let created = admin.post(PODS, &pod("web", Some("node-a"))).await.json();

    let mut body = created.clone();
    body["metadata"]["labels"]["sneaky"] = json!("yes");
    body["spec"]["containers"][0]["image"] = json!("busybox:9");
    body["status"] = json!({"phase": "Running", "podIP": "10.0.0.7"});
    let reply = admin.put(&format!("{PODS}/web/status"), &body).await;
    assert_eq!(reply.status, 200);
    let stored = reply.json();
    assert_eq!(
        stored["status"],
        json!({"phase": "Running", "podIP": "10.0.0.7"})
    );
    assert!(stored["metadata"]["labels"].get("sneaky").is_none());
    assert_eq!(stored["spec"]["containers"][0]["image"], "busybox:1.36");
    assert!(rv(&stored) > rv(&created));

    let again = admin
        .put(&format!("{PODS}/web/status"), &stored)
        .await
        .json();
    assert_eq!(
        rv(&again),
        rv(&stored),
        "an unchanged status is not a write"
    );
}

#[tokio::test]
async fn status_patches_merge_into_the_status() {
    let api = ApiServer::start().await;
    let admin = Client::new(&api, None);
    admin.post(PODS, &pod("web", Some("node-a"))).await;
    let path = format!("{PODS}/web/status");

    let merge = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]}});
    let patched = admin
        .patch(&path, "application/merge-patch+json", &merge)
        .await;
    assert_eq!(patched.status, 200);
    let patched = patched.json();
    assert_eq!(patched["status"]["phase"], "Running");

    // Strategic merge keys conditions by type; a merge patch would replace the list.
    let strategic = json!({
        "metadata": {"labels": {"ignored": "yes"}},
        "status": {"$setElementOrder/conditions": [{"type": "Ready"}, {"type": "Initialized"}],
                   "conditions": [{"type": "Initialized", "status": "True"}], "podIP": "10.0.0.8"},
    });
    let reply = admin
        .patch(&path, "application/strategic-merge-patch+json", &strategic)
        .await
        .json();
    assert_eq!(
        reply["status"]["conditions"],
        json!([{"type": "Ready", "status": "False"}, {"type": "Initialized", "status": "True"}])
    );
    assert_eq!(reply["status"]["podIP"], "10.0.0.8");
    assert!(
        reply["metadata"]["labels"].get("ignored").is_none(),
        "only the status is taken"
    );
    assert!(rv(&reply) > rv(&patched));

    let replaced = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    let reply = admin
        .patch(&path, "application/merge-patch+json", &replaced)
        .await
        .json();
    assert_eq!(
        reply["status"]["conditions"],
        json!([{"type": "Ready", "status": "True"}])
    );

    admin
        .patch(&path, "application/json-patch+json", &json!([]))
        .await
        .failure(415, "UnsupportedMediaType");
}

#[tokio::test]
async fn graceful_delete_of_a_bound_pod_marks_it_and_grace_zero_removes_it() {
    let api = ApiServer::start().await;
    let admin = Client::new(&api, None);
    let mut bound = pod("web", Some("node-a"));
    bound["spec"]["terminationGracePeriodSeconds"] = json!(20);
    let created = admin.post(PODS, &bound).await.json();

    let marked = admin.delete(&format!("{PODS}/web"), None).await;
    assert_eq!(marked.status, 200);
    let marked = marked.json();
    assert_eq!(marked["kind"], "Pod");
    assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], 20);
    assert!(marked["metadata"]["deletionTimestamp"].is_string());
    assert!(rv(&marked) > rv(&created));
    assert_eq!(
        admin.get(&format!("{PODS}/web")).await.json(),
        marked,
        "the pod stays until its kubelet removes it"
    );

    let longer = admin
        .delete(&format!("{PODS}/web?gracePeriodSeconds=60"), None)
        .await
        .json();
    assert_eq!(longer, marked, "a longer grace period changes nothing");
    let shorter = admin
        .delete(&format!("{PODS}/web?gracePeriodSeconds=5"), None)
        .await
        .json();
    assert_eq!(shorter["metadata"]["deletionGracePeriodSeconds"], 5);

    let gone = admin
        .delete(
            &format!("{PODS}/web"),
            Some(&json!({"gracePeriodSeconds": 0})),
        )
        .await;
    assert_eq!(gone.status, 200);
    assert_eq!(gone.json()["metadata"]["uid"], created["metadata"]["uid"]);
    admin
        .get(&format!("{PODS}/web"))
        .await
        .failure(404, "NotFound");
    admin
        .delete(&format!("{PODS}/web"), None)
        .await
        .failure(404, "NotFound");
}

#[tokio::test]
async fn delete_of_an_unbound_pod_removes_it_at_once() {
    let api = ApiServer::start().await;
    let admin = Client::new(&api, None);
    admin.post(PODS, &pod("web", None)).await;
    assert_eq!(admin.delete(&format!("{PODS}/web"), None).await.status, 200);
    assert!(api.pod("default", "web").is_none());
}

#[tokio::test]
async fn delete_with_a_wrong_uid_precondition_is_a_conflict() {
    let api = ApiServer::start().await;
    let admin = Client::new(&api, None);
    let created = admin.post(PODS, &pod("web", Some("node-a"))).await.json();

    let wrong = json!({"gracePeriodSeconds": 0, "preconditions": {"uid": "00000000-0000-4000-8000-000000000000"}});
    let refused = admin.delete(&format!("{PODS}/web"), Some(&wrong)).await;
    assert!(
        refused
            .failure(409, "Conflict")
            .contains("Precondition failed: UID in precondition")
    );
    assert!(api.pod("default", "web").is_some());

    let right = json!({"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0,
        "preconditions": {"uid": created["metadata"]["uid"]}});
    assert_eq!(
        admin
            .delete(&format!("{PODS}/web"), Some(&right))
            .await
            .status,
        200
    );
    assert!(api.pod("default", "web").is_none());
}

#[tokio::test]
async fn node_restriction_lets_a_node_create_only_its_own_mirror_pods() {
    let api = ApiServer::start().await;
    let kubelet = Client::new(&api, Some("node-token-node-a"));
    let node_uid = {
        let registered = kubelet.post("/api/v1/nodes", &node("node-a")).await;
        assert_eq!(registered.status, 201);
        registered.json()["metadata"]["uid"]
            .as_str()
            .unwrap()
            .to_owned()
    };

    let mut unowned = mirror("static-node-a", "node-a", &node_uid);
    unowned["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("ownerReferences");
    let message = kubelet.post(PODS, &unowned).await.failure(403, "Forbidden");
    assert!(
        message.contains("can only create pods with an owner reference set to itself"),
        "{message}"
    );

    let plain = kubelet
        .post(PODS, &pod("plain", Some("node-a")))
        .await
        .failure(403, "Forbidden");
    assert!(plain.contains("can only create mirror pods"), "{plain}");

    let elsewhere = kubelet
        .post(PODS, &mirror("static-node-b", "node-b", &node_uid))
        .await;
    assert!(
        elsewhere
            .failure(403, "Forbidden")
            .contains("spec.nodeName set to itself")
    );

    let stale_uid = kubelet
        .post(PODS, &mirror("static-node-a", "node-a", "not-the-uid"))
        .await;
    assert!(stale_uid.failure(403, "Forbidden").contains("UID mismatch"));

    let created = kubelet
        .post(PODS, &mirror("static-node-a", "node-a", &node_uid))
        .await;
    assert_eq!(created.status, 201);

    // Anyone else may create any pod; the node may then only touch the ones bound to it.
    let admin = Client::new(&api, None);
    assert_eq!(
        admin.post(PODS, &pod("other", Some("node-b"))).await.status,
        201
    );
    kubelet
        .delete(&format!("{PODS}/other"), None)
        .await
        .failure(403, "Forbidden");
    kubelet
        .patch(
            &format!("{PODS}/other/status"),
            "application/merge-patch+json",
            &json!({}),
        )
        .await
        .failure(403, "Forbidden");
    assert_eq!(
        admin.post("/api/v1/nodes", &node("node-b")).await.status,
        201
    );
    kubelet
        .put("/api/v1/nodes/node-b", &node("node-b"))
        .await
        .failure(403, "Forbidden");
    let mine = format!("{PODS}/static-node-a");
    kubelet
        .put(&mine, &created.json())
        .await
        .failure(403, "Forbidden");
    assert_eq!(
        kubelet
            .delete(&mine, Some(&json!({"gracePeriodSeconds": 0})))
            .await
            .status,
        200
    );
}

// ----------------------------------------------------------------- watches

#[tokio::test]
async fn watch_from_a_resource_version_streams_changes_in_order_until_dropped() {
    let api = ApiServer::start().await;
    let admin = Client::new(&api, None);
    let before = admin
        .post(PODS, &pod("before", Some("node-a")))
        .await
        .json();

    let mut watch = admin
        .watch(&format!(
            "/api/v1/pods?watch=true&fieldSelector=spec.nodeName%3Dnode-a&resourceVersion={}",
            rv(&before)
        ))
        .await;
    let created = admin.post(PODS, &pod("web", Some("node-a"))).await.json();
    admin.post(PODS, &pod("elsewhere", Some("node-b"))).await;
    let status = json!({"status": {"phase": "Running"}});
    admin
        .patch(
            &format!("{PODS}/web/status"),
            "application/merge-patch+json",
            &status,
        )
        .await;
    admin
        .delete(
            &format!("{PODS}/web"),
            Some(&json!({"gracePeriodSeconds": 0})),
        )
        .await;

    let (verb, object) = watch.expect().await;
    assert_eq!(
        (verb.as_str(), object["metadata"]["name"].as_str()),
        ("ADDED", Some("web"))
    );
    assert_eq!(object["metadata"]["uid"], created["metadata"]["uid"]);
    assert_eq!(object["kind"], "Pod");
    let (verb, object) = watch.expect().await;
    assert_eq!(
        (verb.as_str(), &object["status"]["phase"]),
        ("MODIFIED", &json!("Running"))
    );
    let (verb, deleted) = watch.expect().await;
    assert_eq!(verb, "DELETED");
    assert!(rv(&deleted) > rv(&object));

    api.drop_watches();
    watch.expect_end().await;
}

#[tokio::test]
async fn watch_without_a_version_starts_with_the_current_objects_and_honours_timeout() {
    let api = ApiServer::start().await;
    let admin = Client::new(&api, None);
    admin.post(PODS, &pod("one", Some("node-a"))).await;
    admin.post(PODS, &pod("two", Some("node-a"))).await;

    let mut watch = admin
        .watch(&format!("{PODS}?watch=1&timeoutSeconds=1"))
        .await;
    assert_eq!(watch.expect().await.1["metadata"]["name"], "one");
    assert_eq!(watch.expect().await.1["metadata"]["name"], "two");
    watch.expect_end().await;
}

#[tokio::test]
async fn watch_sees_pods_entering_and_leaving_its_selection() {
    let api = ApiServer::start().await;
    let admin = Client::new(&api, None);
    let mut watch = admin
        .watch(&format!(
            "{PODS}?watch=true&resourceVersion=0&labelSelector=role%3Dmirror"
        ))
        .await;
    let created = admin.post(PODS, &pod("web", Some("node-a"))).await.json();

    let mut labelled = created.clone();
    labelled["metadata"]["labels"]["role"] = json!("mirror");
    let labelled = admin.put(&format!("{PODS}/web"), &labelled).await.json();
    let (verb, object) = watch.expect().await;
    assert_eq!((verb.as_str(), rv(&object)), ("ADDED", rv(&labelled)));

    let mut unlabelled = labelled.clone();
    unlabelled["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("role");
    admin.put(&format!("{PODS}/web"), &unlabelled).await;
    assert_eq!(watch.expect().await.0, "DELETED");
}

#[tokio::test]
async fn direct_manipulation_is_seen_by_watchers() {
    let api = ApiServer::start().await;
    let admin = Client::new(&api, None);
    let mut watch = admin.watch(&format!("{PODS}?watch=true")).await;

    let mut spec: Pod = serde_json::from_value(pod("web", Some("node-a"))).unwrap();
    let created = api.create_pod(spec.clone());
    assert_eq!(created.metadata.uid.as_ref().map(String::len), Some(36));
    assert_eq!(watch.expect().await.0, "ADDED");

    spec = api.pod("default", "web").unwrap();
    spec.metadata
        .labels
        .get_or_insert_default()
        .insert("edited".into(), "yes".into());
    api.update_pod(spec);
    let (verb, object) = watch.expect().await;
    assert_eq!(
        (verb.as_str(), &object["metadata"]["labels"]["edited"]),
        ("MODIFIED", &json!("yes"))
    );

    api.delete_pod("default", "web", None);
    let (verb, object) = watch.expect().await;
    assert_eq!(
        (
            verb.as_str(),
            &object["metadata"]["deletionGracePeriodSeconds"]
        ),
        ("MODIFIED", &json!(30))
    );
    api.delete_pod("default", "web", Some(0));
    assert_eq!(watch.expect().await.0, "DELETED");
    assert!(api.pods().is_empty());
}

#[tokio::test]
async fn dropping_the_server_ends_its_watches() {
    let api = ApiServer::start().await;
    let admin = Client::new(&api, None);
    let mut watch = admin.watch(&format!("{PODS}?watch=true")).await;
    drop(api);
    let next = timeout(PATIENCE, watch.next())
        .await
        .expect("the stream ends in time");
    assert!(next.is_none());
    assert!(
        admin.try_send("GET", "/version", "", None).await.is_err(),
        "nobody listens any more"
    );
}

// ------------------------------------------------------------------ faults

#[tokio::test]
async fn fault_500_fails_every_request_until_cleared() {
    let api = ApiServer::start().await;
    let admin = Client::new(&api, None);
    api.set_fault(Fault::Status500);
    admin
        .get(&format!("{PODS}/web"))
        .await
        .failure(500, "InternalError");
    admin
        .post(PODS, &pod("web", None))
        .await
        .failure(500, "InternalError");
    assert!(api.pods().is_empty());
    api.clear_fault();
    assert_eq!(admin.post(PODS, &pod("web", None)).await.status, 201);
}

#[tokio::test]
async fn a_wrong_token_is_unauthorized_and_auth_faults_answer_their_status() {
    let api = ApiServer::start().await;
    api.set_token(Some("node-token-node-a".into()));
    Client::new(&api, Some("stolen"))
        .get(PODS)
        .await
        .failure(401, "Unauthorized");
    Client::new(&api, None)
        .get(PODS)
        .await
        .failure(401, "Unauthorized");
    let kubelet = Client::new(&api, Some("node-token-node-a"));
    assert_eq!(kubelet.get(PODS).await.status, 200);

    api.set_fault(Fault::Unauthorized401);
    kubelet.get(PODS).await.failure(401, "Unauthorized");
    api.set_fault(Fault::Forbidden403);
    kubelet.get(PODS).await.failure(403, "Forbidden");
    api.clear_fault();
    api.set_token(None);
    assert_eq!(
        Client::new(&api, Some("anything")).get(PODS).await.status,
        200
    );
}

#[tokio::test]
async fn fault_hang_holds_requests_until_cleared() {
    let api = ApiServer::start().await;
    let admin = Client::new(&api, None);
    api.set_fault(Fault::Hang);
    let mut request = std::pin::pin!(admin.try_send("GET", "/api/v1/pods", "", None));
    let early = timeout(Duration::from_millis(500), request.as_mut()).await;
    assert!(early.is_err(), "a hung server answers nothing");
    let last = api.requests().last().map(|r| r.status);
    assert_eq!(last, Some(0), "the request was seen, not answered");

    api.clear_fault();
    let reply = timeout(PATIENCE, request)
        .await
        .expect("answered once cleared");
    assert_eq!(reply.expect("HTTP").status, 200);
}

#[tokio::test]
async fn fault_down_closes_connections_without_an_answer() {
    let api = ApiServer::start().await;
    let admin = Client::new(&api, None);
    api.set_fault(Fault::Down);
    let refused = timeout(PATIENCE, admin.try_send("GET", "/version", "", None))
        .await
        .expect("closed at once");
    assert!(refused.is_err(), "no HTTP answer while down");
    api.clear_fault();
    assert_eq!(admin.get("/version").await.status, 200);
}

#[tokio::test]
async fn going_down_ends_open_watches() {
    let api = ApiServer::start().await;
    let mut watch = Client::new(&api, None)
        .watch(&format!("{PODS}?watch=true"))
        .await;
    api.set_fault(Fault::Down);
    assert!(
        timeout(PATIENCE, watch.next())
            .await
            .expect("the stream ends in time")
            .is_none()
    );
}

// ------------------------------------------------------ nodes and leases

#[tokio::test]
async fn nodes_are_created_read_updated_and_deleted() {
    let api = ApiServer::start().await;
    let kubelet = Client::new(&api, Some("node-token-node-a"));
    let created = kubelet.post("/api/v1/nodes", &node("node-a")).await;
    assert_eq!(created.status, 201);
    let created = created.json();
    assert_eq!(created["metadata"]["uid"].as_str().map(str::len), Some(36));
    assert!(created["metadata"].get("namespace").is_none());
    kubelet
        .post("/api/v1/nodes", &node("node-a"))
        .await
        .failure(409, "AlreadyExists");
    assert_eq!(kubelet.get("/api/v1/nodes/node-a").await.json(), created);
    assert_eq!(
        kubelet.get("/api/v1/nodes").await.json()["items"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );

    let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}});
    let patched = kubelet
        .patch(
            "/api/v1/nodes/node-a/status",
            "application/strategic-merge-patch+json",
            &ready,
        )
        .await;
    assert_eq!(
        patched.json()["status"]["conditions"][0]["reason"],
        "KubeletReady"
    );

    let mut labelled = patched.json();
    labelled["metadata"]["labels"]["disk"] = json!("ssd");
    let updated = kubelet.put("/api/v1/nodes/node-a", &labelled).await.json();
    assert_eq!(updated["metadata"]["labels"]["disk"], "ssd");
    assert_eq!(
        updated["status"]["conditions"][0]["type"], "Ready",
        "PUT keeps the status"
    );
    kubelet
        .put("/api/v1/nodes/node-a", &labelled)
        .await
        .failure(409, "Conflict");

    let deleted = kubelet.delete("/api/v1/nodes/node-a", None).await.json();
    assert_eq!(
        (deleted["kind"].as_str(), deleted["status"].as_str()),
        (Some("Status"), Some("Success"))
    );
    assert!(api.nodes().is_empty());

    let other = kubelet.post("/api/v1/nodes", &node("node-b")).await;
    let refusal = other.failure(403, "Forbidden");
    assert!(
        refusal.contains("is not allowed to modify node"),
        "{refusal}"
    );
    let admin = Client::new(&api, None);
    assert_eq!(
        admin.post("/api/v1/nodes", &node("node-b")).await.status,
        201
    );
    api.delete_node("node-b");
    assert!(api.nodes().is_empty());
}

#[tokio::test]
async fn node_leases_are_created_read_and_renewed() {
    let api = ApiServer::start().await;
    let kubelet = Client::new(&api, Some("node-token-node-a"));
    let leases = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "node-a"}, "spec": {"holderIdentity": "node-a", "leaseDurationSeconds": 40}});
    let created = kubelet.post(leases, &lease).await;
    assert_eq!(created.status, 201);
    let created = created.json();
    assert_eq!(created["metadata"]["namespace"], "kube-node-lease");

    let mut renewed = kubelet.get(&format!("{leases}/node-a")).await.json();
    renewed["spec"]["renewTime"] = json!("2025-01-01T00:00:00.000000Z");
    let renewed = kubelet.put(&format!("{leases}/node-a"), &renewed).await;
    assert_eq!(renewed.status, 200);
    assert!(rv(&renewed.json()) > rv(&created));
    assert_eq!(
        api.leases()[0]
            .spec
            .as_ref()
            .unwrap()
            .holder_identity
            .as_deref(),
        Some("node-a")
    );
    kubelet
        .put(&format!("{leases}/node-a"), &created)
        .await
        .failure(409, "Conflict");

    let mut other = lease.clone();
    other["metadata"]["name"] = json!("node-b");
    kubelet.post(leases, &other).await.failure(403, "Forbidden");
    kubelet
        .get(&format!("{leases}/node-b"))
        .await
        .failure(404, "NotFound");
}

// ------------------------------------------------------------ the rest

#[tokio::test]
async fn every_request_is_recorded_in_order() {
    let api = ApiServer::start().await;
    let admin = Client::new(&api, None);
    admin.post(PODS, &pod("web", None)).await;
    admin.get(&format!("{PODS}/missing")).await;
    admin
        .get("/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a")
        .await;
    let seen: Vec<_> = api
        .requests()
        .into_iter()
        .map(|r| (r.method, r.path, r.query, r.user_agent, r.status))
        .collect();
    let ua = "double-test/1".to_owned();
    assert_eq!(
        seen,
        [
            ("POST".into(), PODS.into(), String::new(), ua.clone(), 201),
            (
                "GET".into(),
                format!("{PODS}/missing"),
                String::new(),
                ua.clone(),
                404
            ),
            (
                "GET".into(),
                "/api/v1/pods".into(),
                "fieldSelector=spec.nodeName%3Dnode-a".into(),
                ua,
                200
            ),
        ]
    );
}

#[tokio::test]
async fn discovery_documents_are_served() {
    let api = ApiServer::start().await;
    let admin = Client::new(&api, None);
    assert_eq!(admin.get("/version").await.json()["major"], "1");
    assert_eq!(admin.get("/api").await.json()["versions"], json!(["v1"]));
    let core = admin.get("/api/v1").await.json();
    let names: Vec<&str> = core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["pods", "pods/status", "nodes", "nodes/status"]);
    assert_eq!(
        admin.get("/apis").await.json()["groups"][0]["name"],
        "coordination.k8s.io"
    );
    admin.get("/apis/apps/v1").await.failure(404, "NotFound");
}

#[tokio::test]
async fn kubeconfig_points_at_the_double_with_the_node_token() {
    let api = ApiServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let path = api.kubeconfig(dir.path(), "node-a");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(&format!("server: {}", api.url())), "{text}");
    assert!(text.contains("token: node-token-node-a"), "{text}");
}
