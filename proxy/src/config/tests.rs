use std::io::Write;
use std::time::Duration;

use clap::Parser;

use super::*;

fn cli(args: &[&str]) -> Cli {
    Cli::parse_from(std::iter::once("idempotency-proxy").chain(args.iter().copied()))
}

fn with_file(text: &str, args: &[&str]) -> Result<Config, ConfigError> {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(text.as_bytes()).unwrap();
    let path = file.path().to_str().unwrap().to_owned();
    let mut all = vec!["--config", path.as_str()];
    all.extend_from_slice(args);
    Config::load(&cli(&all))
}

#[test]
fn flags_alone_run_the_memory_store_in_front_of_the_upstream() {
    let config = Config::load(&cli(&["--upstream", "http://127.0.0.1:8000"])).unwrap();
    assert_eq!(config.listen.to_string(), "127.0.0.1:3000");
    assert!(matches!(config.store.kind, StoreKind::Memory));
    assert_eq!(config.default_route.mode, Mode::Protect);
    assert!(config.routes.is_empty());
}

#[test]
fn the_credential_headers_default_to_authorization_and_are_read_from_the_file() {
    let flags = ["--upstream", "http://127.0.0.1:8000"];
    let config = Config::load(&cli(&flags)).unwrap();
    assert_eq!(
        config.scope.credential_headers,
        [http::header::AUTHORIZATION]
    );
    let text = "[scope]\ncredential_headers = [\"authorization\", \"x-api-key\"]\n";
    let config = with_file(text, &flags).unwrap();
    let names: Vec<_> = config
        .scope
        .credential_headers
        .iter()
        .map(|h| h.as_str())
        .collect();
    assert_eq!(names, ["authorization", "x-api-key"]);
    let refused = with_file("[scope]\ncredential_headers = [\"bad header\"]\n", &flags);
    assert!(refused.unwrap_err().0.contains("credential_headers"));
}

#[test]
fn a_file_with_every_table_is_read_and_flags_override_it() {
    let text = r#"
listen = "127.0.0.1:4000"
metrics_listen = "127.0.0.1:9100"
log_format = "json"
shutdown_grace = "10s"

[upstream]
url = "http://127.0.0.1:8000/api"
host = "rewrite"
timeout = "30s"

[store]
redis_url = "redis://127.0.0.1:6390"
prefix = "tools:"

[scope]
header = "x-conversation-id"
principal_header = "x-user"

[limits]
body = 65536
response = 131072

[defaults]
mode = "pass"

[[routes]]
prefix = "/tools"
deadline = "2s"
ignore_fields = ["/tool_call_id"]
key_header = "idempotency-key"

[[routes]]
prefix = "/tools/report"
timeout = "7m"
key_field = "/request_id"
"#;
    let config = with_file(text, &["--listen", "127.0.0.1:4001", "--mcp", "/mcp"]).unwrap();
    assert_eq!(config.listen.to_string(), "127.0.0.1:4001");
    assert_eq!(config.metrics_listen.unwrap().to_string(), "127.0.0.1:9100");
    assert_eq!(config.shutdown_grace, Duration::from_secs(10));
    assert_eq!(config.store.prefix.as_deref(), Some("tools:"));
    assert_eq!(config.scope.header.as_ref().unwrap(), "x-conversation-id");
    assert_eq!(config.scope.principal_header.as_ref().unwrap(), "x-user");
    assert_eq!(
        (config.limits.body, config.limits.response),
        (Some(65536), Some(131072))
    );
    assert_eq!(config.upstream.url.path(), "/api");
    assert_eq!(config.log_format, LogFormat::Json);
    assert_eq!(config.upstream.host, HostHeader::Rewrite);
    assert!(matches!(&config.store.kind, StoreKind::Redis(url) if url.ends_with(":6390")));
    assert_eq!(config.default_route.mode, Mode::Pass);
    let prefixes: Vec<_> = config.routes.iter().map(|r| r.prefix.as_str()).collect();
    assert_eq!(prefixes, ["/tools/report", "/tools", "/mcp"]);
    let report = &config.routes[0];
    assert_eq!(report.mode, Mode::Protect);
    assert_eq!(report.timeout, Duration::from_secs(420));
    assert!(matches!(&report.key, Some(KeySource::Field(f)) if f == "/request_id"));
    assert_eq!(config.routes[1].deadline, Some(Duration::from_secs(2)));
    assert_eq!(config.routes[1].timeout, Duration::from_secs(30));
    assert_eq!(config.routes[2].mode, Mode::Mcp);
}

#[test]
fn an_unknown_key_is_refused_with_its_line_and_the_valid_keys() {
    let error = with_file(
        "[upstream]\nurl = \"http://127.0.0.1:8000\"\ntimout = \"5s\"\n",
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("line 3"), "{error}");
    assert!(error.contains("timout"), "{error}");
    assert!(error.contains("`timeout`"), "{error}");
}

#[test]
fn a_bad_value_is_refused_with_its_line_and_what_would_be_valid() {
    let text = "[upstream]\nurl = \"http://127.0.0.1:8000\"\n\n[defaults]\ndeadline = \"soon\"\n";
    let error = with_file(text, &[]).unwrap_err().to_string();
    assert!(error.contains("line 5"), "{error}");
    assert!(error.contains("deadline"), "{error}");
    assert!(error.contains("\"20s\""), "{error}");
}

#[test]
fn a_route_with_two_key_sources_is_refused_at_its_line() {
    let text = "[upstream]\nurl = \"http://127.0.0.1:8000\"\n\n[[routes]]\nprefix = \"/tools\"\nkey_header = \"idempotency-key\"\nkey_field = \"/id\"\n";
    let error = with_file(text, &[]).unwrap_err().to_string();
    assert!(
        error.contains("line 4") || error.contains("line 5"),
        "{error}"
    );
    assert!(error.contains("not both"), "{error}");
}

#[test]
fn no_upstream_and_bad_flags_say_which_setting() {
    let error = Config::load(&cli(&[])).unwrap_err().to_string();
    assert!(error.contains("--upstream"), "{error}");
    let error = Config::load(&cli(&["--upstream", "ftp://example.com"]))
        .unwrap_err()
        .to_string();
    assert!(error.starts_with("--upstream:"), "{error}");
    let error = Config::load(&cli(&[
        "--upstream",
        "http://127.0.0.1:1",
        "--deadline",
        "x",
    ]))
    .unwrap_err()
    .to_string();
    assert!(error.starts_with("--deadline:"), "{error}");
    let error = Config::load(&cli(&[
        "--upstream",
        "http://127.0.0.1:1",
        "--redis-url",
        "127.0.0.1:6379",
    ]))
    .unwrap_err()
    .to_string();
    assert!(error.contains("redis://"), "{error}");
}

#[test]
fn an_mcp_route_refuses_an_explicit_key() {
    let text = "[upstream]\nurl = \"http://127.0.0.1:8000\"\n[[routes]]\nprefix = \"/mcp\"\nmode = \"mcp\"\nkey_header = \"idempotency-key\"\n";
    let error = with_file(text, &[]).unwrap_err().to_string();
    assert!(
        error.contains("mode = \\\"mcp\\\"") || error.contains("mode = \"mcp\""),
        "{error}"
    );
}

#[test]
fn the_readmes_configuration_file_is_valid_and_read_as_it_says() {
    let readme = include_str!("../../README.md");
    let start = readme.find("```toml\n").expect("a TOML block") + "```toml\n".len();
    let block = &readme[start..];
    let block = &block[..block.find("```").unwrap()];
    let config = with_file(block, &[]).unwrap();
    assert_eq!(config.log_format, LogFormat::Json);
    assert_eq!(config.default_route.mode, Mode::Protect);
    assert!(matches!(
        config.default_route.key,
        Some(KeySource::Header(_))
    ));
    let mcp = config.routes.iter().find(|r| r.mode == Mode::Mcp).unwrap();
    assert!(mcp.key.is_none());
    assert_eq!(mcp.ignore_fields, ["/trace_id"]);
    let report = &config.routes[0];
    assert_eq!(report.prefix, "/tools/generate_report");
    assert_eq!(report.timeout, Duration::from_secs(900));
    assert_eq!(report.max_execution, Some(Duration::from_secs(1200)));
    assert_eq!(
        report.ignore_fields,
        ["/tool_call_id"],
        "inherited from [defaults]"
    );
}

#[test]
fn settings_that_cannot_work_together_are_refused() {
    let base = "[upstream]\nurl = \"http://127.0.0.1:8000\"\n";
    let cases = [
        (
            "[upstream]\nurl = \"http://127.0.0.1:8000\"\nconnect_timeout = \"5s\"\n[[routes]]\nprefix = \"/t\"\ntimeout = \"2s\"\n",
            "connect_timeout",
        ),
        (
            "[[routes]]\nprefix = \"/t\"\ntimeout = \"15m\"\nmax_execution = \"10m\"\n",
            "max_execution",
        ),
        ("[defaults]\nprefix = \"/tools\"\n", "[[routes]]"),
    ];
    for (text, named) in cases {
        let text = if text.starts_with("[upstream]") {
            text.to_owned()
        } else {
            format!("{base}{text}")
        };
        let error = with_file(&text, &[]).unwrap_err().to_string();
        assert!(error.contains(named), "{text}: {error}");
    }
}

#[test]
fn mcp_on_a_path_the_file_routes_keeps_that_routes_settings() {
    let text = "[upstream]\nurl = \"http://127.0.0.1:8000\"\n[[routes]]\nprefix = \"/mcp\"\ndeadline = \"3s\"\ntimeout = \"2m\"\n";
    let config = with_file(text, &["--mcp", "/mcp"]).unwrap();
    let mcp = &config.routes[0];
    assert_eq!(mcp.mode, Mode::Mcp);
    assert_eq!(mcp.deadline, Some(Duration::from_secs(3)));
    assert_eq!(mcp.timeout, Duration::from_secs(120));
}

#[test]
fn mcp_on_a_path_the_file_routes_does_not_take_the_defaults_key_or_fields() {
    let text = "[upstream]\nurl = \"http://127.0.0.1:8000\"\n[defaults]\nkey_header = \"idempotency-key\"\nignore_fields = [\"/tool_call_id\"]\n[[routes]]\nprefix = \"/mcp\"\ndeadline = \"3s\"\n";
    let config = with_file(text, &["--mcp", "/mcp"]).expect("an MCP route keys by its arguments");
    let mcp = &config.routes[0];
    assert_eq!(mcp.mode, Mode::Mcp);
    assert!(mcp.key.is_none(), "{:?}", mcp.key);
    assert!(mcp.ignore_fields.is_empty(), "{:?}", mcp.ignore_fields);
    assert_eq!(mcp.deadline, Some(Duration::from_secs(3)));
}

#[test]
fn a_key_on_a_route_made_mcp_by_the_flag_is_refused_naming_the_flag() {
    let text = "[upstream]\nurl = \"http://127.0.0.1:8000\"\n[[routes]]\nprefix = \"/mcp\"\nkey_header = \"idempotency-key\"\n";
    let error = with_file(text, &["--mcp", "/mcp"]).unwrap_err().to_string();
    assert!(error.contains("key_header"), "{error}");
    assert!(error.contains("--mcp /mcp"), "{error}");
}

#[test]
fn observing_by_default_leaves_pass_routes_as_they_are_and_a_route_may_enforce() {
    let text = "[upstream]\nurl = \"http://127.0.0.1:8000\"\n[defaults]\nobserve = true\n[[routes]]\nprefix = \"/files\"\nmode = \"pass\"\n[[routes]]\nprefix = \"/tools/pay\"\nobserve = false\n";
    let config = with_file(text, &[]).expect("a pass route under observing defaults");
    assert!(config.default_route.observe);
    let route = |prefix: &str| config.routes.iter().find(|r| r.prefix == prefix).unwrap();
    assert!(!route("/files").observe, "a pass route keys nothing");
    assert!(!route("/tools/pay").observe, "this route enforces");
}

#[test]
fn arguments_are_checked_on_the_mcp_routes_that_say_so_or_on_every_one_by_flag() {
    let text = "[upstream]\nurl = \"http://127.0.0.1:8000\"\n[[routes]]\nprefix = \"/mcp\"\nmode = \"mcp\"\nvalidate_arguments = true\n[[routes]]\nprefix = \"/other\"\nmode = \"mcp\"\n[[routes]]\nprefix = \"/tools\"\n";
    let config = with_file(text, &[]).unwrap();
    let checks = |config: &Config, prefix: &str| {
        let route = config.routes.iter().find(|r| r.prefix == prefix).unwrap();
        route.validate_arguments
    };
    assert!(checks(&config, "/mcp"));
    assert!(!checks(&config, "/other"), "off by default");
    let config = with_file(text, &["--mcp-validate-arguments"]).unwrap();
    assert!(checks(&config, "/mcp") && checks(&config, "/other"));
    assert!(!checks(&config, "/tools"), "not an MCP route");
    assert!(!config.default_route.validate_arguments);
    let http = "[upstream]\nurl = \"http://127.0.0.1:8000\"\n[[routes]]\nprefix = \"/tools\"\nvalidate_arguments = true\n";
    let error = with_file(http, &[]).unwrap_err().to_string();
    assert!(error.contains("mode = \"mcp\""), "{error}");
}

#[test]
fn a_postgres_store_is_named_by_flag_or_file_and_never_beside_redis() {
    let flag = cli(&[
        "--upstream",
        "http://127.0.0.1:8000",
        "--postgres-url",
        "postgres://app@db/app",
    ]);
    let config = Config::load(&flag).unwrap();
    assert!(
        matches!(&config.store.kind, StoreKind::Postgres(url) if url == "postgres://app@db/app")
    );
    let text = "[upstream]\nurl = \"http://127.0.0.1:8000\"\n[store]\npostgres_url = \"postgresql://app@db/app\"\n";
    let config = with_file(text, &[]).unwrap();
    assert_eq!(config.store.kind_name(), "postgres");
    let both = "[upstream]\nurl = \"http://127.0.0.1:8000\"\n[store]\npostgres_url = \"postgres://db/app\"\nredis_url = \"redis://127.0.0.1:6379\"\n";
    let error = with_file(both, &[]).unwrap_err().to_string();
    assert!(error.contains("Postgres and Redis"), "{error}");
    let wrong =
        "[upstream]\nurl = \"http://127.0.0.1:8000\"\n[store]\npostgres_url = \"mysql://db/app\"\n";
    let error = with_file(wrong, &[]).unwrap_err().to_string();
    assert!(error.contains("not a PostgreSQL URL"), "{error}");
}

#[test]
fn tls_settings_need_an_https_upstream_and_readable_files() {
    let error = with_file(
        "[upstream]\nurl = \"http://127.0.0.1:8000\"\nca_file = \"/nowhere/ca.pem\"\n",
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("https://"), "{error}");
    let error = with_file(
        "[upstream]\nurl = \"https://127.0.0.1:8443\"\nca_file = \"/nowhere/ca.pem\"\n",
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("/nowhere/ca.pem"), "{error}");
    let error = with_file(
        "[upstream]\nurl = \"https://127.0.0.1:8443\"\nclient_cert = \"/nowhere/c.pem\"\n",
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("go together"), "{error}");
}

#[test]
fn telemetry_is_read_from_the_file_and_the_flags_win() {
    let flags = ["--upstream", "http://127.0.0.1:8000"];
    let config = Config::load(&cli(&flags)).unwrap();
    assert_eq!(config.telemetry.request_id_header, "x-request-id");
    assert!(config.telemetry.otlp.is_none(), "no exporter by default");
    let text = "[telemetry]\nrequest_id_header = \"x-correlation-id\"\n\
                otlp_endpoint = \"http://127.0.0.1:4317\"\n";
    let config = with_file(text, &flags).unwrap();
    assert_eq!(config.telemetry.request_id_header, "x-correlation-id");
    let otlp = config.telemetry.otlp.unwrap();
    assert_eq!(otlp.protocol, OtlpProtocol::Grpc);
    let mut args = flags.to_vec();
    args.extend([
        "--otlp-endpoint",
        "http://collector:4318",
        "--request-id-header",
        "x-id",
    ]);
    let config = with_file(text, &args).unwrap();
    assert_eq!(config.telemetry.request_id_header, "x-id");
    let otlp = config.telemetry.otlp.unwrap();
    assert_eq!(otlp.endpoint, "http://collector:4318/v1/traces");
    assert_eq!(otlp.protocol, OtlpProtocol::Http);
    let refused = with_file("[telemetry]\notlp_endpoint = \"https://c:4318\"\n", &flags);
    let message = refused.unwrap_err().0;
    assert!(
        message.contains("otlp_endpoint") && message.contains("line 2"),
        "{message}"
    );
}
