//! The container annotations the kubelet records as JSON
//! (`pkg/kubelet/kuberuntime/labels.go` `newContainerAnnotations`):
//! `io.kubernetes.container.ports` and
//! `io.kubernetes.container.preStopHandler`. Part of `mapping`.
//!
//! Invariant: pure, like the rest of the mapping. The text is Go's
//! `encoding/json` of the API types: fields in the Go structs' order, empty
//! optional fields left out, so it reads byte for byte as the kubelet's.

use k8s_openapi::api::core::v1::{ContainerPort, LifecycleHandler};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::*;

/// The container's ports (name, hostPort, containerPort, protocol,
/// hostIP each); `None` without ports.
pub(super) fn ports_annotation(c: &Container) -> Option<String> {
    let ports = c.ports.as_ref().filter(|p| !p.is_empty())?;
    let items: Vec<String> = ports.iter().map(port_json).collect();
    Some(format!("[{}]", items.join(",")))
}

/// The container's preStop handler; `None` without one.
pub(super) fn pre_stop_annotation(c: &Container) -> Option<String> {
    let handler = c.lifecycle.as_ref()?.pre_stop.as_ref()?;
    Some(handler_json(handler))
}

fn port_json(p: &ContainerPort) -> String {
    let mut o = Object::default();
    o.text("name", p.name.as_deref());
    o.raw(
        "hostPort",
        p.host_port.filter(|v| *v != 0).map(|v| v.to_string()),
    );
    o.raw("containerPort", Some(p.container_port.to_string()));
    o.text("protocol", p.protocol.as_deref());
    o.text("hostIP", p.host_ip.as_deref());
    o.finish()
}

/// A `LifecycleHandler`: exec, httpGet, tcpSocket, sleep.
fn handler_json(h: &LifecycleHandler) -> String {
    let mut o = Object::default();
    o.raw(
        "exec",
        h.exec.as_ref().map(|e| {
            let mut exec = Object::default();
            exec.raw("command", e.command.as_deref().map(strings_json));
            exec.finish()
        }),
    );
    o.raw(
        "httpGet",
        h.http_get.as_ref().map(|g| {
            let mut get = Object::default();
            get.text("path", g.path.as_deref());
            get.raw("port", Some(int_or_string_json(&g.port)));
            get.text("host", g.host.as_deref());
            get.text("scheme", g.scheme.as_deref());
            let headers = g.http_headers.as_deref().filter(|h| !h.is_empty());
            get.raw(
                "httpHeaders",
                headers.map(|list| {
                    let items: Vec<String> = (list.iter())
                        .map(|h| {
                            let mut header = Object::default();
                            header.raw("name", Some(text_json(&h.name)));
                            header.raw("value", Some(text_json(&h.value)));
                            header.finish()
                        })
                        .collect();
                    format!("[{}]", items.join(","))
                }),
            );
            get.finish()
        }),
    );
    o.raw(
        "tcpSocket",
        h.tcp_socket.as_ref().map(|t| {
            let mut tcp = Object::default();
            tcp.raw("port", Some(int_or_string_json(&t.port)));
            tcp.text("host", t.host.as_deref());
            tcp.finish()
        }),
    );
    o.raw(
        "sleep",
        h.sleep.as_ref().map(|s| {
            let mut sleep = Object::default();
            sleep.raw("seconds", Some(s.seconds.to_string()));
            sleep.finish()
        }),
    );
    o.finish()
}

/// A JSON object built field by field, in the order given.
#[derive(Default)]
struct Object(Vec<String>);

impl Object {
    /// A field holding JSON text as is; left out when `None`.
    fn raw(&mut self, key: &str, value: Option<String>) {
        if let Some(value) = value {
            self.0.push(format!("{}:{value}", text_json(key)));
        }
    }

    /// A string field with Go's `omitempty`: left out when unset or "".
    fn text(&mut self, key: &str, value: Option<&str>) {
        self.raw(key, value.filter(|v| !v.is_empty()).map(text_json));
    }

    fn finish(self) -> String {
        format!("{{{}}}", self.0.join(","))
    }
}

/// A JSON string as Go writes it: `<`, `>` and `&` escaped as well.
fn text_json(s: &str) -> String {
    serde_json::Value::from(s)
        .to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

fn strings_json(list: &[String]) -> String {
    let items: Vec<String> = list.iter().map(|s| text_json(s)).collect();
    format!("[{}]", items.join(","))
}

fn int_or_string_json(v: &IntOrString) -> String {
    match v {
        IntOrString::Int(i) => i.to_string(),
        IntOrString::String(s) => text_json(s),
    }
}
