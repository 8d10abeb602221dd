redis.call('HSET', KEYS[1], 'rate', ARGV[1], 'burst', ARGV[2], 'paused', 0,
  'counting', ARGV[3], 'follows', ARGV[4])
return redis.call('HINCRBY', KEYS[1], 'generation', 1)
