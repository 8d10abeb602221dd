local t = redis.call('TIME')
-- Whole, as text: a number handed to redis.call is written with 14 digits.
local now = string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2]))
return redis.call('ZCOUNT', KEYS[1], now, '+inf')
