//! The CRDs are generated from the Rust types (`model::crdgen`) and checked in three times:
//! crds/ (what `loop-plugins crds` prints, for `kubectl apply`), the chart's crds/ (Helm
//! installs them before the chart) and deploy/crds/ (the kustomize base's). One test compares
//! every copy with what the code generates and names each stale one.
//!
//! After changing a resource type, regenerate them all with `make crds` (which runs
//! `LOOP_PLUGINS_UPDATE_CRDS=1 cargo test --test crds`) and review the diff.

use std::path::PathBuf;

/// Every checked-in copy of the CRDs, from the repository's root.
const COPIES: [&str; 3] = [
    "crds/loop-plugins.yaml",
    "charts/loop-plugins/crds/loop-plugins.yaml",
    "deploy/crds/loop-plugins.yaml",
];

/// Set, the test rewrites every copy before it compares.
const UPDATE_ENV: &str = "LOOP_PLUGINS_UPDATE_CRDS";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// How `checked_in` differs from `generated`, for the failure message; `None` when it does not.
fn difference(checked_in: Option<&str>, generated: &str) -> Option<String> {
    let Some(checked_in) = checked_in else {
        return Some("missing".into());
    };
    if checked_in == generated {
        return None;
    }
    let line = checked_in
        .lines()
        .zip(generated.lines())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| checked_in.lines().count().min(generated.lines().count()));
    Some(format!("differs from line {}", line + 1))
}

#[test]
fn every_checked_in_copy_of_the_crds_is_what_the_code_generates() {
    let generated = model::crdgen::yaml();
    if std::env::var_os(UPDATE_ENV).is_some() {
        for copy in COPIES {
            let path = repo().join(copy);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &generated).unwrap_or_else(|e| panic!("writing {copy}: {e}"));
        }
    }
    let stale: Vec<String> = COPIES
        .iter()
        .filter_map(|copy| {
            let checked_in = std::fs::read_to_string(repo().join(copy)).ok();
            difference(checked_in.as_deref(), &generated).map(|how| format!("{copy} ({how})"))
        })
        .collect();
    assert!(
        stale.is_empty(),
        "stale CRDs, not what model::crdgen generates: {}; regenerate them with `make crds` \
         ({UPDATE_ENV}=1 cargo test --test crds) and review the diff",
        stale.join(", ")
    );
}

#[test]
fn a_stale_copy_is_named_with_the_line_it_differs_from() {
    let generated = "---\nkind: A\n---\nkind: B\n";
    assert_eq!(difference(Some(generated), generated), None);
    assert_eq!(
        difference(Some("---\nkind: A\n---\nkind: C\n"), generated).as_deref(),
        Some("differs from line 4")
    );
    assert_eq!(
        difference(Some("---\nkind: A\n"), generated).as_deref(),
        Some("differs from line 3"),
        "a copy that ends early"
    );
    assert_eq!(difference(None, generated).as_deref(), Some("missing"));
}

/// kubectl prints a `date` column as the time since it ("5m"), and `<invalid>` for a time
/// still to come: a column of a time in the future (a deadline) is a string, the time itself.
/// The times of the past a date column may show: when an object was made, a run started or
/// ended, an instance was last busy or stopped.
#[test]
fn every_date_column_shows_a_time_already_past() {
    let past = [
        ".metadata.creationTimestamp",
        ".status.startTime",
        ".status.endTime",
        ".status.lastActivity",
        ".status.stoppedAt",
        ".status.decidedAt",
    ];
    let mut dates = Vec::new();
    for crd in model::crdgen::all() {
        for version in &crd.spec.versions {
            for column in version.additional_printer_columns.iter().flatten() {
                if column.type_ == "date" {
                    dates.push((crd.spec.names.kind.clone(), column.json_path.clone()));
                }
            }
        }
    }
    assert!(!dates.is_empty());
    let future: Vec<_> = dates
        .iter()
        .filter(|(_, path)| !past.contains(&path.as_str()))
        .collect();
    assert!(
        future.is_empty(),
        "date columns of times that may lie ahead (kubectl shows <invalid>): {future:?}"
    );
}
