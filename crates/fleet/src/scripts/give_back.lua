local unused = tonumber(ARGV[1])
if unused > 0 then redis.call('HINCRBY', KEYS[1], 'granted', -unused) end
local s = redis.call('HMGET', KEYS[1], 'committed', 'members', 'satisfied', 'satisfied_sum', 'epoch')
local r = redis.call('HGET', KEYS[2], ARGV[2])
local v = {}
if r then for x in string.gmatch(r, '%d+') do v[#v + 1] = tonumber(x) end end
if #v >= 6 and v[5] == tonumber(s[5]) then
  local committed, n = tonumber(s[1]) or 0, tonumber(s[2]) or 0
  local satisfied, wanted = tonumber(s[3]) or 0, tonumber(s[4]) or 0
  committed = committed - v[4]
  if v[3] == 1 then
    n = n - 1
    if v[2] == 1 then satisfied, wanted = satisfied - 1, wanted - v[1] end
  end
  redis.call('HSET', KEYS[1], 'committed', string.format('%.0f', math.max(0, committed)),
             'members', math.max(0, n), 'satisfied', math.max(0, satisfied),
             'satisfied_sum', string.format('%.0f', math.max(0, wanted)))
end
redis.call('HDEL', KEYS[2], ARGV[2])
redis.call('ZREM', KEYS[3], ARGV[2])
redis.call('ZREM', KEYS[4], ARGV[2])
return 1
