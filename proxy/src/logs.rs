//! Logs on stderr, as text or one JSON object per line; `RUST_LOG` filters them (default
//! `info`). Every line about a call is written within its spans: the proxy's `request`
//! (`request_id`, `trace_id`, and `intent` once known) and the layer's `idempotency`
//! (`intent`), which are kept whatever the filter, so that a warning carries them too. The
//! same spans go to the tracer, whatever `RUST_LOG` says.

use opentelemetry_sdk::trace::Tracer;
use tracing::Metadata;
use tracing_subscriber::filter::{filter_fn, FilterExt, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::config::LogFormat;

/// The spans of one call: the proxy's own, and the layer's inside it.
fn is_call_span(metadata: &Metadata<'_>) -> bool {
    let target = metadata.target();
    metadata.is_span()
        && match metadata.name() {
            "request" => target.starts_with("idempotency_proxy"),
            "idempotency" => target.starts_with("tower_idempotency"),
            _ => false,
        }
}

pub fn init(format: LogFormat, tracer: Tracer) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // The call spans are at `info`: the hint keeps finer callsites off where `RUST_LOG` does.
    let call_spans = filter_fn(is_call_span).with_max_level_hint(tracing::Level::INFO);
    let logged = filter.or(call_spans);
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false);
    let fmt = match format {
        LogFormat::Text => fmt.with_filter(logged).boxed(),
        LogFormat::Json => fmt.json().with_filter(logged).boxed(),
    };
    // The proxy's and the layer's spans and events, not those of the libraries below them
    // (the exporter's own HTTP client among them).
    let traced = Targets::new()
        .with_target("idempotency_proxy", tracing::Level::INFO)
        .with_target("tower_idempotency", tracing::Level::INFO);
    let otel = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(traced);
    tracing_subscriber::registry().with(fmt).with(otel).init();
}
