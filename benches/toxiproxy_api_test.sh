#!/usr/bin/env bash
# toxiproxy's own API tests (api_test.go of Shopify/toxiproxy v2.12.0, its
# 34 tests) run against `shape --serve`, and against the real
# toxiproxy-server as released, instead of toxiproxy's in-process server:
# only WithServer is replaced, by one that starts the server on
# localhost:8475 once and deletes every proxy after each test, as
# toxiproxy's Collection.Clear does. It runs twice: with the machine's own
# /etc/hosts, and in a mount namespace of its own where localhost
# resolves to ::1 first and 127.0.0.1 too. The version is set as
# toxiproxy's build sets it (2.12.0), which one test compares /version
# with.
#
#   benches/toxiproxy_api_test.sh GIT_DIR [SHAPE]
#
# GIT_DIR holds the tag v2.12.0 (fetch Shopify/toxiproxy); SHAPE defaults
# to target/release/shape. Go and toxiproxy's Go libraries come from
# Debian, as ../shared/toxiproxy/build.sh installs them (it is run first).
set -euo pipefail
cd "$(dirname "$0")/.."
git_dir=${1:?usage: toxiproxy_api_test.sh GIT_DIR [SHAPE]}
shape=$(realpath "${2:-target/release/shape}")
bash ../shared/toxiproxy/build.sh "$git_dir" /tmp/toxiproxy >/dev/null

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
src=$work/gopath/src/github.com/Shopify/toxiproxy/v2
mkdir -p "$src"
git --git-dir="$git_dir" archive v2.12.0 | tar -x -C "$src"

python3 - "$src/api_test.go" <<'PY'
import re, sys
path = sys.argv[1]
text = open(path).read()
start = text.index("func WithServer(")
end = text.index("\n}\n", start) + 3
with_shape = '''func WithServer(t *testing.T, f func(string)) {
	if shapeServer == nil {
		server := os.Getenv("SERVER")
		shapeServer = exec.Command(server, "-q", "--serve", "localhost:8475")
		if strings.Contains(server, "toxiproxy-server") {
			shapeServer = exec.Command(server, "-host", "localhost", "-port", "8475")
		}
		if err := shapeServer.Start(); err != nil {
			t.Fatal("shape did not start:", err)
		}
		for {
			conn, err := net.Dial("tcp", "127.0.0.1:8475")
			if err == nil {
				conn.Close()
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	defer func() {
		proxies, err := client.Proxies()
		if err != nil {
			t.Error("Failed to list proxies", err)
		}
		for _, proxy := range proxies {
			if err := proxy.Delete(); err != nil {
				t.Error("Failed to clear collection", err)
			}
		}
	}()

	f("http://localhost:8475")
}

var shapeServer *exec.Cmd

// Kept so that the imports of toxiproxy's in-process server stay used.
var _ = toxiproxy.NewMetricsContainer(prometheus.NewRegistry())
var _ = zerolog.Nop
var _ = flag.Lookup
'''
text = text[:start] + with_shape + text[end:]
text = text.replace('import (\n', 'import (\n\t"net"\n\t"os/exec"\n\t"strings"\n', 1)
# toxiproxy as released answers its version (2.12.0, as build.sh sets it
# and as shape answers); the test expects an unversioned build's "git".
text = text.replace('"{\\"version\\": \\"git\\"}\\n"', '"{\\"version\\": \\"2.12.0\\"}\\n"')
assert '2.12.0' in text, "the version test was not found"
open(path, "w").write(text)
PY

tests=$(grep -o '^func Test[A-Za-z0-9_]*' "$src/api_test.go" | sed 's/^func //' | paste -sd'|')
count=$(grep -c '^func Test' "$src/api_test.go")
# Runs the tests against server $1, saying $2.
run() {
    (cd "$src" && SERVER="$1" GO111MODULE=off GOPATH="$work/gopath:/usr/share/gocode" GOCACHE="$work/cache" \
        go test -count=1 -v -run "^($tests)\$" . 2>&1) | tee "$work/log" | grep -E "^(--- FAIL|FAIL|ok)|_test.go" || true
    passed=$(grep -c '^--- PASS' "$work/log" || true)
    echo "$2: $passed of $count passed"
    pkill -f -- "$1 .*8475" || true
    # Gone before the next run starts its own: a server still stopping
    # would answer the next run's first tests, then vanish under them.
    while (exec 3<>/dev/tcp/127.0.0.1/8475) 2>/dev/null; do sleep 0.05; done
}
both() {
    run "$shape" "shape, $1"
    run /tmp/toxiproxy/toxiproxy-server "toxiproxy, $1"
}
echo "localhost as this machine resolves it: $(getent ahosts localhost | awk '{print $1}' | sort -u | paste -sd' ')"
both "this machine"
hosts=$work/hosts
printf '::1 localhost\n127.0.0.1 localhost\n' > "$hosts"
export -f run both
export src shape work tests count hosts
unshare --map-root-user --mount bash -c 'mount --bind "$hosts" /etc/hosts &&
    echo "localhost as ::1 first, and 127.0.0.1: $(getent ahosts localhost | awk "{print \$1}" | uniq | paste -sd" ")" &&
    both "::1 and 127.0.0.1"'
