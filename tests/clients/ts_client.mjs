// Lists and calls tools with the TypeScript SDK client; prints one JSON object.
// Usage: node ts_client.mjs <sdk-root> <url>
import { pathToFileURL } from "node:url";
import path from "node:path";

const [sdkRoot, url] = process.argv.slice(2);
const load = (p) => import(pathToFileURL(path.join(sdkRoot, "dist/esm", p)).href);
const { Client } = await load("client/index.js");
const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");

const client = new Client({ name: "ts-sdk-test", version: "1.0.0" }, { capabilities: {} });
const transport = new StreamableHTTPClientTransport(new URL(url));
await client.connect(transport);
const tools = await client.listTools();
const added = await client.callTool({ name: "add", arguments: { numbers: [1, 2, 3] } });
const greet = await client.callTool({ name: "greet", arguments: {} });
console.log(JSON.stringify({
  protocolVersion: transport.protocolVersion,
  sessionId: transport.sessionId,
  tools: tools.tools.map((t) => t.name),
  added,
  greet,
}));
await transport.terminateSession();
await client.close();
