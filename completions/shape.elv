
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
            cand -r 'Bytes (or records) a second, or ''unlimited'''
            cand -L 'Bytes (or records) a second, or ''unlimited'''
            cand --rate 'Bytes (or records) a second, or ''unlimited'''
            cand -b 'The bucket''s depth: the most that may pass at once after a pause'
            cand --burst 'The bucket''s depth: the most that may pass at once after a pause'
            cand -s 'The expected total, for the percentage and ETA'
            cand --size 'The expected total, for the percentage and ETA'
            cand --stop-after 'Forward at most SIZE bytes (or records), then exit successfully'
            cand --progress 'How progress is shown on standard error'
            cand -i 'How often progress is shown'
            cand --interval 'How often progress is shown'
            cand -N 'Name the bar, as pv -N does: ''NAME: '' before it'
            cand --name 'Name the bar, as pv -N does: ''NAME: '' before it'
            cand --rate-file 'Read the rate (and burst) from FILE, and again on SIGHUP'
            cand --schedule 'Follow a timetable of rates'
            cand --listen 'Read from a connection on ADDR (with --connect: be a proxy)'
            cand --exec 'Run COMMAND with its own traffic shaped, children included'
            cand --serve 'Serve toxiproxy''s HTTP API, as a drop-in toxiproxy server'
            cand --config 'With --serve: the proxies of FILE, made at start'
            cand --serve-allow-origin 'With --serve: let a browser UI from ORIGIN drive the API'
            cand --rate-up 'Proxy, --exec: the rate of what clients send (default --rate)'
            cand --rate-down 'Proxy, --exec: the rate of what clients get (default --rate)'
            cand --loops 'Proxy or --serve: event loops, a thread each (default: one per core)'
            cand --connect 'Write to a connection to ADDR'
            cand --connect-timeout 'How long --connect keeps trying each address (default 10s)'
            cand --delay 'Hold every byte this long: a slow link'
            cand --delay-up 'Proxy, UDP link or --exec: the delay from clients to the server (default: --delay)'
            cand --delay-down 'Proxy, UDP link or --exec: the delay from the server to clients (default: --delay)'
            cand --link 'A known link by name: ''slow-3g'', ''cable'', ''lte''...; ''list'' shows them'
            cand --trace 'Pipe: follow a recorded link (Mahimahi''s trace format)'
            cand --trace-up 'Proxy, UDP link or --exec: follow a recorded link from clients to the server (as --trace)'
            cand --trace-down 'Proxy, UDP link or --exec: follow a recorded link from the server to clients (as --trace)'
            cand --jitter 'With --delay: vary it by up to this much'
            cand --max-buffer 'The most a slow link holds at once'
            cand --slice 'Write in pieces of about SIZE bytes'
            cand --slice-pause 'With --slice: the pause between two pieces'
            cand --loss 'Lose packets with probability PROB: TCP sends them again'
            cand --drop 'Delete blocks of a stream with probability PROB'
            cand --corrupt 'Flip a bit of bytes with probability PROB'
            cand --cut-after 'Forward exactly SIZE bytes, then close'
            cand --slow-close 'Hold the close this long after the end of the data'
            cand --stall-after 'After that much, forward nothing but stay open'
            cand --reset-after 'After that much, reset (status 3)'
            cand --duplicate 'UDP: send this share of datagrams twice'
            cand --reorder 'UDP: send this share of datagrams at once, skipping the delay'
            cand --mtu 'UDP: drop datagrams over SIZE bytes, or cut them (SIZE:cut)'
            cand --udp-idle 'UDP: forget a flow idle this long (default 120s)'
            cand --queue-drop 'UDP: what full queues drop (default tail)'
            cand --affect 'Proxy: do the faults to this fraction of connections'
            cand --seed 'The seed of every random draw, to replay them'
            cand --remote 'Change a running shape, or a share, instead of copying'
            cand --share 'Spend from one limit with every shape on the share'
            cand --share-fallback 'What a fleet''s share does while Redis cannot be reached'
            cand --generate 'Print the man page or a shell completion script, and exit'
            cand -l 'Count lines instead of bytes'
            cand --lines 'Count lines instead of bytes'
            cand -0 'Count NUL-terminated records instead of bytes'
            cand --null 'Count NUL-terminated records instead of bytes'
            cand -q 'Print nothing on standard error but errors (no progress, no stats)'
            cand --quiet 'Print nothing on standard error but errors (no progress, no stats)'
            cand --stats 'Print a summary line at the end'
            cand -n 'Print numbers, as pv -n does'
            cand --numeric 'Print numbers, as pv -n does'
            cand -p 'pv''s switches that pick the bar''s parts, taken as pv takes them: -p the bar and percentage (with a known size), -t the time, -e the ETA, -a the average rate; given any, the bar shows the count and the rate, then those. (pv''s -r and -b are shape''s --rate and --burst: its bar always shows the rate and count.)'
            cand -t 't'
            cand -e 'e'
            cand -a 'a'
            cand -W 'Show the bar only once the first byte has passed, as pv -W does'
            cand --wait 'Show the bar only once the first byte has passed, as pv -W does'
            cand -f 'Draw the bar even where standard error is no terminal, as pv -f does (the same as --progress bar)'
            cand --force 'Draw the bar even where standard error is no terminal, as pv -f does (the same as --progress bar)'
            cand --serve-allow-unix 'With --serve: let proxies use Unix sockets'
            cand --runtime-metrics 'With --serve: the process''s metrics in /metrics too'
            cand --per-connection 'Proxy: limits of each connection''s own, not shared'
            cand --packets 'UDP: count datagrams, not bytes'
            cand --jitter-keeps-order 'UDP: jitter never lets a datagram overtake an earlier one'
            cand --status 'With --share: print the share''s settings and current use, and exit'
            cand --reset 'With --share: remove the share, to start it afresh'
            cand --pause 'With --remote: hold the data; nothing flows until --resume'
            cand --resume 'With --remote: let data flow again'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
    ]
    $completions[$command]
}
