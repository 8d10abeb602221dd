
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
            [CompletionResult]::new('-r', '-r', [CompletionResultType]::ParameterName, 'Bytes (or records) a second, or ''unlimited''')
            [CompletionResult]::new('-L', '-L ', [CompletionResultType]::ParameterName, 'Bytes (or records) a second, or ''unlimited''')
            [CompletionResult]::new('--rate', '--rate', [CompletionResultType]::ParameterName, 'Bytes (or records) a second, or ''unlimited''')
            [CompletionResult]::new('-b', '-b', [CompletionResultType]::ParameterName, 'The bucket''s depth: the most that may pass at once after a pause')
            [CompletionResult]::new('--burst', '--burst', [CompletionResultType]::ParameterName, 'The bucket''s depth: the most that may pass at once after a pause')
            [CompletionResult]::new('-s', '-s', [CompletionResultType]::ParameterName, 'The expected total, for the percentage and ETA')
            [CompletionResult]::new('--size', '--size', [CompletionResultType]::ParameterName, 'The expected total, for the percentage and ETA')
            [CompletionResult]::new('--stop-after', '--stop-after', [CompletionResultType]::ParameterName, 'Forward at most SIZE bytes (or records), then exit successfully')
            [CompletionResult]::new('--progress', '--progress', [CompletionResultType]::ParameterName, 'How progress is shown on standard error')
            [CompletionResult]::new('-i', '-i', [CompletionResultType]::ParameterName, 'How often progress is shown')
            [CompletionResult]::new('--interval', '--interval', [CompletionResultType]::ParameterName, 'How often progress is shown')
            [CompletionResult]::new('-N', '-N ', [CompletionResultType]::ParameterName, 'Name the bar, as pv -N does: ''NAME: '' before it')
            [CompletionResult]::new('--name', '--name', [CompletionResultType]::ParameterName, 'Name the bar, as pv -N does: ''NAME: '' before it')
            [CompletionResult]::new('--rate-file', '--rate-file', [CompletionResultType]::ParameterName, 'Read the rate (and burst) from FILE, and again on SIGHUP')
            [CompletionResult]::new('--schedule', '--schedule', [CompletionResultType]::ParameterName, 'Follow a timetable of rates')
            [CompletionResult]::new('--listen', '--listen', [CompletionResultType]::ParameterName, 'Read from a connection on ADDR (with --connect: be a proxy)')
            [CompletionResult]::new('--exec', '--exec', [CompletionResultType]::ParameterName, 'Run COMMAND with its own traffic shaped, children included')
            [CompletionResult]::new('--serve', '--serve', [CompletionResultType]::ParameterName, 'Serve toxiproxy''s HTTP API, as a drop-in toxiproxy server')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'With --serve: the proxies of FILE, made at start')
            [CompletionResult]::new('--serve-allow-origin', '--serve-allow-origin', [CompletionResultType]::ParameterName, 'With --serve: let a browser UI from ORIGIN drive the API')
            [CompletionResult]::new('--rate-up', '--rate-up', [CompletionResultType]::ParameterName, 'Proxy, --exec: the rate of what clients send (default --rate)')
            [CompletionResult]::new('--rate-down', '--rate-down', [CompletionResultType]::ParameterName, 'Proxy, --exec: the rate of what clients get (default --rate)')
            [CompletionResult]::new('--loops', '--loops', [CompletionResultType]::ParameterName, 'Proxy or --serve: event loops, a thread each (default: one per core)')
            [CompletionResult]::new('--connect', '--connect', [CompletionResultType]::ParameterName, 'Write to a connection to ADDR')
            [CompletionResult]::new('--connect-timeout', '--connect-timeout', [CompletionResultType]::ParameterName, 'How long --connect keeps trying each address (default 10s)')
            [CompletionResult]::new('--delay', '--delay', [CompletionResultType]::ParameterName, 'Hold every byte this long: a slow link')
            [CompletionResult]::new('--delay-up', '--delay-up', [CompletionResultType]::ParameterName, 'Proxy, UDP link or --exec: the delay from clients to the server (default: --delay)')
            [CompletionResult]::new('--delay-down', '--delay-down', [CompletionResultType]::ParameterName, 'Proxy, UDP link or --exec: the delay from the server to clients (default: --delay)')
            [CompletionResult]::new('--link', '--link', [CompletionResultType]::ParameterName, 'A known link by name: ''slow-3g'', ''cable'', ''lte''...; ''list'' shows them')
            [CompletionResult]::new('--trace', '--trace', [CompletionResultType]::ParameterName, 'Pipe: follow a recorded link (Mahimahi''s trace format)')
            [CompletionResult]::new('--trace-up', '--trace-up', [CompletionResultType]::ParameterName, 'Proxy, UDP link or --exec: follow a recorded link from clients to the server (as --trace)')
            [CompletionResult]::new('--trace-down', '--trace-down', [CompletionResultType]::ParameterName, 'Proxy, UDP link or --exec: follow a recorded link from the server to clients (as --trace)')
            [CompletionResult]::new('--jitter', '--jitter', [CompletionResultType]::ParameterName, 'With --delay: vary it by up to this much')
            [CompletionResult]::new('--max-buffer', '--max-buffer', [CompletionResultType]::ParameterName, 'The most a slow link holds at once')
            [CompletionResult]::new('--slice', '--slice', [CompletionResultType]::ParameterName, 'Write in pieces of about SIZE bytes')
            [CompletionResult]::new('--slice-pause', '--slice-pause', [CompletionResultType]::ParameterName, 'With --slice: the pause between two pieces')
            [CompletionResult]::new('--loss', '--loss', [CompletionResultType]::ParameterName, 'Lose packets with probability PROB: TCP sends them again')
            [CompletionResult]::new('--drop', '--drop', [CompletionResultType]::ParameterName, 'Delete blocks of a stream with probability PROB')
            [CompletionResult]::new('--corrupt', '--corrupt', [CompletionResultType]::ParameterName, 'Flip a bit of bytes with probability PROB')
            [CompletionResult]::new('--cut-after', '--cut-after', [CompletionResultType]::ParameterName, 'Forward exactly SIZE bytes, then close')
            [CompletionResult]::new('--slow-close', '--slow-close', [CompletionResultType]::ParameterName, 'Hold the close this long after the end of the data')
            [CompletionResult]::new('--stall-after', '--stall-after', [CompletionResultType]::ParameterName, 'After that much, forward nothing but stay open')
            [CompletionResult]::new('--reset-after', '--reset-after', [CompletionResultType]::ParameterName, 'After that much, reset (status 3)')
            [CompletionResult]::new('--duplicate', '--duplicate', [CompletionResultType]::ParameterName, 'UDP: send this share of datagrams twice')
            [CompletionResult]::new('--reorder', '--reorder', [CompletionResultType]::ParameterName, 'UDP: send this share of datagrams at once, skipping the delay')
            [CompletionResult]::new('--mtu', '--mtu', [CompletionResultType]::ParameterName, 'UDP: drop datagrams over SIZE bytes, or cut them (SIZE:cut)')
            [CompletionResult]::new('--udp-idle', '--udp-idle', [CompletionResultType]::ParameterName, 'UDP: forget a flow idle this long (default 120s)')
            [CompletionResult]::new('--queue-drop', '--queue-drop', [CompletionResultType]::ParameterName, 'UDP: what full queues drop (default tail)')
            [CompletionResult]::new('--http-status', '--http-status', [CompletionResultType]::ParameterName, 'HTTP: answer picked requests with this status, and this body')
            [CompletionResult]::new('--http-header', '--http-header', [CompletionResultType]::ParameterName, 'HTTP: a header of --http-status''s answer (repeatable)')
            [CompletionResult]::new('--http-delay', '--http-delay', [CompletionResultType]::ParameterName, 'HTTP: hold picked requests this long before they go on')
            [CompletionResult]::new('--http-cut-after', '--http-cut-after', [CompletionResultType]::ParameterName, 'HTTP: cut the answers to picked requests after SIZE of their body')
            [CompletionResult]::new('--grpc-status', '--grpc-status', [CompletionResultType]::ParameterName, 'gRPC: answer picked calls with this status, trailers only')
            [CompletionResult]::new('--first', '--first', [CompletionResultType]::ParameterName, 'HTTP: pick only the first N requests that match')
            [CompletionResult]::new('--every', '--every', [CompletionResultType]::ParameterName, 'HTTP: pick only every Nth request that matches')
            [CompletionResult]::new('--path', '--path', [CompletionResultType]::ParameterName, 'HTTP: only requests whose path matches GLOB')
            [CompletionResult]::new('--method', '--method', [CompletionResultType]::ParameterName, 'HTTP: only requests of this method (any case)')
            [CompletionResult]::new('--header', '--header', [CompletionResultType]::ParameterName, 'HTTP: only requests with this header, and this value if given')
            [CompletionResult]::new('--during', '--during', [CompletionResultType]::ParameterName, 'HTTP: only requests that come within this window after the start')
            [CompletionResult]::new('--affect', '--affect', [CompletionResultType]::ParameterName, 'Proxy: do the faults to this fraction of connections')
            [CompletionResult]::new('--seed', '--seed', [CompletionResultType]::ParameterName, 'The seed of every random draw, to replay them')
            [CompletionResult]::new('--remote', '--remote', [CompletionResultType]::ParameterName, 'Change a running shape, or a share, instead of copying')
            [CompletionResult]::new('--share', '--share', [CompletionResultType]::ParameterName, 'Spend from one limit with every shape on the share')
            [CompletionResult]::new('--share-fallback', '--share-fallback', [CompletionResultType]::ParameterName, 'What a fleet''s share does while Redis cannot be reached')
            [CompletionResult]::new('--generate', '--generate', [CompletionResultType]::ParameterName, 'Print the man page or a shell completion script, and exit')
            [CompletionResult]::new('-l', '-l', [CompletionResultType]::ParameterName, 'Count lines instead of bytes')
            [CompletionResult]::new('--lines', '--lines', [CompletionResultType]::ParameterName, 'Count lines instead of bytes')
            [CompletionResult]::new('-0', '-0', [CompletionResultType]::ParameterName, 'Count NUL-terminated records instead of bytes')
            [CompletionResult]::new('--null', '--null', [CompletionResultType]::ParameterName, 'Count NUL-terminated records instead of bytes')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing on standard error but errors (no progress, no stats)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing on standard error but errors (no progress, no stats)')
            [CompletionResult]::new('--stats', '--stats', [CompletionResultType]::ParameterName, 'Print a summary line at the end')
            [CompletionResult]::new('-n', '-n', [CompletionResultType]::ParameterName, 'Print numbers, as pv -n does')
            [CompletionResult]::new('--numeric', '--numeric', [CompletionResultType]::ParameterName, 'Print numbers, as pv -n does')
            [CompletionResult]::new('-p', '-p', [CompletionResultType]::ParameterName, 'pv''s switches that pick the bar''s parts, taken as pv takes them: -p the bar and percentage (with a known size), -t the time, -e the ETA, -a the average rate; given any, the bar shows the count and the rate, then those. (pv''s -r and -b are shape''s --rate and --burst: its bar always shows the rate and count.)')
            [CompletionResult]::new('-t', '-t', [CompletionResultType]::ParameterName, 't')
            [CompletionResult]::new('-e', '-e', [CompletionResultType]::ParameterName, 'e')
            [CompletionResult]::new('-a', '-a', [CompletionResultType]::ParameterName, 'a')
            [CompletionResult]::new('-W', '-W ', [CompletionResultType]::ParameterName, 'Show the bar only once the first byte has passed, as pv -W does')
            [CompletionResult]::new('--wait', '--wait', [CompletionResultType]::ParameterName, 'Show the bar only once the first byte has passed, as pv -W does')
            [CompletionResult]::new('-f', '-f', [CompletionResultType]::ParameterName, 'Draw the bar even where standard error is no terminal, as pv -f does (the same as --progress bar)')
            [CompletionResult]::new('--force', '--force', [CompletionResultType]::ParameterName, 'Draw the bar even where standard error is no terminal, as pv -f does (the same as --progress bar)')
            [CompletionResult]::new('--serve-allow-unix', '--serve-allow-unix', [CompletionResultType]::ParameterName, 'With --serve: let proxies use Unix sockets')
            [CompletionResult]::new('--runtime-metrics', '--runtime-metrics', [CompletionResultType]::ParameterName, 'With --serve: the process''s metrics in /metrics too')
            [CompletionResult]::new('--per-connection', '--per-connection', [CompletionResultType]::ParameterName, 'Proxy: limits of each connection''s own, not shared')
            [CompletionResult]::new('--packets', '--packets', [CompletionResultType]::ParameterName, 'UDP: count datagrams, not bytes')
            [CompletionResult]::new('--jitter-keeps-order', '--jitter-keeps-order', [CompletionResultType]::ParameterName, 'UDP: jitter never lets a datagram overtake an earlier one')
            [CompletionResult]::new('--http-stall', '--http-stall', [CompletionResultType]::ParameterName, 'HTTP: never answer picked requests; the connection stays open')
            [CompletionResult]::new('--http-reset', '--http-reset', [CompletionResultType]::ParameterName, 'HTTP: reset the connection of picked requests, in their turn')
            [CompletionResult]::new('--status', '--status', [CompletionResultType]::ParameterName, 'With --share: print the share''s settings and current use, and exit')
            [CompletionResult]::new('--reset', '--reset', [CompletionResultType]::ParameterName, 'With --share: remove the share, to start it afresh')
            [CompletionResult]::new('--pause', '--pause', [CompletionResultType]::ParameterName, 'With --remote: hold the data; nothing flows until --resume')
            [CompletionResult]::new('--resume', '--resume', [CompletionResultType]::ParameterName, 'With --remote: let data flow again')
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
