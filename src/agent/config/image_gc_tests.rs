//! Tests of the image-GC settings as resolved by `crilet run`.

use std::time::Duration;

use crate::agent::config::{RunArgs, parse_config_file, resolve};

#[test]
fn image_gc_fields_come_from_the_file_and_bad_ones_name_the_flag() {
    let f = parse_config_file(
        "k.yaml",
        "imageGCHighThresholdPercent: 70\nimageGCLowThresholdPercent: 60\nimageMinimumGCAge: 1m\npinnedImages: [a:1]\n",
    )
    .unwrap();
    let s = resolve(&RunArgs::default(), &f, "k.yaml").unwrap();
    assert_eq!(
        (
            s.image_gc.high_threshold_percent,
            s.image_gc.low_threshold_percent
        ),
        (70, 60)
    );
    assert_eq!(s.image_gc.min_age, Duration::from_secs(60));
    assert_eq!(s.image_gc.pinned_images, ["a:1"]);
    let f = parse_config_file("k.yaml", "imageGCLowThresholdPercent: 95\n").unwrap();
    let err = resolve(&RunArgs::default(), &f, "k.yaml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("--image-gc-low-threshold"), "{err}");
}
