//! The official MCP conformance suite's server scenarios, both requirement sets
//! (`--requirements 2025-11-25` and `2026-07-28`), against an MCP server built with the
//! official Python SDK (`tests/upstreams/conformance_server.py`): directly, through
//! `idempotency-proxy --mcp /mcp --mcp-shared-scope`, and through the crate's own layer in an
//! axum app that forwards to the server. Every scenario that passes directly passes both ways;
//! the `tasks-*` extension's scenarios are reported, not asserted. The table of every scenario
//! each way is printed (`-- --nocapture` shows it when the test passes).

mod support;

#[path = "conformance/layered.rs"]
mod layered;
#[path = "conformance/suite.rs"]
mod suite;

use std::collections::BTreeSet;

use suite::{Run, Standing, Suite};
use support::{python_with, Proxy, Upstream};

/// The protocol revisions whose requirement sets are run.
const REQUIREMENTS: [&str; 2] = ["2025-11-25", "2026-07-28"];

/// Where the suite meets the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    Direct,
    Proxy,
    Layer,
}

const WAYS: [Way; 3] = [Way::Direct, Way::Proxy, Way::Layer];

impl Way {
    fn label(self) -> &'static str {
        match self {
            Way::Direct => "direct",
            Way::Proxy => "proxy",
            Way::Layer => "layer",
        }
    }
}

const SDK_CHECK: &str =
    "import importlib.metadata as m, mcp.server.mcpserver; assert m.version('mcp') == '2.3.0'";

/// Both requirement sets run against the server, reached `way`; each way has a server of its
/// own, so that what one leaves running cannot slow another.
fn run_way(way: Way, suite: &Suite, runtime: &tokio::runtime::Runtime) -> Vec<Run> {
    let upstream = Upstream::start("conformance_server.py", &["0"]);
    let mut _proxy = None;
    let url = match way {
        Way::Direct => format!("{}/mcp", upstream.url()),
        Way::Proxy => {
            let flags = ["--mcp", "/mcp", "--mcp-shared-scope"];
            let proxy = Proxy::in_front_of(&upstream.url(), &flags);
            let url = format!("{}/mcp", proxy.url);
            _proxy = Some(proxy);
            url
        }
        Way::Layer => runtime.block_on(layered::serve(upstream.url())),
    };
    REQUIREMENTS
        .iter()
        .map(|requirements| suite.run(&url, requirements))
        .collect()
}

fn cell(run: &Run, scenario: &str) -> &'static str {
    match run.verdicts.get(scenario) {
        Some(verdict) if verdict.passed => "pass",
        Some(_) => "FAIL",
        None => "-",
    }
}

/// The table of one requirement set: a line per scenario, a cell per way, then the score.
fn table(requirements: &str, runs: [&Run; 3]) -> String {
    let scenarios: BTreeSet<&String> = runs.iter().flat_map(|run| run.verdicts.keys()).collect();
    let heading = format!("{requirements} (suite {})", suite::VERSION);
    let mut text = format!("\n{heading:<64}direct  proxy   layer\n");
    for standing in [Standing::Required, Standing::Unscored, Standing::Extension] {
        for scenario in &scenarios {
            let Some(verdict) = runs[0].verdicts.get(*scenario) else {
                continue;
            };
            if verdict.standing != standing {
                continue;
            }
            let name = match standing {
                Standing::Required => (*scenario).clone(),
                Standing::Unscored => format!("{scenario} (not scored)"),
                Standing::Extension => format!("{scenario} (extension, reported)"),
            };
            let cells = runs.map(|run| format!("{:<8}", cell(run, scenario)));
            text.push_str(&format!("  {name:<62}{}\n", cells.concat().trim_end()));
        }
    }
    let scores = runs.map(|run| {
        let required = run
            .verdicts
            .values()
            .filter(|verdict| verdict.standing == Standing::Required);
        let passed = required.clone().filter(|verdict| verdict.passed).count();
        (passed, required.count(), run.took.as_secs_f64())
    });
    let scores: Vec<String> = WAYS
        .iter()
        .zip(scores)
        .map(|(way, (passed, of, took))| format!("{} {passed}/{of} in {took:.1} s", way.label()))
        .collect();
    text.push_str(&format!("  required: {}\n", scores.join(", ")));
    text
}

#[test]
fn every_scenario_that_passes_directly_passes_through_the_proxy_and_the_layer() {
    let Some(suite) = suite::find() else {
        return;
    };
    if python_with(SDK_CHECK, "the official Python MCP SDK 2.3.0").is_none() {
        return;
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let runs: Vec<Vec<Run>> = std::thread::scope(|scope| {
        let handles: Vec<_> = WAYS
            .iter()
            .map(|&way| {
                let (suite, runtime) = (&suite, &runtime);
                scope.spawn(move || run_way(way, suite, runtime))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });

    let mut whole = Vec::new();
    let mut broken = Vec::new();
    for (set, requirements) in REQUIREMENTS.iter().enumerate() {
        let [direct, proxy, layer] = [&runs[0][set], &runs[1][set], &runs[2][set]];
        println!("{}", table(requirements, [direct, proxy, layer]));
        for (scenario, verdict) in &direct.verdicts {
            if !verdict.passed {
                if verdict.standing == Standing::Required {
                    whole.push(format!("{requirements} {scenario}: {:?}", verdict.why));
                }
                continue;
            }
            if verdict.standing == Standing::Extension {
                continue;
            }
            for (way, run) in [(Way::Proxy, proxy), (Way::Layer, layer)] {
                let Some(through) = run.verdicts.get(scenario) else {
                    broken.push(format!(
                        "{requirements} {scenario}: not run {}",
                        way.label()
                    ));
                    continue;
                };
                if !through.passed {
                    let why = through.why.as_deref().unwrap_or("no failing check saved");
                    let way = way.label();
                    broken.push(format!(
                        "{requirements} {scenario} through the {way}: {why}"
                    ));
                }
            }
        }
    }
    assert!(
        whole.is_empty(),
        "the server under test fails required scenarios directly:\n{}",
        whole.join("\n")
    );
    assert!(
        broken.is_empty(),
        "scenarios that pass directly fail through the idempotency layer:\n{}",
        broken.join("\n")
    );
}
