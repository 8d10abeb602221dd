complete -c shape -s r -s L -l rate -d 'Bytes (or with --lines, --null: records) per second, or \'unlimited\' (the default: shape is then a progress pipe)' -r
complete -c shape -s b -l burst -d 'The bucket\'s depth: the most that may pass at once after a pause' -r
complete -c shape -s s -l size -d 'The expected total, for the percentage and ETA when reading standard input (the size of files is known; records are not counted ahead)' -r
complete -c shape -l stop-after -d 'Forward at most SIZE bytes (or records), then exit successfully' -r
complete -c shape -l progress -d 'How to show progress on standard error. It never touches standard output and never slows the copy' -r -f -a "auto\t'A bar when standard error is a terminal, otherwise nothing'
bar\t'A progress bar'
json\t'One JSON object per line per interval'
none\t'Nothing'"
complete -c shape -s i -l interval -d 'How often progress is shown: \'500ms\', \'2s\', or plain seconds (\'0.5\'). Defaults to 1s for json and 0.1s for the bar' -r
complete -c shape -l rate-file -d 'Read the rate (and optionally the burst) from FILE: \'RATE [BURST]\' on its first line that is not a \'#\' comment. Read at start and again on SIGHUP; a bad file then leaves the settings as they were' -r -F
complete -c shape -l schedule -d 'Follow a timetable of rates from the start of the transfer, e.g. "0s=1MiB, 30s=10MiB, 2m=unlimited" (humantime offsets, increasing)' -r
complete -c shape -l listen -d 'Read from one connection accepted on ADDR instead of standard input: host:port, :port (every interface), [::1]:port or unix:PATH; port 0 takes any free port. shape says where it listens on standard error (\'shape: listening on 127.0.0.1:41234\'), accepts one connection, reads it to its end, and exits. With --connect too, shape is a proxy: every connection accepted is forwarded to the --connect address, both directions shaped' -r
complete -c shape -l serve -d 'Serve toxiproxy\'s HTTP API on ADDR (default localhost:8474), as a drop-in toxiproxy server: proxies are created, changed and given toxics over HTTP, each with its own listener, all on one event loop. --seed makes every random draw reproducible. Runs until SIGINT or SIGTERM' -r
complete -c shape -l config -d 'With --serve: create the proxies of FILE at start, in toxiproxy\'s config format (a JSON list of proxies, as POST /populate takes)' -r -F
complete -c shape -l serve-allow-origin -d 'With --serve: let a browser UI served from ORIGIN (e.g. http://localhost:3000) drive the API, with the CORS headers it needs. Without it, requests from browsers and other sites are refused (403), so that no web page can drive the API. Repeatable' -r
complete -c shape -l rate-up -d 'Proxy: the rate from clients to the server (default: --rate)' -r
complete -c shape -l rate-down -d 'Proxy: the rate from the server to clients (default: --rate)' -r
complete -c shape -l connect -d 'Write to a connection to ADDR instead of standard output (forms as for --listen; :port is this machine). At the end of the input shape shuts down its sending side and waits for the peer to close, so nothing is cut off' -r
complete -c shape -l connect-timeout -d 'How long --connect keeps trying each address (default 10s)' -r
complete -c shape -l delay -d 'Hold every byte for DURATION before it leaves, like a link with that one-way latency: \'100ms\', \'1.5s\', up to 1h. In proxy mode each direction is delayed, so a round trip takes twice as long' -r
complete -c shape -l jitter -d 'Vary the delay of each chunk at random, evenly within DURATION either way (never below zero). Byte order is kept: a chunk that would overtake the one before it leaves right after that one' -r
complete -c shape -l max-buffer -d 'The most shape holds at once (in proxy mode, per direction of each connection); while it is full, shape stops reading. Defaults to what flows at the rate during the delay and jitter, plus the burst: from 1 MiB to 64 MiB, and 64 MiB when unlimited. Without --delay, shape holds one chunk of at most SIZE' -r
complete -c shape -l slice -d 'Cut every write into pieces of about SIZE bytes (each within SIZE ± VARIATION), each written on its own, as a slow or fragmenting server would send them: \'7\', \'1KiB:512\'. Every fault flag takes \'off\', and in a proxy \'up:\' or \'down:\' before its value for one direction: \'down:7\'' -r
complete -c shape -l slice-pause -d 'With --slice: the pause between two pieces' -r
complete -c shape -l drop -d 'Lose each block of the stream (1 KiB, or 2.5 ms of data at the starting rate if that is less) with probability PROB, \'0.01\' or \'1%\': for tests of checksums and framing. The blocks and bytes lost are said at the end' -r
complete -c shape -l corrupt -d 'Flip one random bit of each byte with probability PROB. The bytes touched are said at the end' -r
complete -c shape -l cut-after -d 'Forward exactly SIZE bytes, then close cleanly, as a server that cuts a response short' -r
complete -c shape -l slow-close -d 'Hold the close this long after the end of the data' -r
complete -c shape -l stall-after -d 'After that much data or time, forward nothing more but keep the output open, as a server that stops answering: a size (\'1KiB\') or a time (\'2s\', \'1min\')' -r
complete -c shape -l reset-after -d 'After that much data or time, reset: a socket is closed with a reset (RST), and shape ends with status 3' -r
complete -c shape -l affect -d 'Proxy: do the faults to this fraction of connections only (PROB, \'0.5\' or \'50%\'), the others passing clean; which ones is drawn from the seed' -r
complete -c shape -l seed -d 'Seed every random choice (jitter, slices, drops, corruption, the connections affected), so that a run can be replayed. Without it a seed is drawn; --stats says which, and a proxy with faults or jitter says it at start' -r
complete -c shape -l remote -d 'Change the running shape PID (of this user), or every shape on a share (share:NAME), instead of copying: with --rate, --burst, --pause or --resume; for a PID also --delay, --jitter and the fault flags (\'off\' turns a fault off). Prints the settings now in force; for a PID, after the shape has acknowledged, with its delay and faults. With nothing to change it only asks, and a PID also says what has passed so far' -r
complete -c shape -l share -d 'Spend from the bucket of share NAME, with every shape of this user that names it: the limit is their total. The first creates it with its --rate and --burst; while any shape is on it, later ones use the share\'s settings (and say so if theirs differ). A share on a fleet of machines lives in Redis: redis://[user[:password]@]host[:port][/db]/NAME, rediss://... over TLS (SHAPE_REDIS_CA_FILE, SHAPE_REDIS_CERT_FILE and SHAPE_REDIS_KEY_FILE name certificates), or redis+unix:///path/to/redis.sock/NAME; the password may also come from SHAPE_REDIS_PASSWORD. Any node of a Redis Cluster will do' -r
complete -c shape -l share-fallback -d 'What spending from a share in Redis does while Redis cannot be reached: go on at the last known rate per shape, hold the data, or go on without a limit. It is said once, and when Redis is back' -r -f -a "last\t'Go on at the last known rate per shape (this shape\'s part of the share\'s rate, as Redis last gave it)'
block\t'Hold the data until Redis is back'
open\t'Go on without a limit until Redis is back'"
complete -c shape -l generate -d 'Print the man page or a shell completion script, and exit' -r -f -a "man\t''
bash\t''
zsh\t''
fish\t''
elvish\t''
powershell\t''
toxics\t'README\'s table of `--serve`\'s toxics, from the one table of them'"
complete -c shape -s l -l lines -d 'Count lines instead of bytes: the rate, burst, sizes, progress and stats are in lines, and a line leaves whole, once paid for'
complete -c shape -s 0 -l null -d 'Count records ending in a NUL byte (as find -print0 writes them) instead of bytes, as --lines counts lines'
complete -c shape -s q -l quiet -d 'Print nothing on standard error but errors (no progress, no stats)'
complete -c shape -l stats -d 'Print a one-line summary on standard error at the end: bytes, elapsed time, the average rate since the start, and the limit and burst (a full bucket at the start lifts a short run\'s average above the limit)'
complete -c shape -l serve-allow-unix -d 'With --serve: let proxies listen on or forward to unix:PATH sockets (a shape extension; toxiproxy has none). Off by default, so that the API cannot expose a local socket, such as Docker\'s, on the network'
complete -c shape -l runtime-metrics -d 'With --serve: /metrics gives the process\'s own metrics too (the standard process_* ones: CPU seconds, memory, descriptors, start time), as toxiproxy\'s -runtime-metrics does, without its go_* ones'
complete -c shape -l per-connection -d 'Proxy: give each connection its own limits instead of all sharing one per direction'
complete -c shape -l status -d 'With --share: print the share\'s settings and current use, and exit'
complete -c shape -l reset -d 'With --share: remove the share\'s file, whatever it holds (a corrupt or foreign one too), so that the next shape on it creates it afresh; refused while a running shape is on it. Then exit'
complete -c shape -l pause -d 'With --remote: hold the data; nothing flows until --resume'
complete -c shape -l resume -d 'With --remote: let data flow again, with no catch-up beyond the burst'
complete -c shape -s h -l help -d 'Print help (see more with \'--help\')'
complete -c shape -s V -l version -d 'Print version'
