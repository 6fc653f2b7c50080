-- wrk script of bench/service.sh: POST /run of /bin/true, each request with the next of many
-- student tokens (so no token's rate limit is what stops the load), checking every answer.
--   wrk -s bench/run_load.lua ... URL   with env TOKENS_FILE (one token per line) and OUT_JSON.
local tokens = {}
local next_token = 1
local body = '{"cmd":["/bin/true"]}'
-- A global, not a local: `done` reads it from each thread's state with `thread:get`, which
-- sees globals only (a local here made every failure invisible).
bad = 0
local threads = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("id", #threads)
end

function init(args)
  for line in io.lines(os.getenv("TOKENS_FILE")) do
    if #line > 0 then table.insert(tokens, line) end
  end
  -- Threads start at different tokens so they do not walk the list in step.
  next_token = (id * 7919) % #tokens + 1
end

function request()
  local t = tokens[next_token]
  next_token = next_token % #tokens + 1
  return wrk.format("POST", "/run",
    { ["Authorization"] = "Bearer " .. t, ["Content-Type"] = "application/json" }, body)
end

function response(status, headers, resp)
  -- Only an answer that says the run happened and was ok counts as a success.
  if status ~= 200 or not string.find(resp, '"status":"ok"', 1, true) then
    bad = bad + 1
  end
end

function done(summary, latency, requests)
  local not_ok = 0
  for _, t in ipairs(threads) do not_ok = not_ok + (t:get("bad") or 0) end
  local ntokens = 0
  for line in io.lines(os.getenv("TOKENS_FILE")) do
    if #line > 0 then ntokens = ntokens + 1 end
  end
  local s = summary.duration / 1e6
  local f = io.open(os.getenv("OUT_JSON"), "w")
  f:write(string.format(
    '{"requests": %d, "duration_s": %.3f, "req_per_s": %.1f, "p50_ms": %.3f, "p90_ms": %.3f, ' ..
    '"p99_ms": %.3f, "max_ms": %.3f, "not_ok": %d, "socket_errors": %d, "tokens": %d}\n',
    summary.requests, s, summary.requests / s, latency:percentile(50) / 1000,
    latency:percentile(90) / 1000, latency:percentile(99) / 1000, latency.max / 1000, not_ok,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    ntokens))
  f:close()
end
