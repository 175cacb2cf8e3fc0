-- Keyed creates for wrk: each request creates an order under a fresh Idempotency-Key, or, with
-- the share of retries, sends an earlier request of the thread again (same key, same body),
-- one old enough to have been answered, so that the server replays it. Arguments: the run's
-- prefix of keys, the share of retries. done() prints the figures as one JSON line.
local threads = {}

function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end

function init(args)
  run, share = args[1], tonumber(args[2])
  n, replays, conflicts, bad = 0, 0, 0, 0
end

local gap = 256 -- answered long since: a thread has far fewer requests in flight

function request()
  local i
  if n > gap and math.random() < share then
    i = math.random(n - gap)
  else
    n = n + 1
    i = n
  end
  local key = run .. "-" .. id .. "-" .. i
  local body = '{"customerId":"cust-' .. key .. '","currency":"EUR","lines":[{"sku":"sku-1","quantity":1,"unitPrice":100}],"clientReference":"' .. key .. '"}'
  return wrk.format("POST", "/v1/orders", { ["Content-Type"] = "application/json", ["Idempotency-Key"] = key }, body)
end

function response(status, headers, body)
  if status == 409 then
    conflicts = conflicts + 1
  elseif status ~= 201 then
    bad = bad + 1
  elseif headers["Idempotent-Replayed"] == "true" then
    replays = replays + 1
  end
end

function done(summary, latency, requests)
  local r, c, b = 0, 0, 0
  for _, t in ipairs(threads) do
    r, c, b = r + t:get("replays"), c + t:get("conflicts"), b + t:get("bad")
  end
  local e = summary.errors
  io.write(string.format('{"requests":%d,"replays":%d,"conflicts":%d,"bad":%d,"socketErrors":%d,"durationUs":%d,"p50Us":%d,"p95Us":%d,"p99Us":%d,"maxUs":%d}\n',
    summary.requests, r, c, b, e.connect + e.read + e.write + e.timeout, summary.duration,
    latency:percentile(50), latency:percentile(95), latency:percentile(99), latency.max))
end
