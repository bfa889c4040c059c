use super::*;

fn ok(q: &str) -> LogOptions {
    LogOptions::from_query(q).unwrap_or_else(|e| panic!("{q}: {e}"))
}

#[test]
fn decodes_every_field() {
    assert_eq!(ok(""), LogOptions::default());
    let o = ok("follow=true&previous=1&timestamps=T&tailLines=10&limitBytes=5&sinceSeconds=60");
    assert!(o.follow && o.previous && o.timestamps);
    assert_eq!(o.tail_lines, Some(10));
    assert_eq!(o.limit_bytes, Some(5));
    assert_eq!(o.since_seconds, Some(60));
    let t = ok("sinceTime=2026-12-01T00%3A00%3A00Z").since_time.unwrap();
    assert_eq!(t.to_string(), "2026-12-01T00:00:00Z");
    assert!(!ok("follow=").follow);
    assert!(!ok("follow=false&follow=true").follow, "first value wins");
    assert_eq!(ok("unknown=x&stream=All"), LogOptions::default());
}

#[test]
fn legacy_tail() {
    assert_eq!(ok("tail=3").tail_lines, Some(3));
    assert_eq!(ok("tail=all&tailLines=4").tail_lines, None);
    assert_eq!(ok("tail=&tailLines=4").tail_lines, Some(4));
}

#[test]
fn refusals() {
    let cases = [
        (
            "tailLines=-1",
            "invalid request: tailLines must be greater than or equal to 0",
        ),
        (
            "limitBytes=0",
            "invalid request: limitBytes must be greater than 0",
        ),
        (
            "sinceSeconds=0",
            "invalid request: sinceSeconds must be greater than 0",
        ),
        (
            "sinceSeconds=5&sinceTime=2026-12-01T00:00:00Z",
            "invalid request: at most one of sinceTime or sinceSeconds may be specified",
        ),
        (
            "tailLines=ten",
            "unable to decode query: tailLines=\"ten\" is not an integer",
        ),
        (
            "follow=yes",
            "unable to decode query: follow=\"yes\" is not a boolean",
        ),
        (
            "sinceTime=yesterday",
            "unable to decode query: sinceTime=\"yesterday\" is not an RFC 3339 time",
        ),
        (
            "tail=-2",
            "invalid request: tailLines must be greater than or equal to 0",
        ),
    ];
    for (q, want) in cases {
        let got = LogOptions::from_query(q).expect_err(q);
        assert_eq!(got.to_string(), want, "{q}");
    }
    assert!(matches!(
        LogOptions::from_query("tailLines=-1"),
        Err(LogOptionsError::Invalid(_))
    ));
    assert!(matches!(
        LogOptions::from_query("tailLines=x"),
        Err(LogOptionsError::Decode(_))
    ));
}

#[test]
fn since_resolves_seconds_against_now() {
    let now: Timestamp = "2026-12-01T00:01:00Z".parse().unwrap();
    assert_eq!(ok("").since(now), None);
    assert_eq!(
        ok("sinceSeconds=60").since(now).unwrap().to_string(),
        "2026-12-01T00:00:00Z"
    );
    assert_eq!(
        ok("sinceSeconds=9223372036854775807").since(now),
        Some(Timestamp::MIN)
    );
}

proptest::proptest! {
    #[test]
    fn never_panics(q in ".{0,80}") {
        let _ = LogOptions::from_query(&q);
    }
}
