//! An agent's retries against `mcp_server`, through the `rmcp` client over Streamable HTTP.
//!
//! ```text
//! DEADLINE_MS=1000 cargo run --features mcp --example mcp_server &
//! cargo run --features mcp --example mcp_agent
//! ```
//!
//! It calls `send_email` twice with the same arguments, as a model that did not trust the
//! first answer would (each call carries a new JSON-RPC id), then `generate_report` for
//! longer than the server's deadline, and asks again until the report is ready. `MCP_URL`
//! names the endpoint (default `http://127.0.0.1:3001/mcp`).

use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, ClientConfig};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::{json, Value};

fn call(tool: &'static str, arguments: Value) -> CallToolRequestParams {
    let arguments = arguments.as_object().cloned().unwrap_or_default();
    CallToolRequestParams::new(tool).with_arguments(arguments)
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|block| block.as_text())
        .map(|block| block.text.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("MCP_URL").unwrap_or_else(|_| "http://127.0.0.1:3001/mcp".into());
    let transport = StreamableHttpClientTransport::from_uri(url.as_str());
    let client = ClientConfig::default().serve(transport).await?;

    let email = json!({"to": "ada@example.com", "subject": "Invoice", "body": "Attached."});
    for attempt in 1..=2 {
        let result = client.call_tool(call("send_email", email.clone())).await?;
        println!("send_email, attempt {attempt}: {}", text(&result));
    }

    let report = json!({"topic": "quarterly sales", "seconds": 2.5});
    for attempt in 1.. {
        let result = client
            .call_tool(call("generate_report", report.clone()))
            .await?;
        println!("generate_report, attempt {attempt}: {}", text(&result));
        let structured = result.structured_content.as_ref();
        let running = structured.is_some_and(|s| s["outcome"] == "in_progress");
        if !running {
            break;
        }
        let wait = structured
            .and_then(|s| s["retry_after_s"].as_u64())
            .unwrap_or(1);
        tokio::time::sleep(Duration::from_secs(wait)).await;
    }

    let root = url.trim_end_matches("/mcp");
    let stats: Value = reqwest::get(format!("{root}/stats")).await?.json().await?;
    println!("executions: {stats}");
    client.cancel().await?;
    Ok(())
}
