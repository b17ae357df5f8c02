-- wrk script: requests rotate over <count> paths <prefix><n><suffix>, n = 0 .. count - 1.
--   wrk -s bench/rotate.lua http://127.0.0.1:PORT -- /web0/api/t 1000 /p
local requests = {}
local i = 0

function init(args)
  local prefix, count, suffix = args[1], tonumber(args[2]), args[3]
  for n = 0, count - 1 do
    requests[n + 1] = wrk.format("GET", prefix .. n .. suffix)
  end
end

function request()
  i = i % #requests + 1
  return requests[i]
end
