//! Request ids and traces: the header that carries a call's id, and where spans go over OTLP.

use http::{HeaderName, Uri};
use toml::Spanned;

use super::values::header_name;
use super::ConfigError;
use crate::cli::Cli;

/// How a call is told apart in logs and traces.
#[derive(Debug, Clone)]
pub struct Telemetry {
    /// The header read, or set where a request has none, and given back on every answer.
    pub request_id_header: HeaderName,
    /// Where spans are exported; none: no exporter runs.
    pub otlp: Option<Otlp>,
}

/// An OTLP collector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Otlp {
    /// For HTTP, the URL spans are posted to; for gRPC, the collector's address.
    pub endpoint: String,
    pub protocol: OtlpProtocol,
}

/// How spans reach the collector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum OtlpProtocol {
    /// OTLP/gRPC, by convention on port 4317.
    Grpc,
    /// OTLP/HTTP with protobuf bodies, by convention on port 4318.
    Http,
}

/// The flags' settings, else the file's `[telemetry]` table's.
pub(super) fn telemetry(
    cli: &Cli,
    table: super::file::TelemetryTable,
    where_: &dyn Fn(std::ops::Range<usize>) -> String,
) -> Result<Telemetry, ConfigError> {
    let request_id_header = match &cli.request_id_header {
        Some(name) => {
            header_name(name).map_err(|m| ConfigError(format!("--request-id-header: {m}")))?
        }
        None => table.request_id_header.map_or_else(
            || HeaderName::from_static(tower_idempotency::DEFAULT_REQUEST_ID_HEADER),
            |name| name.0,
        ),
    };
    let protocol = cli.otlp_protocol.or(table.otlp_protocol);
    let otlp = match (&cli.otlp_endpoint, table.otlp_endpoint) {
        (Some(url), _) => {
            Some(otlp(url, protocol).map_err(|m| ConfigError(format!("--otlp-endpoint: {m}")))?)
        }
        (None, Some(url)) => {
            let at = where_(url.span());
            let parsed = otlp(url.get_ref(), protocol);
            Some(parsed.map_err(|m| ConfigError(format!("{at}: otlp_endpoint: {m}")))?)
        }
        (None, None) => None,
    };
    Ok(Telemetry {
        request_id_header,
        otlp,
    })
}

/// A collector's URL: `http://HOST:PORT`, spoken to in `protocol`, or where none is given, in
/// gRPC on port 4317 and in OTLP/HTTP elsewhere. An OTLP/HTTP URL without a path is the
/// collector's base, to which `/v1/traces` is added; one with a path is used as it is.
fn otlp(text: &str, protocol: Option<OtlpProtocol>) -> Result<Otlp, String> {
    let uri: Uri = text
        .parse()
        .map_err(|_| format!("`{text}` is not a URL: expected one like http://127.0.0.1:4318"))?;
    match uri.scheme_str() {
        Some("http") => {}
        _ => {
            return Err(format!(
                "`{text}`: spans are sent in plain text, to a collector on this host or network \
                 (which may forward them over TLS): expected http://HOST:PORT"
            ))
        }
    }
    let Some(authority) = uri.authority() else {
        return Err(format!("`{text}` has no host: expected http://HOST:PORT"));
    };
    let protocol = protocol.unwrap_or(match authority.port_u16() {
        Some(4317) => OtlpProtocol::Grpc,
        _ => OtlpProtocol::Http,
    });
    let endpoint = match (protocol, uri.path()) {
        (OtlpProtocol::Http, "" | "/") => format!("http://{authority}/v1/traces"),
        (OtlpProtocol::Http, _) => text.to_owned(),
        (OtlpProtocol::Grpc, _) => format!("http://{authority}"),
    };
    Ok(Otlp { endpoint, protocol })
}

/// The file's `otlp_endpoint`, kept with its place for messages.
pub type EndpointSetting = Spanned<String>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_names_its_protocol_by_its_port_unless_one_is_set() {
        let http = otlp("http://127.0.0.1:4318", None).unwrap();
        assert_eq!(http.protocol, OtlpProtocol::Http);
        assert_eq!(http.endpoint, "http://127.0.0.1:4318/v1/traces");
        let grpc = otlp("http://collector:4317", None).unwrap();
        assert_eq!(grpc.protocol, OtlpProtocol::Grpc);
        assert_eq!(grpc.endpoint, "http://collector:4317");
        let chosen = otlp("http://collector:9000/", Some(OtlpProtocol::Grpc)).unwrap();
        assert_eq!(chosen.protocol, OtlpProtocol::Grpc);
        let path = otlp("http://collector:4318/otlp/v1/traces", None).unwrap();
        assert_eq!(path.endpoint, "http://collector:4318/otlp/v1/traces");
        assert!(otlp("https://collector:4318", None)
            .unwrap_err()
            .contains("plain text"));
        assert!(otlp("collector:4318", None).is_err());
    }
}
