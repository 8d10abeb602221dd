complete -c shape -s r -s L -l rate -d 'Bytes (or records) a second, or \'unlimited\'' -r
complete -c shape -s b -l burst -d 'The bucket\'s depth: the most that may pass at once after a pause' -r
complete -c shape -s s -l size -d 'The expected total, for the percentage and ETA' -r
complete -c shape -l stop-after -d 'Forward at most SIZE bytes (or records), then exit successfully' -r
complete -c shape -l progress -d 'How progress is shown on standard error' -r -f -a "auto\t'A bar when standard error is a terminal, otherwise nothing'
bar\t'A progress bar'
json\t'One JSON object per line per interval'
numeric\t'One number per line per interval: the percentage done when the total is known, else the count, as pv -n prints them for `dialog --gauge`'
none\t'Nothing'"
complete -c shape -s i -l interval -d 'How often progress is shown' -r
complete -c shape -s N -l name -d 'Name the bar, as pv -N does: \'NAME: \' before it' -r
complete -c shape -l rate-file -d 'Read the rate (and burst) from FILE, and again on SIGHUP' -r -F
complete -c shape -l schedule -d 'Follow a timetable of rates' -r
complete -c shape -l listen -d 'Read from a connection on ADDR (with --connect: be a proxy)' -r
complete -c shape -l exec -d 'Run COMMAND with its own traffic shaped, children included' -r -f -a "(__fish_complete_command)"
complete -c shape -l serve -d 'Serve toxiproxy\'s HTTP API, as a drop-in toxiproxy server' -r
complete -c shape -l config -d 'With --serve: the proxies of FILE, made at start' -r -F
complete -c shape -l serve-allow-origin -d 'With --serve: let a browser UI from ORIGIN drive the API' -r
complete -c shape -l rate-up -d 'Proxy, --exec: the rate of what clients send (default --rate)' -r
complete -c shape -l rate-down -d 'Proxy, --exec: the rate of what clients get (default --rate)' -r
complete -c shape -l loops -d 'Proxy or --serve: event loops, a thread each (default: one per core)' -r
complete -c shape -l connect -d 'Write to a connection to ADDR' -r
complete -c shape -l connect-timeout -d 'How long --connect keeps trying each address (default 10s)' -r
complete -c shape -l delay -d 'Hold every byte this long: a slow link' -r
complete -c shape -l delay-up -d 'Proxy, UDP link or --exec: the delay from clients to the server (default: --delay)' -r
complete -c shape -l delay-down -d 'Proxy, UDP link or --exec: the delay from the server to clients (default: --delay)' -r
complete -c shape -l link -d 'A known link by name: \'slow-3g\', \'cable\', \'lte\'...; \'list\' shows them' -r
complete -c shape -l trace -d 'Pipe: follow a recorded link (Mahimahi\'s trace format)' -r
complete -c shape -l trace-up -d 'Proxy, UDP link or --exec: follow a recorded link from clients to the server (as --trace)' -r
complete -c shape -l trace-down -d 'Proxy, UDP link or --exec: follow a recorded link from the server to clients (as --trace)' -r
complete -c shape -l jitter -d 'With --delay: vary it by up to this much' -r
complete -c shape -l max-buffer -d 'The most a slow link holds at once' -r
complete -c shape -l slice -d 'Write in pieces of about SIZE bytes' -r
complete -c shape -l slice-pause -d 'With --slice: the pause between two pieces' -r
complete -c shape -l loss -d 'Lose packets with probability PROB: TCP sends them again' -r
complete -c shape -l drop -d 'Delete blocks of a stream with probability PROB' -r
complete -c shape -l corrupt -d 'Flip a bit of bytes with probability PROB' -r
complete -c shape -l cut-after -d 'Forward exactly SIZE bytes, then close' -r
complete -c shape -l slow-close -d 'Hold the close this long after the end of the data' -r
complete -c shape -l stall-after -d 'After that much, forward nothing but stay open' -r
complete -c shape -l reset-after -d 'After that much, reset (status 3)' -r
complete -c shape -l duplicate -d 'UDP: send this share of datagrams twice' -r
complete -c shape -l reorder -d 'UDP: send this share of datagrams at once, skipping the delay' -r
complete -c shape -l mtu -d 'UDP: drop datagrams over SIZE bytes, or cut them (SIZE:cut)' -r
complete -c shape -l udp-idle -d 'UDP: forget a flow idle this long (default 120s)' -r
complete -c shape -l queue-drop -d 'UDP: what full queues drop (default tail)' -r -f -a "tail\t'The one that arrives, as a router does'
head\t'The oldest waiting'"
complete -c shape -l http-status -d 'HTTP: answer picked requests with this status, and this body' -r
complete -c shape -l http-header -d 'HTTP: a header of --http-status\'s answer (repeatable)' -r
complete -c shape -l http-delay -d 'HTTP: hold picked requests this long before they go on' -r
complete -c shape -l http-cut-after -d 'HTTP: cut the answers to picked requests after SIZE of their body' -r
complete -c shape -l grpc-status -d 'gRPC: answer picked calls with this status, trailers only' -r
complete -c shape -l first -d 'HTTP: pick only the first N requests that match' -r
complete -c shape -l every -d 'HTTP: pick only every Nth request that matches' -r
complete -c shape -l path -d 'HTTP: only requests whose path matches GLOB' -r
complete -c shape -l method -d 'HTTP: only requests of this method (any case)' -r
complete -c shape -l header -d 'HTTP: only requests with this header, and this value if given' -r
complete -c shape -l during -d 'HTTP: only requests that come within this window after the start' -r
complete -c shape -l affect -d 'Proxy: do the faults to this fraction of connections' -r
complete -c shape -l seed -d 'The seed of every random draw, to replay them' -r
complete -c shape -l remote -d 'Change a running shape, or a share, instead of copying' -r
complete -c shape -l share -d 'Spend from one limit with every shape on the share' -r
complete -c shape -l share-fallback -d 'What a fleet\'s share does while Redis cannot be reached' -r -f -a "last\t'Go on at the last known rate per shape (this shape\'s part of the share\'s rate, as Redis last gave it)'
block\t'Hold the data until Redis is back'
open\t'Go on without a limit until Redis is back'"
complete -c shape -l generate -d 'Print the man page or a shell completion script, and exit' -r -f -a "man\t''
bash\t''
zsh\t''
fish\t''
elvish\t''
powershell\t''
toxics\t'GUIDE.md\'s table of `--serve`\'s toxics, from the one table of them'
links\t'GUIDE.md\'s table of known links (`--link`), from the one table of them'"
complete -c shape -s l -l lines -d 'Count lines instead of bytes'
complete -c shape -s 0 -l null -d 'Count NUL-terminated records instead of bytes'
complete -c shape -s q -l quiet -d 'Print nothing on standard error but errors (no progress, no stats)'
complete -c shape -l stats -d 'Print a summary line at the end'
complete -c shape -s n -l numeric -d 'Print numbers, as pv -n does'
complete -c shape -s p -d 'pv\'s switches that pick the bar\'s parts, taken as pv takes them: -p the bar and percentage (with a known size), -t the time, -e the ETA, -a the average rate; given any, the bar shows the count and the rate, then those. (pv\'s -r and -b are shape\'s --rate and --burst: its bar always shows the rate and count.)'
complete -c shape -s t
complete -c shape -s e
complete -c shape -s a
complete -c shape -s W -l wait -d 'Show the bar only once the first byte has passed, as pv -W does'
complete -c shape -s f -l force -d 'Draw the bar even where standard error is no terminal, as pv -f does (the same as --progress bar)'
complete -c shape -l serve-allow-unix -d 'With --serve: let proxies use Unix sockets'
complete -c shape -l runtime-metrics -d 'With --serve: the process\'s metrics in /metrics too'
complete -c shape -l per-connection -d 'Proxy: limits of each connection\'s own, not shared'
complete -c shape -l packets -d 'UDP: count datagrams, not bytes'
complete -c shape -l jitter-keeps-order -d 'UDP: jitter never lets a datagram overtake an earlier one'
complete -c shape -l http-stall -d 'HTTP: never answer picked requests; the connection stays open'
complete -c shape -l http-reset -d 'HTTP: reset the connection of picked requests, in their turn'
complete -c shape -l status -d 'With --share: print the share\'s settings and current use, and exit'
complete -c shape -l reset -d 'With --share: remove the share, to start it afresh'
complete -c shape -l pause -d 'With --remote: hold the data; nothing flows until --resume'
complete -c shape -l resume -d 'With --remote: let data flow again'
complete -c shape -s h -l help -d 'Print help (see more with \'--help\')'
complete -c shape -s V -l version -d 'Print version'
