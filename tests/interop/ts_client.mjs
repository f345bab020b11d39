// An MCP client built on the official TypeScript SDK (`@modelcontextprotocol/client`), for
// interop tests.
//
//     node ts_client.mjs --url http://127.0.0.1:PORT/mcp --scenario NAME [--mode default|auto]
//                        [--header NAME=VALUE ...]
//
// `--mode default` leaves the client's version negotiation as the SDK sets it (the handshake
// era, `initialize` and a session); `--mode auto` lets it probe `server/discover` and speak
// protocol 2026-07-28 to a server that serves it. It prints ONE line of JSON on stdout, the
// same report as python_client.py: what the calls answered (or what the SDK raised) and the
// server's `GET /stats`. Exit 0 once the scenario ran; 2 if it could not run at all.
//
// The SDK is installed outside the repository: MCP_NODE_MODULES names the folder that holds
// its node_modules (default ~/.cache/tower-idempotency/node).
//
// Scenarios: timeout_retry, fresh_id_replay, slow_in_progress (see python_client.py).

import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';

const modules = process.env.MCP_NODE_MODULES ?? join(homedir(), '.cache/tower-idempotency/node');
const require = createRequire(join(modules, 'package.json'));
const { Client, StreamableHTTPClientTransport, SdkError, SdkErrorCode } = require('@modelcontextprotocol/client');

function parseArgs(argv) {
    const args = { mode: 'default', header: [] };
    for (let i = 0; i < argv.length; i += 2) {
        const [name, value] = [argv[i].replace(/^--/, ''), argv[i + 1]];
        if (name === 'header') args.header.push(value);
        else args[name] = value;
    }
    return args;
}

const log = (...parts) => console.error(...parts);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function stats(url) {
    const root = url.replace(/\/+$/, '').replace(/\/mcp$/, '');
    const response = await fetch(`${root}/stats`);
    return response.json();
}

function textOf(result) {
    const texts = (result.content ?? []).filter((block) => block.text).map((block) => block.text);
    return texts.length ? texts.join('\n') : null;
}

async function connect(args) {
    const headers = Object.fromEntries(args.header.map((pair) => pair.split(/=(.*)/s).slice(0, 2)));
    const transport = new StreamableHTTPClientTransport(new URL(args.url), { requestInit: { headers } });
    const options = args.mode === 'auto' ? { versionNegotiation: { mode: 'auto' } } : {};
    const client = new Client({ name: 'interop-ts', version: '1.0.0' }, options);
    await client.connect(transport);
    return client;
}

// One tools/call: [text, result]; on failure the text says what the SDK raised.
async function call(client, name, args, timeout) {
    try {
        const result = await client.callTool({ name, arguments: args }, timeout ? { timeout } : undefined);
        return [textOf(result), result];
    } catch (error) {
        if (error instanceof SdkError && error.code === SdkErrorCode.RequestTimeout) return ['timeout', null];
        return [`raised ${error.constructor.name}: ${error.message}`, null];
    }
}

const scenarios = {
    async timeout_retry(client, url, suffix) {
        const args = { to: `timeout-${suffix}@example.com`, subject: 'Quarterly numbers', body: 'See attached.', delay_ms: 1500 };
        const texts = [];
        let final = null;
        for (let attempt = 0; attempt < 12; attempt++) {
            if (attempt) await sleep(300);
            const [text, result] = await call(client, 'send_email', args, 400);
            log(`attempt ${attempt + 1}: ${text}`);
            texts.push(text);
            if (result) {
                final = text;
                break;
            }
        }
        return { attempts: texts.length, texts, final_text: final, stats: await stats(url) };
    },
    async fresh_id_replay(client, url, suffix) {
        const args = { to: `replay-${suffix}@example.com`, subject: 'Hello', body: 'Hi there.' };
        const [first] = await call(client, 'send_email', args);
        const [second] = await call(client, 'send_email', args);
        return { texts: [first, second], stats: await stats(url) };
    },
    async slow_in_progress(client, url, suffix) {
        const args = { topic: `churn-${suffix}`, seconds: 2.0 };
        await client.listTools(); // as hosts do before calling: the layer learns the tools
        const texts = [];
        let first = null;
        for (let attempt = 0; attempt < 20; attempt++) {
            if (attempt) await sleep(500);
            const [text, result] = await call(client, 'generate_report', args, 10000);
            log(`try ${attempt + 1}: ${text}`);
            texts.push(text);
            first ??= result;
            if (result?.structuredContent?.outcome !== 'in_progress') break;
        }
        return {
            texts,
            first_structured_content: first?.structuredContent ?? null,
            first_is_error: first?.isError ?? null,
            stats: await stats(url),
        };
    },
};

async function main() {
    const args = parseArgs(process.argv.slice(2));
    let client;
    try {
        client = await connect(args);
    } catch (error) {
        log(`${args.scenario} could not run: ${error.stack ?? error}`);
        return 2;
    }
    const report = await scenarios[args.scenario](client, args.url, randomUUID().slice(0, 12));
    report.protocol_version = client.getNegotiatedProtocolVersion();
    console.log(JSON.stringify(report));
    await client.close().catch((error) => log(`while closing: ${error}`));
    return 0;
}

process.exit(await main());
