
use builtin;
use str;

set edit:completion:arg-completer[shape] = {|@words|
    fn spaces {|n|
        builtin:repeat $n ' ' | str:join ''
    }
    fn cand {|text desc|
        edit:complex-candidate $text &display=$text' '(spaces (- 14 (wcswidth $text)))$desc
    }
    var command = 'shape'
    for word $words[1..-1] {
        if (str:has-prefix $word '-') {
            break
        }
        set command = $command';'$word
    }
    var completions = [
        &'shape'= {
            cand -r 'Bytes (or with --lines, --null: records) per second, or ''unlimited'' (the default: shape is then a progress pipe)'
            cand -L 'Bytes (or with --lines, --null: records) per second, or ''unlimited'' (the default: shape is then a progress pipe)'
            cand --rate 'Bytes (or with --lines, --null: records) per second, or ''unlimited'' (the default: shape is then a progress pipe)'
            cand -b 'The bucket''s depth: the most that may pass at once after a pause'
            cand --burst 'The bucket''s depth: the most that may pass at once after a pause'
            cand -s 'The expected total, for the percentage and ETA when reading standard input (the size of files is known; records are not counted ahead)'
            cand --size 'The expected total, for the percentage and ETA when reading standard input (the size of files is known; records are not counted ahead)'
            cand --stop-after 'Forward at most SIZE bytes (or records), then exit successfully'
            cand --progress 'How to show progress on standard error. It never touches standard output and never slows the copy'
            cand -i 'How often progress is shown: ''500ms'', ''2s'', or plain seconds (''0.5''). Defaults to 1s for json and 0.1s for the bar'
            cand --interval 'How often progress is shown: ''500ms'', ''2s'', or plain seconds (''0.5''). Defaults to 1s for json and 0.1s for the bar'
            cand --rate-file 'Read the rate (and optionally the burst) from FILE: ''RATE [BURST]'' on its first line that is not a ''#'' comment. Read at start and again on SIGHUP; a bad file then leaves the settings as they were'
            cand --schedule 'Follow a timetable of rates from the start of the transfer, e.g. "0s=1MiB, 30s=10MiB, 2m=unlimited" (humantime offsets, increasing)'
            cand --listen 'Read from one connection accepted on ADDR instead of standard input: host:port, :port (every interface), [::1]:port or unix:PATH; port 0 takes any free port. shape says where it listens on standard error (''shape: listening on 127.0.0.1:41234''), accepts one connection, reads it to its end, and exits. With --connect too, shape is a proxy: every connection accepted is forwarded to the --connect address, both directions shaped'
            cand --serve 'Serve toxiproxy''s HTTP API on ADDR (default localhost:8474), as a drop-in toxiproxy server: proxies are created, changed and given toxics over HTTP, each with its own listener, all on one event loop. --seed makes every random draw reproducible. Runs until SIGINT or SIGTERM'
            cand --config 'With --serve: create the proxies of FILE at start, in toxiproxy''s config format (a JSON list of proxies, as POST /populate takes)'
            cand --serve-allow-origin 'With --serve: let a browser UI served from ORIGIN (e.g. http://localhost:3000) drive the API, with the CORS headers it needs. Without it, requests from browsers and other sites are refused (403), so that no web page can drive the API. Repeatable'
            cand --rate-up 'Proxy: the rate from clients to the server (default: --rate)'
            cand --rate-down 'Proxy: the rate from the server to clients (default: --rate)'
            cand --connect 'Write to a connection to ADDR instead of standard output (forms as for --listen; :port is this machine). At the end of the input shape shuts down its sending side and waits for the peer to close, so nothing is cut off'
            cand --connect-timeout 'How long --connect keeps trying each address (default 10s)'
            cand --delay 'Hold every byte for DURATION before it leaves, like a link with that one-way latency: ''100ms'', ''1.5s'', up to 1h. In proxy mode each direction is delayed, so a round trip takes twice as long'
            cand --jitter 'Vary the delay of each chunk at random, evenly within DURATION either way (never below zero). Byte order is kept: a chunk that would overtake the one before it leaves right after that one'
            cand --max-buffer 'The most shape holds at once (in proxy mode, per direction of each connection); while it is full, shape stops reading. Defaults to what flows at the rate during the delay and jitter, plus the burst: from 1 MiB to 64 MiB, and 64 MiB when unlimited. Without --delay, shape holds one chunk of at most SIZE'
            cand --slice 'Cut every write into pieces of about SIZE bytes (each within SIZE ± VARIATION), each written on its own, as a slow or fragmenting server would send them: ''7'', ''1KiB:512''. Every fault flag takes ''off'', and in a proxy ''up:'' or ''down:'' before its value for one direction: ''down:7'''
            cand --slice-pause 'With --slice: the pause between two pieces'
            cand --drop 'Lose each block of the stream (1 KiB, or 2.5 ms of data at the starting rate if that is less) with probability PROB, ''0.01'' or ''1%'': for tests of checksums and framing. The blocks and bytes lost are said at the end'
            cand --corrupt 'Flip one random bit of each byte with probability PROB. The bytes touched are said at the end'
            cand --cut-after 'Forward exactly SIZE bytes, then close cleanly, as a server that cuts a response short'
            cand --slow-close 'Hold the close this long after the end of the data'
            cand --stall-after 'After that much data or time, forward nothing more but keep the output open, as a server that stops answering: a size (''1KiB'') or a time (''2s'', ''1min'')'
            cand --reset-after 'After that much data or time, reset: a socket is closed with a reset (RST), and shape ends with status 3'
            cand --affect 'Proxy: do the faults to this fraction of connections only (PROB, ''0.5'' or ''50%''), the others passing clean; which ones is drawn from the seed'
            cand --seed 'Seed every random choice (jitter, slices, drops, corruption, the connections affected), so that a run can be replayed. Without it a seed is drawn; --stats says which, and a proxy with faults or jitter says it at start'
            cand --remote 'Change the running shape PID (of this user), or every shape on a share (share:NAME), instead of copying: with --rate, --burst, --pause or --resume; for a PID also --delay, --jitter and the fault flags (''off'' turns a fault off). Prints the settings now in force; for a PID, after the shape has acknowledged, with its delay and faults. With nothing to change it only asks, and a PID also says what has passed so far'
            cand --share 'Spend from the bucket of share NAME, with every shape of this user that names it: the limit is their total. The first creates it with its --rate and --burst; while any shape is on it, later ones use the share''s settings (and say so if theirs differ). A share on a fleet of machines lives in Redis: redis://[user[:password]@]host[:port][/db]/NAME, rediss://... over TLS (SHAPE_REDIS_CA_FILE, SHAPE_REDIS_CERT_FILE and SHAPE_REDIS_KEY_FILE name certificates), or redis+unix:///path/to/redis.sock/NAME; the password may also come from SHAPE_REDIS_PASSWORD. Any node of a Redis Cluster will do'
            cand --share-fallback 'What spending from a share in Redis does while Redis cannot be reached: go on at the last known rate per shape, hold the data, or go on without a limit. It is said once, and when Redis is back'
            cand --generate 'Print the man page or a shell completion script, and exit'
            cand -l 'Count lines instead of bytes: the rate, burst, sizes, progress and stats are in lines, and a line leaves whole, once paid for'
            cand --lines 'Count lines instead of bytes: the rate, burst, sizes, progress and stats are in lines, and a line leaves whole, once paid for'
            cand -0 'Count records ending in a NUL byte (as find -print0 writes them) instead of bytes, as --lines counts lines'
            cand --null 'Count records ending in a NUL byte (as find -print0 writes them) instead of bytes, as --lines counts lines'
            cand -q 'Print nothing on standard error but errors (no progress, no stats)'
            cand --quiet 'Print nothing on standard error but errors (no progress, no stats)'
            cand --stats 'Print a one-line summary on standard error at the end: bytes, elapsed time, the average rate since the start, and the limit and burst (a full bucket at the start lifts a short run''s average above the limit)'
            cand --serve-allow-unix 'With --serve: let proxies listen on or forward to unix:PATH sockets (a shape extension; toxiproxy has none). Off by default, so that the API cannot expose a local socket, such as Docker''s, on the network'
            cand --runtime-metrics 'With --serve: /metrics gives the process''s own metrics too (the standard process_* ones: CPU seconds, memory, descriptors, start time), as toxiproxy''s -runtime-metrics does, without its go_* ones'
            cand --per-connection 'Proxy: give each connection its own limits instead of all sharing one per direction'
            cand --status 'With --share: print the share''s settings and current use, and exit'
            cand --reset 'With --share: remove the share''s file, whatever it holds (a corrupt or foreign one too), so that the next shape on it creates it afresh; refused while a running shape is on it. Then exit'
            cand --pause 'With --remote: hold the data; nothing flows until --resume'
            cand --resume 'With --remote: let data flow again, with no catch-up beyond the burst'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
    ]
    $completions[$command]
}
