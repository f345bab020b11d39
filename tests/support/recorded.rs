//! Metrics as a test reads them back from a `DebuggingRecorder`'s snapshot.

use metrics_util::debugging::DebugValue;
use metrics_util::CompositeKey;

pub type Snapshot = Vec<(
    CompositeKey,
    Option<metrics::Unit>,
    Option<metrics::SharedString>,
    DebugValue,
)>;

pub fn matching<'a>(
    snapshot: &'a Snapshot,
    name: &'a str,
    labels: &'a [(&str, &str)],
) -> impl Iterator<Item = &'a DebugValue> {
    snapshot
        .iter()
        .filter(move |(key, ..)| key.key().name() == name)
        .filter(move |(key, ..)| {
            labels.iter().all(|(k, v)| {
                key.key()
                    .labels()
                    .any(|label| label.key() == *k && label.value() == *v)
            })
        })
        .map(|(.., value)| value)
}

pub fn counter(snapshot: &Snapshot, name: &str, labels: &[(&str, &str)]) -> u64 {
    matching(snapshot, name, labels)
        .map(|value| match value {
            DebugValue::Counter(n) => *n,
            other => panic!("{name} is not a counter: {other:?}"),
        })
        .sum()
}

pub fn histogram(snapshot: &Snapshot, name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
    matching(snapshot, name, labels)
        .flat_map(|value| match value {
            DebugValue::Histogram(values) => {
                values.iter().map(|v| v.into_inner()).collect::<Vec<_>>()
            }
            other => panic!("{name} is not a histogram: {other:?}"),
        })
        .collect()
}

pub fn gauge(snapshot: &Snapshot, name: &str) -> f64 {
    let values: Vec<f64> = matching(snapshot, name, &[])
        .map(|value| match value {
            DebugValue::Gauge(v) => v.into_inner(),
            other => panic!("{name} is not a gauge: {other:?}"),
        })
        .collect();
    assert_eq!(values.len(), 1, "one {name} series: {snapshot:?}");
    values[0]
}
