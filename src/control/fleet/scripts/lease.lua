local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local s = redis.call('HMGET', KEYS[1], 'rate', 'burst', 'paused', 'counting', 'generation', 'follows')
local generation, known = tonumber(s[5]), tonumber(ARGV[10])
if s[5] and not generation then return {-2} end
if not generation or (generation < known and tonumber(s[4]) == tonumber(ARGV[5])) then
  generation = math.max(known, 1)
  redis.call('HSET', KEYS[1], 'rate', ARGV[3], 'burst', ARGV[4], 'paused', ARGV[9],
             'counting', ARGV[5], 'generation', generation, 'follows', ARGV[11])
  s = {ARGV[3], ARGV[4], ARGV[9], ARGV[5], generation, ARGV[11]}
end
local rate, burst, paused = tonumber(s[1]), tonumber(s[2]), tonumber(s[3])
local counting, follows = tonumber(s[4]), tonumber(s[6] or '0')
if not (rate and burst and paused and counting and follows) then return {-2} end
local id = ARGV[1]
local timeout = now - tonumber(ARGV[8])
local gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', timeout)
if #gone > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', timeout)
  redis.call('HDEL', KEYS[5], unpack(gone))
end
redis.call('ZADD', KEYS[3], now, id)
redis.call('HSET', KEYS[5], id, ARGV[12])
local members = redis.call('ZCARD', KEYS[3])
for i = 1, 5 do
  if i ~= 4 then redis.call('PEXPIRE', KEYS[i], ARGV[6]) end
end
local mine, part, left = tonumber(ARGV[12]), tonumber(ARGV[12]), rate
local recent = redis.call('ZRANGEBYSCORE', KEYS[3], now - tonumber(ARGV[13]), '+inf')
local demands = redis.call('HMGET', KEYS[5], unpack(recent))
local sorted = {}
for i, d in ipairs(demands) do sorted[i] = tonumber(d) or 0 end
table.sort(sorted)
for i, d in ipairs(sorted) do
  local even = left / (#sorted - i + 1)
  if d >= even then
    part = math.min(mine, even)
    break
  end
  left = left - d
end
-- Stretches in force: member -> 'slope end slope end', the one running
-- and the one after it; a slope counts until its stretch ends.
local stretches = redis.call('HGETALL', KEYS[2])
local others, own = 0, nil
for i = 1, #stretches, 2 do
  local a, b, c, d = string.match(stretches[i + 1], '^(%d+) (%d+) (%d+) (%d+)$')
  a, b, c, d = tonumber(a) or 0, tonumber(b) or 0, tonumber(c) or 0, tonumber(d) or 0
  if stretches[i] == id then
    own = {a, b, c, d}
  elseif d > now then
    others = others + math.max(b > now and a or 0, c)
  else
    redis.call('HDEL', KEYS[2], stretches[i])
  end
end
local slope = math.floor(math.min(part, rate - others))
local want, granted, lead = tonumber(ARGV[2]), 0, 0
if counting ~= tonumber(ARGV[5]) then
  granted = -1
elseif paused == 1 or want == 0 then
  granted = 0
elseif rate == 0 then
  granted = want
elseif slope >= 1 then
  -- At most a lease's time at the slope: a slope lasts one lease.
  want = math.min(want, math.max(1, math.floor(slope * tonumber(ARGV[14]) / 1000000)))
  local running, ends = 0, 0
  if own and own[4] > now then running, ends = own[3], own[4] end
  local start = math.max(ends, now)
  local cost = math.ceil(want * 1000000 / slope)
  local tau = math.floor(burst * 1000000 / rate)
  lead = start - tau - now
  if lead <= tonumber(ARGV[7]) then
    redis.call('HSET', KEYS[2], id, string.format('%.0f %.0f %.0f %.0f', running, start, slope, start + cost))
    granted = want
  end
end
if granted > 0 then
  redis.call('INCRBY', KEYS[4], granted)
  redis.call('PEXPIRE', KEYS[4], ARGV[6])
end
return {granted, lead, generation, rate, burst, paused, counting, members, math.max(slope, 0), follows}
