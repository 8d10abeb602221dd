local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local s = redis.call('HMGET', KEYS[1], 'rate', 'burst', 'paused', 'counting', 'generation', 'follows',
                     'committed', 'members', 'satisfied', 'satisfied_sum', 'kept')
local generation, known = tonumber(s[5]), tonumber(ARGV[10])
if s[5] and not generation then return {-2} end
if not generation or (generation < known and tonumber(s[4]) == tonumber(ARGV[5])) then
  generation = math.max(known, 1)
  redis.call('HSET', KEYS[1], 'rate', ARGV[3], 'burst', ARGV[4], 'paused', ARGV[9],
             'counting', ARGV[5], 'generation', generation, 'follows', ARGV[11])
  s[1], s[2], s[3], s[4], s[6] = ARGV[3], ARGV[4], ARGV[9], ARGV[5], ARGV[11]
end
local rate, burst, paused = tonumber(s[1]), tonumber(s[2]), tonumber(s[3])
local counting, follows = tonumber(s[4]), tonumber(s[6] or '0')
if not (rate and burst and paused and counting and follows) then return {-2} end
-- What the share adds up, kept as each call changes it: the slopes
-- counted now, and for the fair part, the members and those content
-- with less than an even split (their count and what they want).
local committed = tonumber(s[7]) or 0
local n, satisfied, wanted = tonumber(s[8]) or 0, tonumber(s[9]) or 0, tonumber(s[10]) or 0
-- Forgotten members and slopes ended are set right a few at a time:
-- until then they count, which only ever holds back.
local BATCH = 64
-- A member's record: its demand, whether it is counted as content and as
-- a member, the slope it counts for now, then its stretches not yet
-- ended, each as its slope and its end. They run one after another on
-- the member's own timeline, and any of them may yet run: the member
-- counts for the largest slope among them, which only ever falls.
local function whole(x) return string.format('%.0f', x) end
local function read(id)
  local r = redis.call('HGET', KEYS[2], id)
  local v = {}
  if r then for x in string.gmatch(r, '%d+') do v[#v + 1] = tonumber(x) end end
  if #v < 4 or #v % 2 == 1 then v = {0, 0, 0, 0} end
  return v
end
local function write(id, v)
  local text = {}
  for i = 1, #v do text[i] = whole(v[i]) end
  redis.call('HSET', KEYS[2], id, table.concat(text, ' '))
end
-- Forgets the stretches ended by now, counts the member for the largest
-- slope left, and schedules the next look at the first end.
local function recount(id, v)
  local kept, most, first = {v[1], v[2], v[3], v[4]}, 0, nil
  for i = 5, #v - 1, 2 do
    if v[i + 1] > now then
      kept[#kept + 1] = v[i]
      kept[#kept + 1] = v[i + 1]
      most = math.max(most, v[i])
      if not first or v[i + 1] < first then first = v[i + 1] end
    end
  end
  committed = committed + most - v[4]
  kept[4] = most
  if first then redis.call('ZADD', KEYS[4], whole(first), id) else redis.call('ZREM', KEYS[4], id) end
  return kept
end
local function unclaim(v)
  if v[3] == 1 then
    n = n - 1
    if v[2] == 1 then satisfied, wanted = satisfied - 1, wanted - v[1] end
  end
  v[2], v[3] = 0, 0
end
local id = ARGV[1]
for _, other in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, BATCH)) do
  local v = recount(other, read(other))
  if v[3] == 0 and v[4] == 0 then redis.call('HDEL', KEYS[2], other) else write(other, v) end
end
local gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, BATCH)
for _, other in ipairs(gone) do
  local v = read(other)
  unclaim(v)
  if v[4] == 0 then redis.call('HDEL', KEYS[2], other) else write(other, v) end
end
if #gone > 0 then redis.call('ZREM', KEYS[3], unpack(gone)) end
if redis.call('ZCARD', KEYS[3]) == 0 then n, satisfied, wanted = 0, 0, 0 end
-- The schedule also holds a mark that never comes due, so that it always
-- exists and its expiry is set with the others'.
if redis.call('ZCOUNT', KEYS[4], '-inf', '(inf') == 0 then committed = 0 end
wanted = math.max(0, wanted)
-- The caller's own record, as this call leaves it.
local v = read(id)
if not redis.call('ZSCORE', KEYS[3], id) then v[2], v[3] = 0, 0 end
if not redis.call('ZSCORE', KEYS[4], id) then v[4] = 0 end
v = recount(id, v)
unclaim(v)
n = n + 1
v[3] = 1
-- A lease lasts longer as members are more, so that the share sees about
-- the same number of calls a second whatever its size.
local lease_us = math.max(tonumber(ARGV[15]), n * tonumber(ARGV[13]))
local lasting = math.max(tonumber(ARGV[14]), lease_us)
redis.call('ZADD', KEYS[3], whole(now + 2 * lasting + tonumber(ARGV[8])), id)
-- Max-min fair: members that want less than an even split of what the
-- others leave get what they want; the rest split it evenly. With leases
-- over a second, a little of the rate is kept out of the parts, so that
-- a member that joins finds its part free at once.
local reserve = 0
if lease_us > 1000000 then reserve = math.min(0.01, 2 / n) end
local shared = rate * (1 - reserve)
local demand = tonumber(ARGV[12])
v[1] = demand
if demand < (shared - wanted) / (n - satisfied) then
  v[2], satisfied, wanted = 1, satisfied + 1, wanted + demand
end
local part = demand
if n > satisfied then part = math.min(demand, math.max(0, (shared - wanted) / (n - satisfied))) end
local others = committed - v[4]
local slope = math.floor(math.min(part, rate - others))
local want, granted, lead = tonumber(ARGV[2]), 0, 0
if counting ~= tonumber(ARGV[5]) then
  granted = -1
elseif paused == 1 or want == 0 then
  granted = 0
elseif rate == 0 then
  granted = want
elseif slope >= 1 then
  -- At most a lease's time at the slope: a slope lasts one lease. Short
  -- of its part, a member is given a short stretch, and asks again soon.
  local stretch = lasting
  if slope < part * 0.95 then stretch = math.min(lasting, math.max(tonumber(ARGV[15]), math.min(lasting / 10, 1000000))) end
  want = math.min(want, math.max(1, math.floor(slope * stretch / 1000000)))
  local start = now
  if #v > 4 then start = math.max(now, v[#v]) end
  local cost = math.ceil(want * 1000000 / slope)
  local tau = math.floor(burst * 1000000 / rate)
  lead = start - tau - now
  if lead <= math.max(tonumber(ARGV[7]), 2 * lasting) then
    v[#v + 1] = slope
    v[#v + 1] = start + cost
    v = recount(id, v)
    granted = want
  end
end
write(id, v)
redis.call('HSET', KEYS[1], 'committed', whole(committed), 'members', n, 'satisfied', satisfied,
           'satisfied_sum', whole(wanted))
if granted > 0 then redis.call('HINCRBY', KEYS[1], 'granted', granted) end
-- The share's keys outlive their last use by a day; renewed twice a day.
local keep = tonumber(ARGV[6])
if (tonumber(s[11]) or 0) < now + keep * 500 then
  redis.call('ZADD', KEYS[4], 'inf', '-')
  for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], keep) end
  redis.call('HSET', KEYS[1], 'kept', whole(now + keep * 1000))
end
return {granted, lead, generation, rate, burst, paused, counting, n, math.max(slope, 0), follows,
        math.floor(part), lease_us}
