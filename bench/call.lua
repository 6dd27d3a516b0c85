-- wrk script for bench.run: one MCP tools/call of add(1, 2), sent again and again.
--
--   wrk ... -s bench/call.lua URL -- modern LIMIT
--   wrk ... -s bench/call.lua URL -- legacy LIMIT SESSION_ID
--
-- Every response is checked (status 200 and a text block holding "3"); bad ones are
-- counted and the first is kept, so bench.run can call the run INVALID. LIMIT caps the
-- responses per thread (0: no cap), bounding the loop in count as -d bounds it in time.
-- done() prints one BENCH_RESULT line of JSON for bench.run to parse.

local MODERN_BODY = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'
local LEGACY_BODY = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2}}}'
-- A text block holding the sum, whatever whitespace the server's JSON encoder puts after
-- the colon (Lua has no JSON parser; the body may also be an SSE event carrying JSON).
local EXPECTED = '"text":%s*"3"'

local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  local mode = args[1] or "modern"
  limit = tonumber(args[2] or "0") or 0
  responses = 0
  bad = 0
  first_bad = ""
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Accept"] = "application/json, text/event-stream"
  if mode == "legacy" then
    wrk.headers["MCP-Protocol-Version"] = "2025-11-25"
    wrk.headers["Mcp-Session-Id"] = args[3]
    wrk.body = LEGACY_BODY
  else
    wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
    wrk.headers["Mcp-Method"] = "tools/call"
    wrk.headers["Mcp-Name"] = "add"
    wrk.body = MODERN_BODY
  end
  -- No request() function: wrk then formats this request once per thread and resends the
  -- same bytes, so the load generator's own cost stays small and equal for every server.
end

function response(status, headers, body)
  responses = responses + 1
  if status ~= 200 or not string.find(body, EXPECTED) then
    bad = bad + 1
    if first_bad == "" then
      first_bad = tostring(status) .. " " .. string.sub(body or "", 1, 300)
    end
  end
  if limit > 0 and responses >= limit then
    wrk.thread:stop()
  end
end

function done(summary, latency, requests)
  local total_responses, total_bad, sample = 0, 0, ""
  for _, thread in ipairs(threads) do
    total_responses = total_responses + (thread:get("responses") or 0)
    total_bad = total_bad + (thread:get("bad") or 0)
    local first = thread:get("first_bad") or ""
    if sample == "" then
      sample = first
    end
  end
  local errors = summary.errors
  io.write(string.format(
    'BENCH_RESULT {"requests":%d,"duration_us":%d,"responses":%d,"bad":%d,'
      .. '"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,'
      .. '"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,"mean_us":%.1f}\n',
    summary.requests, summary.duration, total_responses, total_bad,
    errors.connect, errors.read, errors.write, errors.status, errors.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.max, latency.mean
  ))
  if sample ~= "" then
    io.write("BENCH_FIRST_BAD ", (string.gsub(sample, "[\r\n]", " ")), "\n")
  end
end
