local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local s = redis.call('HMGET', KEYS[1], 'rate', 'burst', 'paused', 'counting', 'generation', 'follows',
                     'committed', 'members', 'satisfied', 'satisfied_sum', 'granted', 'kept', 'epoch')
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
local function whole(x) return string.format('%.0f', x) end
-- What the share adds up, kept as each call changes it: the slopes
-- counted now; the members, and those content with less than an even
-- split (their count and what they want); the tokens leased in all.
local committed = math.max(0, tonumber(s[7]) or 0)
local n, satisfied = math.max(0, tonumber(s[8]) or 0), math.max(0, tonumber(s[9]) or 0)
local wanted, leased = math.max(0, tonumber(s[10]) or 0), tonumber(s[11]) or 0
-- Records of an earlier life of the share (its sums lost, its records
-- not) count for nothing.
local epoch = tonumber(s[13])
if not epoch then
  epoch = now
  redis.call('HSET', KEYS[1], 'epoch', whole(epoch))
  committed, n, satisfied, wanted = 0, 0, 0, 0
end
-- A member's record: its demand, whether it is counted as content and as
-- a member, the slope it counts for now, the share's epoch, the number of
-- its last call run, then its stretches not yet ended, each as its slope,
-- its end, the number of the call that granted it and its tokens. They
-- run one after another on the member's own timeline, and any of them may
-- yet run: the member counts for the largest slope among them, which only
-- ever falls.
local HEAD, EACH = 6, 4
local function read(id)
  local r = redis.call('HGET', KEYS[2], id)
  local v = {}
  if r then for x in string.gmatch(r, '%d+') do v[#v + 1] = tonumber(x) end end
  if #v < HEAD or (#v - HEAD) % EACH ~= 0 or v[5] ~= epoch then v = {0, 0, 0, 0, epoch, 0} end
  return v
end
-- The record with only the stretches that `keep` keeps (given each
-- stretch's first index), counted for the largest slope among them;
-- and the first end left.
local function only(v, keep)
  local kept, most, first = {v[1], v[2], v[3], v[4], v[5], v[6]}, 0, nil
  for i = HEAD + 1, #v - EACH + 1, EACH do
    if keep(i) then
      for j = 0, EACH - 1 do kept[#kept + 1] = v[i + j] end
      most = math.max(most, v[i])
      if not first or v[i + 1] < first then first = v[i + 1] end
    end
  end
  committed = committed + most - v[4]
  kept[4] = most
  return kept, first
end
-- Forgets the stretches ended by now.
local function recount(v)
  return only(v, function(i) return v[i + 1] > now end)
end
-- Writes the record, or drops it once it neither is a member nor counts,
-- and schedules the next look at it for its first end.
local function save(id, v, first)
  if first then redis.call('ZADD', KEYS[4], whole(first), id) else redis.call('ZREM', KEYS[4], id) end
  if v[3] == 0 and v[4] == 0 then redis.call('HDEL', KEYS[2], id); return end
  local text = {}
  for i = 1, #v do text[i] = whole(v[i]) end
  redis.call('HSET', KEYS[2], id, table.concat(text, ' '))
end
local function unclaim(v)
  if v[3] == 1 then
    n = n - 1
    if v[2] == 1 then satisfied, wanted = satisfied - 1, wanted - v[1] end
  end
  v[2], v[3] = 0, 0
end
-- A call that a member gave up waiting for (Redis hung, and runs it on
-- waking) is not heard: one run after a later one changes nothing, and a
-- later one drops what it granted, which the member never knew of. Kept,
-- a stretch it never spends would hold the member's next lease back by
-- its length: up to a lease time, 5 s on a share of 1,000.
local id, call, heard = ARGV[1], tonumber(ARGV[16]), tonumber(ARGV[17])
local mine = read(id)
if call <= mine[6] then
  return {0, 0, generation, rate, burst, paused, counting, math.max(n, 1), 0, follows, 0,
          math.max(tonumber(ARGV[15]), n * tonumber(ARGV[13]))}
end
-- Slopes ended and forgotten members are set right a few at a time:
-- until then they count, which only ever holds back. The caller is set
-- right below, from the record already read.
local BATCH = 64
for _, other in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, BATCH)) do
  if other ~= id then
    local v, first = recount(read(other))
    save(other, v, first)
  end
end
local gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, BATCH)
for _, other in ipairs(gone) do
  if other ~= id then
    local v, first = recount(read(other))
    unclaim(v)
    save(other, v, first)
  end
end
if #gone > 0 then redis.call('ZREM', KEYS[3], unpack(gone)) end
-- The caller, as this call leaves it, but for what it did not hear.
local v, first = recount(mine)
v, first = only(v, function(i)
  if v[i + 2] <= heard then return true end
  leased = leased - v[i + 3]
  return false
end)
v[6] = call
unclaim(v)
n, satisfied, wanted = n + 1, math.max(0, satisfied), math.max(0, wanted)
v[3] = 1
-- A lease lasts longer as members are more, so that the share sees about
-- the same number of calls a second whatever its size.
local least = tonumber(ARGV[15])
local lease_us = math.max(least, n * tonumber(ARGV[13]))
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
local slope = math.floor(math.min(part, rate - (committed - v[4])))
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
  if slope < part * 0.95 then stretch = math.min(lasting, math.max(least, math.min(lasting / 10, 1000000))) end
  want = math.min(want, math.max(1, math.floor(slope * stretch / 1000000)))
  local start = now
  if #v > HEAD then start = math.max(now, v[#v - EACH + 2]) end
  local cost = math.ceil(want * 1000000 / slope)
  local tau = math.floor(burst * 1000000 / rate)
  lead = start - tau - now
  if lead <= math.max(tonumber(ARGV[7]), 2 * lasting) then
    for _, x in ipairs({slope, start + cost, call, want}) do v[#v + 1] = x end
    v, first = recount(v)
    granted = want
  end
end
save(id, v, first)
leased = leased + math.max(granted, 0)
redis.call('HSET', KEYS[1], 'committed', whole(committed), 'members', n, 'satisfied', satisfied,
           'satisfied_sum', whole(wanted), 'granted', whole(leased))
-- The share's keys outlive their last use by a day; renewed twice a day.
-- The schedule holds a mark that never comes due, so that it exists to
-- be renewed with the others.
local keep = tonumber(ARGV[6])
if (tonumber(s[12]) or 0) < now + keep * 500 then
  redis.call('ZADD', KEYS[4], 'inf', '-')
  for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], keep) end
  redis.call('HSET', KEYS[1], 'kept', whole(now + keep * 1000))
end
return {granted, lead, generation, rate, burst, paused, counting, n, math.max(slope, 0), follows,
        math.floor(part), lease_us}
