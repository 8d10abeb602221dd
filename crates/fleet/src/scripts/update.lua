local s = redis.call('HMGET', KEYS[1], 'counting', 'generation', 'follows')
if not s[2] then return 0 end
if tonumber(s[1]) ~= tonumber(ARGV[1]) then return -1 end
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'rate', ARGV[2]) end
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[1], 'burst', ARGV[3], 'follows', 0)
elseif ARGV[2] ~= '' and s[3] == '1' then
  redis.call('HSET', KEYS[1], 'burst', ARGV[5])
end
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'paused', ARGV[4]) end
return redis.call('HINCRBY', KEYS[1], 'generation', 1)
