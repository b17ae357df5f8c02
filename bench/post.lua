-- wrk script: every request is a POST of a JSON document of about 100 KB (1,300 orders), as
-- bench/stage.js's `-post` workloads send it; no script of bench/server.js reads it.
--   node bench/server.js quickjs-hooks   (then, with the URL it prints)
--   wrk -t1 -c20 -d5 -s bench/post.lua http://127.0.0.1:PORT/web0/api/bench/p
local orders = {}
for i = 0, 1299 do
  orders[#orders + 1] = string.format('{"id":%d,"sku":"SKU-%d","qty":%d,"note":"deliver to the back door \\"B\\""}', i, 100000 + i, (i % 7) + 1)
end
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"orders":[' .. table.concat(orders, ",") .. ']}'
