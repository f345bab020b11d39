//! The proxy's spans: made for every call, and sent to an OTLP collector where one is
//! configured. Without one they still carry the trace context on (a span id of the proxy's
//! own, a trace id minted where the client sent none), and nothing is exported.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{SpanExporter, WithExportConfig};
use opentelemetry_sdk::trace::{SdkTracerProvider, Tracer};
use opentelemetry_sdk::Resource;

use crate::config::{Otlp, OtlpProtocol};

/// The tracer provider: what makes the spans, and exports them.
pub struct Traces {
    provider: SdkTracerProvider,
}

impl Traces {
    /// Spans exported to `otlp` in batches, where it is set. A gRPC exporter is built in a
    /// Tokio runtime's context, whose tasks carry its connection.
    pub fn start(otlp: Option<&Otlp>) -> Result<Self, String> {
        let resource = Resource::builder()
            .with_service_name("idempotency-proxy")
            .build();
        let mut provider = SdkTracerProvider::builder().with_resource(resource);
        if let Some(otlp) = otlp {
            let built = match otlp.protocol {
                OtlpProtocol::Http => SpanExporter::builder()
                    .with_http()
                    .with_endpoint(&otlp.endpoint)
                    .build(),
                OtlpProtocol::Grpc => SpanExporter::builder()
                    .with_tonic()
                    .with_endpoint(&otlp.endpoint)
                    .build(),
            };
            let exporter = built
                .map_err(|error| format!("cannot export spans to {}: {error}", otlp.endpoint))?;
            provider = provider.with_batch_exporter(exporter);
        }
        Ok(Self {
            provider: provider.build(),
        })
    }

    /// The tracer of the proxy's spans.
    pub fn tracer(&self) -> Tracer {
        self.provider.tracer("idempotency-proxy")
    }

    /// Sends the spans not yet exported, and stops the exporter.
    pub fn shutdown(self) {
        if let Err(error) = self.provider.shutdown() {
            tracing::warn!(%error, "the last spans could not be exported");
        }
    }
}
