use super::*;
use crate::pod::{self, CONFIG_SEEN_ANNOTATION};
use std::os::unix::fs::symlink;
use std::process::Command;
use std::sync::Arc;

const NODE: &str = "node1";

fn manifest(name: &str, image: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: main\n    image: {image}\n"
    )
}

fn now() -> jiff::Timestamp {
    jiff::Timestamp::from_second(1_700_000_000).unwrap()
}

fn origin(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

fn names(pods: &[SourcePod]) -> Vec<String> {
    pods.iter().map(|p| pod::name(&p.pod).to_string()).collect()
}

/// Writes through a dot-file and a rename, so a watcher never reads a
/// half-written manifest.
fn write_atomic(path: &Path, text: &str) {
    let tmp = path.with_file_name(format!(
        ".{}.tmp",
        path.file_name().unwrap().to_string_lossy()
    ));
    fs::write(&tmp, text).unwrap();
    fs::rename(&tmp, path).unwrap();
}

fn error_for<'a>(errors: &'a [ManifestError], path: &Path) -> &'a ManifestError {
    errors
        .iter()
        .find(|e| e.origin == origin(path))
        .unwrap_or_else(|| panic!("no error for {}: {errors:?}", path.display()))
}

#[test]
fn reads_a_directory_in_name_order_and_reports_bad_files() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("b.yaml"), manifest("b", "busybox")).unwrap();
    fs::write(d.join("a.yaml"), manifest("a", "busybox")).unwrap();
    fs::write(d.join(".a.yaml.swp"), "\0garbage").unwrap();
    fs::create_dir(d.join("sub")).unwrap();
    fs::write(d.join("sub/x.yaml"), manifest("x", "busybox")).unwrap();
    let status = Command::new("mkfifo").arg(d.join("fifo")).status().unwrap();
    assert!(status.success());
    let _socket = std::os::unix::net::UnixListener::bind(d.join("socket")).unwrap();
    fs::write(d.join("big.yaml"), vec![b'#'; MAX_MANIFEST_BYTES + 1]).unwrap();
    symlink(d.join("nowhere.yaml"), d.join("dangling")).unwrap();
    symlink(d.join("loop2"), d.join("loop1")).unwrap();
    symlink(d.join("loop1"), d.join("loop2")).unwrap();
    fs::write(elsewhere.path().join("c.yaml"), manifest("c", "busybox")).unwrap();
    symlink(elsewhere.path().join("c.yaml"), d.join("c-link.yaml")).unwrap();
    fs::write(d.join("invalid.yaml"), "metadata: [unclosed\n").unwrap();
    let two = format!(
        "{}---\n{}",
        manifest("d", "busybox"),
        manifest("e", "busybox")
    );
    fs::write(d.join("two.yaml"), two).unwrap();

    let (pods, errors) = read_manifests(d, NODE, now());

    assert_eq!(names(&pods), ["a-node1", "b-node1", "c-node1"]);
    let origins: Vec<String> = pods.iter().map(|p| p.origin.clone()).collect();
    let expected: Vec<String> = ["a.yaml", "b.yaml", "c-link.yaml"]
        .iter()
        .map(|f| origin(&d.join(f)))
        .collect();
    assert_eq!(origins, expected, "a symlink is known by its own path");
    for p in &pods {
        assert!(!pod::uid(&p.pod).is_empty());
        assert_eq!(pod::namespace(&p.pod), "default");
        assert_eq!(
            pod::annotation(&p.pod, crate::pod::CONFIG_SOURCE_ANNOTATION),
            Some("file")
        );
    }

    let mut error_origins: Vec<String> = errors.iter().map(|e| e.origin.clone()).collect();
    error_origins.sort();
    let mut expected: Vec<String> = [
        "big.yaml",
        "dangling",
        "fifo",
        "invalid.yaml",
        "loop1",
        "loop2",
        "socket",
        "two.yaml",
    ]
    .iter()
    .map(|f| origin(&d.join(f)))
    .collect();
    expected.sort();
    assert_eq!(error_origins, expected);
    assert!(error_for(&errors, &d.join("fifo")).message.contains("FIFO"));
    assert!(
        error_for(&errors, &d.join("socket"))
            .message
            .contains("socket")
    );
    assert!(
        error_for(&errors, &d.join("big.yaml"))
            .message
            .contains("limit")
    );
    assert!(
        error_for(&errors, &d.join("dangling"))
            .message
            .contains("dangling")
    );
    assert!(
        error_for(&errors, &d.join("loop1"))
            .message
            .contains("symlink")
    );
}

#[test]
fn a_manifest_of_exactly_the_limit_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = manifest("a", "busybox");
    text.push('#');
    text.push_str(&"x".repeat(MAX_MANIFEST_BYTES - text.len() - 1));
    text.push('\n');
    assert_eq!(text.len(), MAX_MANIFEST_BYTES);
    fs::write(dir.path().join("a.yaml"), text).unwrap();
    let (pods, errors) = read_manifests(dir.path(), NODE, now());
    assert_eq!(
        (names(&pods), errors),
        (vec!["a-node1".to_string()], vec![])
    );
}

#[test]
fn reads_a_single_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("web.yaml");
    fs::write(&file, manifest("web", "nginx")).unwrap();
    let (pods, errors) = read_manifests(&file, NODE, now());
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(names(&pods), ["web-node1"]);
    assert_eq!(pods[0].origin, origin(&file));

    // The path is part of the UID: the same manifest elsewhere differs.
    let other = dir.path().join("copy.yaml");
    fs::copy(&file, &other).unwrap();
    let (copy, _) = read_manifests(&other, NODE, now());
    assert_ne!(pod::uid(&copy[0].pod), pod::uid(&pods[0].pod));
}

#[test]
fn a_single_fifo_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let (pods, errors) = read_manifests(&fifo, NODE, now());
    assert!(pods.is_empty());
    assert_eq!(errors.len(), 1);
    assert!(errors[0].message.contains("FIFO"));
}

#[test]
fn a_missing_path_is_an_empty_list_and_one_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("manifests");
    let (pods, errors) = read_manifests(&missing, NODE, now());
    assert!(pods.is_empty());
    assert_eq!(
        errors,
        [ManifestError::new(
            &origin(&missing),
            None,
            "does not exist"
        )]
    );
}

fn sp(origin: &str, name: &str, image: &str, seen: &str) -> SourcePod {
    let mut pod = parse_pod(origin, manifest(name, image).as_bytes()).unwrap();
    let ts: jiff::Timestamp = seen.parse().unwrap();
    apply_static_defaults(&mut pod, NODE, &PodSource::File(origin), ts);
    SourcePod::new(origin, pod)
}

fn seen(p: &SourcePod) -> Option<&str> {
    pod::annotation(&p.pod, CONFIG_SEEN_ANNOTATION)
}

#[test]
fn stabilize_reuses_unchanged_pods_only() {
    let t0 = "2024-01-01T00:00:00Z";
    let t1 = "2024-01-01T00:01:00Z";
    let previous = vec![sp("/m/a", "a", "img", t0), sp("/m/b", "b", "img", t0)];
    // (what, current pods, the config.seen each should end up with)
    type Case<'a> = (&'a str, Vec<SourcePod>, Vec<Option<&'a str>>);
    let cases: Vec<Case> = vec![
        (
            "nothing changed",
            vec![sp("/m/a", "a", "img", t1)],
            vec![Some(t0)],
        ),
        (
            "content changed",
            vec![sp("/m/a", "a", "img2", t1)],
            vec![Some(t1)],
        ),
        (
            "moved to another file",
            vec![sp("/m/c", "a", "img", t1)],
            vec![Some(t1)],
        ),
        (
            "one of two changed",
            vec![sp("/m/a", "a", "img", t1), sp("/m/b", "b", "v2", t1)],
            vec![Some(t0), Some(t1)],
        ),
    ];
    for (name, current, want) in cases {
        let got = stabilize(&previous, current);
        let got: Vec<Option<&str>> = got.iter().map(seen).collect();
        assert_eq!(got, want, "{name}");
    }
    let again = stabilize(
        &previous,
        vec![sp("/m/a", "a", "img", t1), sp("/m/b", "b", "img", t1)],
    );
    assert_eq!(again, previous, "an unchanged directory gives an equal SET");
}

#[test]
fn error_texts_group_by_origin() {
    let e = |origin: &str, message: &str| ManifestError::new(origin, None, message);
    let first = log_errors(
        &BTreeMap::new(),
        &[e("/m/a", "bad"), e("/m/b", "worse")],
        SKIPPED,
    );
    assert_eq!(first.len(), 2);
    let second = log_errors(&first, &[e("/m/a", "bad")], SKIPPED);
    assert_eq!(second.keys().collect::<Vec<_>>(), ["/m/a"]);
    assert_eq!(second["/m/a"], first["/m/a"]);
    let two = error_texts(&[e("/m/a", "one"), e("/m/a", "two")]);
    assert_eq!(two.len(), 1);
    assert!(two["/m/a"].contains("one") && two["/m/a"].contains("two"));
}

#[test]
fn only_changes_wake_the_source() {
    use notify::event::{CreateKind, ModifyKind};
    let event = |kind, path: &str| notify::Event::new(kind).add_path(PathBuf::from(path));
    let open = EventKind::Access(AccessKind::Open(AccessMode::Any));
    let close_read = EventKind::Access(AccessKind::Close(AccessMode::Read));
    let close_write = EventKind::Access(AccessKind::Close(AccessMode::Write));
    let create = EventKind::Create(CreateKind::File);
    let modify = EventKind::Modify(ModifyKind::Any);
    let data = EventKind::Modify(ModifyKind::Data(notify::event::DataChange::Any));
    let renamed = EventKind::Modify(ModifyKind::Name(notify::event::RenameMode::To));
    let removed = EventKind::Remove(notify::event::RemoveKind::File);
    let web = Some(OsStr::new("web.yaml"));
    assert_eq!(relevance(&event(open, "/m/a"), None), None);
    assert_eq!(relevance(&event(close_read, "/m/a"), None), None);
    assert_eq!(
        relevance(&event(close_write, "/m/a"), None),
        Some(Urgency::Now)
    );
    assert_eq!(relevance(&event(renamed, "/m/a"), None), Some(Urgency::Now));
    assert_eq!(relevance(&event(removed, "/m/a"), None), Some(Urgency::Now));
    assert_eq!(relevance(&event(create, "/m/a"), None), Some(Urgency::Soon));
    assert_eq!(relevance(&event(data, "/m/a"), None), Some(Urgency::Soon));
    assert_eq!(
        relevance(&event(modify, "/etc/web.yaml"), web),
        Some(Urgency::Now)
    );
    assert_eq!(relevance(&event(modify, "/etc/hosts"), web), None);
    // Hidden files are never read: writing one is no change, renaming it
    // into a manifest is, and so is hiding a manifest (its removal).
    assert_eq!(relevance(&event(create, "/m/.a.tmp"), None), None);
    assert_eq!(relevance(&event(close_write, "/m/.a.tmp"), None), None);
    let both = EventKind::Modify(ModifyKind::Name(notify::event::RenameMode::Both));
    let rename = |from: &str, to: &str| event(both, from).add_path(PathBuf::from(to));
    assert_eq!(
        relevance(&rename("/m/.a.tmp", "/m/a.yaml"), None),
        Some(Urgency::Now)
    );
    assert_eq!(
        relevance(&rename("/m/a.yaml", "/m/.a.yaml.bak"), None),
        Some(Urgency::Now)
    );
    assert_eq!(relevance(&event(renamed, "/m/.b"), None), None);
    let hidden_web = Some(OsStr::new(".web.yaml"));
    assert_eq!(
        relevance(&event(close_write, "/etc/.web.yaml"), hidden_web),
        Some(Urgency::Now)
    );
    // An event naming no path at all still wakes the source.
    assert_eq!(
        relevance(&notify::Event::new(removed), None),
        Some(Urgency::Now)
    );
}

// The tests below drive `run` on a real directory with real inotify, so
// they wait on real time, bounded by generous timeouts.

const WAIT: Duration = Duration::from_secs(5);

struct Running {
    rx: mpsc::Receiver<SourceSet>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

fn start(path: &Path) -> Running {
    start_every(path, Duration::from_millis(200))
}

fn start_every(path: &Path, check_frequency: Duration) -> Running {
    let (tx, rx) = mpsc::channel(8);
    let cancel = CancellationToken::new();
    let config = FileSourceConfig {
        check_frequency,
        ..FileSourceConfig::new(path, NODE)
    };
    let task = tokio::spawn(run(config, tx, cancel.clone()));
    Running { rx, cancel, task }
}

impl Running {
    async fn next(&mut self) -> SourceSet {
        let set = tokio::time::timeout(WAIT, self.rx.recv()).await;
        let set = set.expect("no SET in time").expect("the source stopped");
        assert_eq!(set.source, FILE_SOURCE_NAME);
        set
    }

    /// Asserts that nothing is sent across several re-lists.
    async fn quiet(&mut self) {
        let got = tokio::time::timeout(Duration::from_millis(700), self.rx.recv()).await;
        assert!(got.is_err(), "unexpected SET: {got:?}");
    }

    async fn stop(self) {
        self.cancel.cancel();
        tokio::time::timeout(WAIT, self.task)
            .await
            .expect("the source did not stop")
            .unwrap();
    }
}

#[tokio::test]
async fn run_reports_adds_edits_and_removes() {
    let dir = tempfile::tempdir().unwrap();
    let mut source = start(dir.path());
    assert!(source.next().await.pods.is_empty(), "first SET, even empty");

    let a = dir.path().join("a.yaml");
    write_atomic(&a, &manifest("a", "busybox"));
    let first = source.next().await;
    assert_eq!(names(&first.pods), ["a-node1"]);
    source.quiet().await;

    write_atomic(&dir.path().join("b.yaml"), &manifest("b", "busybox"));
    let second = source.next().await;
    assert_eq!(names(&second.pods), ["a-node1", "b-node1"]);
    assert_eq!(
        second.pods[0], first.pods[0],
        "an unchanged pod is sent as it was"
    );

    write_atomic(&a, &manifest("a", "nginx"));
    let edited = source.next().await;
    assert_eq!(names(&edited.pods), ["a-node1", "b-node1"]);
    assert_ne!(pod::uid(&edited.pods[0].pod), pod::uid(&first.pods[0].pod));

    fs::remove_file(&a).unwrap();
    assert_eq!(names(&source.next().await.pods), ["b-node1"]);

    // A broken file is skipped and does not disturb the others.
    write_atomic(&dir.path().join("c.yaml"), "metadata: [\n");
    source.quiet().await;
    source.stop().await;
}

#[tokio::test]
async fn inotify_wakes_the_source_before_the_next_re_list() {
    let dir = tempfile::tempdir().unwrap();
    let mut source = start_every(dir.path(), Duration::from_secs(3600));
    assert!(source.next().await.pods.is_empty());
    write_atomic(&dir.path().join("a.yaml"), &manifest("a", "busybox"));
    assert_eq!(names(&source.next().await.pods), ["a-node1"]);
    fs::remove_file(dir.path().join("a.yaml")).unwrap();
    assert!(source.next().await.pods.is_empty());
    source.stop().await;
}

#[tokio::test]
async fn run_picks_up_a_directory_created_later() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("manifests");
    let mut source = start(&dir);
    assert!(source.next().await.pods.is_empty());
    fs::create_dir(&dir).unwrap();
    write_atomic(&dir.join("a.yaml"), &manifest("a", "busybox"));
    assert_eq!(names(&source.next().await.pods), ["a-node1"]);
    source.stop().await;
}

#[tokio::test]
async fn run_follows_a_single_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("web.yaml");
    write_atomic(&file, &manifest("web", "nginx"));
    let mut source = start(&file);
    let first = source.next().await;
    assert_eq!(names(&first.pods), ["web-node1"]);
    write_atomic(&dir.path().join("other.yaml"), &manifest("other", "nginx"));
    source.quiet().await;
    write_atomic(&file, &manifest("web", "nginx:2"));
    let edited = source.next().await;
    assert_ne!(pod::uid(&edited.pods[0].pod), pod::uid(&first.pods[0].pod));
    source.stop().await;
}

#[tokio::test]
async fn run_stops_when_the_receiver_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let Running {
        rx,
        cancel: _cancel,
        task,
    } = start(dir.path());
    drop(rx);
    write_atomic(&dir.path().join("a.yaml"), &manifest("a", "busybox"));
    tokio::time::timeout(WAIT, task)
        .await
        .expect("the source kept running")
        .unwrap();
}

#[test]
fn an_unchanged_manifest_is_not_parsed_again() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.yaml"), dir.path().join("b.yaml"));
    fs::write(&a, manifest("a", "nginx")).unwrap();
    fs::write(&b, manifest("b", "nginx")).unwrap();
    let mut cache = ManifestCache::default();
    let read = |cache: &mut ManifestCache, at: &str| {
        let now: jiff::Timestamp = at.parse().unwrap();
        read_manifests_cached(dir.path(), NODE, now, ManifestTrust::Warn, cache).pods
    };
    let first = read(&mut cache, "2024-01-01T00:00:00Z");
    fs::write(&b, manifest("b", "redis")).unwrap();
    let second = read(&mut cache, "2024-01-01T00:01:00Z");
    // a: the same pod, seen at the first read; b: parsed again.
    assert!(Arc::ptr_eq(&first[0].pod, &second[0].pod));
    assert_eq!(seen(&second[0]), seen(&first[0]));
    assert!(!Arc::ptr_eq(&first[1].pod, &second[1].pod));
    assert_ne!(seen(&second[1]), seen(&first[1]));
    assert_eq!(
        second[1].pod.spec.as_ref().unwrap().containers[0]
            .image
            .as_deref(),
        Some("redis")
    );
    // What the cache gives is what a read without it gives, but for the
    // time first seen.
    let fresh = read_manifests(dir.path(), NODE, "2024-01-01T00:01:00Z".parse().unwrap()).0;
    assert_eq!(fresh[1], second[1]);
    assert!(pod_content_equal(&fresh[0].pod, &second[0].pod));
    // A removed manifest leaves the cache.
    fs::remove_file(&a).unwrap();
    assert_eq!(
        names(&read(&mut cache, "2024-01-01T00:02:00Z")),
        ["b-node1"]
    );
    assert_eq!(cache.0.len(), 1);
}
