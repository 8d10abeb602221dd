local t = redis.call('TIME')
return {tonumber(t[1]), tonumber(t[2])}
