local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local unused = tonumber(ARGV[1])
if unused > 0 then redis.call('DECRBY', KEYS[4], unused) end
redis.call('HDEL', KEYS[2], ARGV[2])
redis.call('ZREM', KEYS[3], ARGV[2])
redis.call('HDEL', KEYS[5], ARGV[2])
return 1
