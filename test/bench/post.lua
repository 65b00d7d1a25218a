-- wrk script: POST the JSON body in $BENCH_BODY with the API key in $BENCH_API_KEY.
wrk.method = "POST"
wrk.body = os.getenv("BENCH_BODY")
wrk.headers["Content-Type"] = "application/json"
local key = os.getenv("BENCH_API_KEY")
if key and key ~= "" then
  wrk.headers["X-API-Key"] = key
end
