
using namespace System.Management.Automation
using namespace System.Management.Automation.Language

Register-ArgumentCompleter -Native -CommandName 'shape' -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)

    $commandElements = $commandAst.CommandElements
    $command = @(
        'shape'
        for ($i = 1; $i -lt $commandElements.Count; $i++) {
            $element = $commandElements[$i]
            if ($element -isnot [StringConstantExpressionAst] -or
                $element.StringConstantType -ne [StringConstantType]::BareWord -or
                $element.Value.StartsWith('-') -or
                $element.Value -eq $wordToComplete) {
                break
        }
        $element.Value
    }) -join ';'

    $completions = @(switch ($command) {
        'shape' {
            [CompletionResult]::new('-r', '-r', [CompletionResultType]::ParameterName, 'Bytes (or with --lines, --null: records) per second, or ''unlimited'' (the default: shape is then a progress pipe)')
            [CompletionResult]::new('-L', '-L ', [CompletionResultType]::ParameterName, 'Bytes (or with --lines, --null: records) per second, or ''unlimited'' (the default: shape is then a progress pipe)')
            [CompletionResult]::new('--rate', '--rate', [CompletionResultType]::ParameterName, 'Bytes (or with --lines, --null: records) per second, or ''unlimited'' (the default: shape is then a progress pipe)')
            [CompletionResult]::new('-b', '-b', [CompletionResultType]::ParameterName, 'The bucket''s depth: the most that may pass at once after a pause')
            [CompletionResult]::new('--burst', '--burst', [CompletionResultType]::ParameterName, 'The bucket''s depth: the most that may pass at once after a pause')
            [CompletionResult]::new('-s', '-s', [CompletionResultType]::ParameterName, 'The expected total, for the percentage and ETA when reading standard input (the size of files is known; records are not counted ahead)')
            [CompletionResult]::new('--size', '--size', [CompletionResultType]::ParameterName, 'The expected total, for the percentage and ETA when reading standard input (the size of files is known; records are not counted ahead)')
            [CompletionResult]::new('--stop-after', '--stop-after', [CompletionResultType]::ParameterName, 'Forward at most SIZE bytes (or records), then exit successfully')
            [CompletionResult]::new('--progress', '--progress', [CompletionResultType]::ParameterName, 'How to show progress on standard error. It never touches standard output and never slows the copy')
            [CompletionResult]::new('-i', '-i', [CompletionResultType]::ParameterName, 'How often progress is shown: ''500ms'', ''2s'', or plain seconds (''0.5''). Defaults to 1s for json and 0.1s for the bar')
            [CompletionResult]::new('--interval', '--interval', [CompletionResultType]::ParameterName, 'How often progress is shown: ''500ms'', ''2s'', or plain seconds (''0.5''). Defaults to 1s for json and 0.1s for the bar')
            [CompletionResult]::new('--rate-file', '--rate-file', [CompletionResultType]::ParameterName, 'Read the rate (and optionally the burst) from FILE: ''RATE [BURST]'' on its first line that is not a ''#'' comment. Read at start and again on SIGHUP; a bad file then leaves the settings as they were')
            [CompletionResult]::new('--schedule', '--schedule', [CompletionResultType]::ParameterName, 'Follow a timetable of rates from the start of the transfer, e.g. "0s=1MiB, 30s=10MiB, 2m=unlimited" (humantime offsets, increasing)')
            [CompletionResult]::new('--listen', '--listen', [CompletionResultType]::ParameterName, 'Read from one connection accepted on ADDR instead of standard input: host:port, :port (every interface), [::1]:port or unix:PATH; port 0 takes any free port. shape says where it listens on standard error (''shape: listening on 127.0.0.1:41234''), accepts one connection, reads it to its end, and exits. With --connect too, shape is a proxy: every connection accepted is forwarded to the --connect address, both directions shaped')
            [CompletionResult]::new('--serve', '--serve', [CompletionResultType]::ParameterName, 'Serve toxiproxy''s HTTP API on ADDR (default localhost:8474), as a drop-in toxiproxy server: proxies are created, changed and given toxics over HTTP, each with its own listener, all on one event loop. --seed makes every random draw reproducible. Runs until SIGINT or SIGTERM')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'With --serve: create the proxies of FILE at start, in toxiproxy''s config format (a JSON list of proxies, as POST /populate takes)')
            [CompletionResult]::new('--serve-allow-origin', '--serve-allow-origin', [CompletionResultType]::ParameterName, 'With --serve: let a browser UI served from ORIGIN (e.g. http://localhost:3000) drive the API, with the CORS headers it needs. Without it, requests from browsers and other sites are refused (403), so that no web page can drive the API. Repeatable')
            [CompletionResult]::new('--rate-up', '--rate-up', [CompletionResultType]::ParameterName, 'Proxy: the rate from clients to the server (default: --rate)')
            [CompletionResult]::new('--rate-down', '--rate-down', [CompletionResultType]::ParameterName, 'Proxy: the rate from the server to clients (default: --rate)')
            [CompletionResult]::new('--connect', '--connect', [CompletionResultType]::ParameterName, 'Write to a connection to ADDR instead of standard output (forms as for --listen; :port is this machine). At the end of the input shape shuts down its sending side and waits for the peer to close, so nothing is cut off')
            [CompletionResult]::new('--connect-timeout', '--connect-timeout', [CompletionResultType]::ParameterName, 'How long --connect keeps trying each address (default 10s)')
            [CompletionResult]::new('--delay', '--delay', [CompletionResultType]::ParameterName, 'Hold every byte for DURATION before it leaves, like a link with that one-way latency: ''100ms'', ''1.5s'', up to 1h. In proxy mode each direction is delayed, so a round trip takes twice as long')
            [CompletionResult]::new('--jitter', '--jitter', [CompletionResultType]::ParameterName, 'Vary the delay of each chunk at random, evenly within DURATION either way (never below zero). Byte order is kept: a chunk that would overtake the one before it leaves right after that one')
            [CompletionResult]::new('--max-buffer', '--max-buffer', [CompletionResultType]::ParameterName, 'The most shape holds at once (in proxy mode, per direction of each connection); while it is full, shape stops reading. Defaults to what flows at the rate during the delay and jitter, plus the burst: from 1 MiB to 64 MiB, and 64 MiB when unlimited. Without --delay, shape holds one chunk of at most SIZE')
            [CompletionResult]::new('--slice', '--slice', [CompletionResultType]::ParameterName, 'Cut every write into pieces of about SIZE bytes (each within SIZE ± VARIATION), each written on its own, as a slow or fragmenting server would send them: ''7'', ''1KiB:512''. Every fault flag takes ''off'', and in a proxy ''up:'' or ''down:'' before its value for one direction: ''down:7''')
            [CompletionResult]::new('--slice-pause', '--slice-pause', [CompletionResultType]::ParameterName, 'With --slice: the pause between two pieces')
            [CompletionResult]::new('--drop', '--drop', [CompletionResultType]::ParameterName, 'Lose each block of the stream (1 KiB, or 2.5 ms of data at the starting rate if that is less) with probability PROB, ''0.01'' or ''1%'': for tests of checksums and framing. The blocks and bytes lost are said at the end')
            [CompletionResult]::new('--corrupt', '--corrupt', [CompletionResultType]::ParameterName, 'Flip one random bit of each byte with probability PROB. The bytes touched are said at the end')
            [CompletionResult]::new('--cut-after', '--cut-after', [CompletionResultType]::ParameterName, 'Forward exactly SIZE bytes, then close cleanly, as a server that cuts a response short')
            [CompletionResult]::new('--slow-close', '--slow-close', [CompletionResultType]::ParameterName, 'Hold the close this long after the end of the data')
            [CompletionResult]::new('--stall-after', '--stall-after', [CompletionResultType]::ParameterName, 'After that much data or time, forward nothing more but keep the output open, as a server that stops answering: a size (''1KiB'') or a time (''2s'', ''1min'')')
            [CompletionResult]::new('--reset-after', '--reset-after', [CompletionResultType]::ParameterName, 'After that much data or time, reset: a socket is closed with a reset (RST), and shape ends with status 3')
            [CompletionResult]::new('--affect', '--affect', [CompletionResultType]::ParameterName, 'Proxy: do the faults to this fraction of connections only (PROB, ''0.5'' or ''50%''), the others passing clean; which ones is drawn from the seed')
            [CompletionResult]::new('--seed', '--seed', [CompletionResultType]::ParameterName, 'Seed every random choice (jitter, slices, drops, corruption, the connections affected), so that a run can be replayed. Without it a seed is drawn; --stats says which, and a proxy with faults or jitter says it at start')
            [CompletionResult]::new('--remote', '--remote', [CompletionResultType]::ParameterName, 'Change the running shape PID (of this user), or every shape on a share (share:NAME), instead of copying: with --rate, --burst, --pause or --resume; for a PID also --delay, --jitter and the fault flags (''off'' turns a fault off). Prints the settings now in force; for a PID, after the shape has acknowledged, with its delay and faults. With nothing to change it only asks, and a PID also says what has passed so far')
            [CompletionResult]::new('--share', '--share', [CompletionResultType]::ParameterName, 'Spend from the bucket of share NAME, with every shape of this user that names it: the limit is their total. The first creates it with its --rate and --burst; while any shape is on it, later ones use the share''s settings (and say so if theirs differ). A share on a fleet of machines lives in Redis: redis://[user[:password]@]host[:port][/db]/NAME, rediss://... over TLS (SHAPE_REDIS_CA_FILE, SHAPE_REDIS_CERT_FILE and SHAPE_REDIS_KEY_FILE name certificates), or redis+unix:///path/to/redis.sock/NAME; the password may also come from SHAPE_REDIS_PASSWORD. Any node of a Redis Cluster will do')
            [CompletionResult]::new('--share-fallback', '--share-fallback', [CompletionResultType]::ParameterName, 'What spending from a share in Redis does while Redis cannot be reached: go on at the last known rate per shape, hold the data, or go on without a limit. It is said once, and when Redis is back')
            [CompletionResult]::new('--generate', '--generate', [CompletionResultType]::ParameterName, 'Print the man page or a shell completion script, and exit')
            [CompletionResult]::new('-l', '-l', [CompletionResultType]::ParameterName, 'Count lines instead of bytes: the rate, burst, sizes, progress and stats are in lines, and a line leaves whole, once paid for')
            [CompletionResult]::new('--lines', '--lines', [CompletionResultType]::ParameterName, 'Count lines instead of bytes: the rate, burst, sizes, progress and stats are in lines, and a line leaves whole, once paid for')
            [CompletionResult]::new('-0', '-0', [CompletionResultType]::ParameterName, 'Count records ending in a NUL byte (as find -print0 writes them) instead of bytes, as --lines counts lines')
            [CompletionResult]::new('--null', '--null', [CompletionResultType]::ParameterName, 'Count records ending in a NUL byte (as find -print0 writes them) instead of bytes, as --lines counts lines')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing on standard error but errors (no progress, no stats)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing on standard error but errors (no progress, no stats)')
            [CompletionResult]::new('--stats', '--stats', [CompletionResultType]::ParameterName, 'Print a one-line summary on standard error at the end: bytes, elapsed time, the average rate since the start, and the limit and burst (a full bucket at the start lifts a short run''s average above the limit)')
            [CompletionResult]::new('--serve-allow-unix', '--serve-allow-unix', [CompletionResultType]::ParameterName, 'With --serve: let proxies listen on or forward to unix:PATH sockets (a shape extension; toxiproxy has none). Off by default, so that the API cannot expose a local socket, such as Docker''s, on the network')
            [CompletionResult]::new('--runtime-metrics', '--runtime-metrics', [CompletionResultType]::ParameterName, 'With --serve: /metrics gives the process''s own metrics too (the standard process_* ones: CPU seconds, memory, descriptors, start time), as toxiproxy''s -runtime-metrics does, without its go_* ones')
            [CompletionResult]::new('--per-connection', '--per-connection', [CompletionResultType]::ParameterName, 'Proxy: give each connection its own limits instead of all sharing one per direction')
            [CompletionResult]::new('--status', '--status', [CompletionResultType]::ParameterName, 'With --share: print the share''s settings and current use, and exit')
            [CompletionResult]::new('--reset', '--reset', [CompletionResultType]::ParameterName, 'With --share: remove the share''s file, whatever it holds (a corrupt or foreign one too), so that the next shape on it creates it afresh; refused while a running shape is on it. Then exit')
            [CompletionResult]::new('--pause', '--pause', [CompletionResultType]::ParameterName, 'With --remote: hold the data; nothing flows until --resume')
            [CompletionResult]::new('--resume', '--resume', [CompletionResultType]::ParameterName, 'With --remote: let data flow again, with no catch-up beyond the burst')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
    })

    $completions.Where{ $_.CompletionText -like "$wordToComplete*" } |
        Sort-Object -Property ListItemText
}
