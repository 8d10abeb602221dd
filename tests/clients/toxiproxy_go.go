// toxiproxy's Go client (github.com/Shopify/toxiproxy/v2/client), as Go
// test suites and testcontainers-go use it, drives a toxiproxy server:
// the scenario every client must pass, with the Go client's own habits
// (AddToxic without attributes sends "attributes": null; Populate).
// Usage: toxiproxy_go API_PORT UPSTREAM, where UPSTREAM echoes what it is
// sent. Prints "ok" at the end; any failure exits 1 saying why.
package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
)

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

func must(err error, what string) {
	if err != nil {
		fail("%s: %v", what, err)
	}
}

// roundTrip is the time one echo of a message through listen takes.
func roundTrip(listen string) time.Duration {
	start := time.Now()
	conn, err := net.DialTimeout("tcp", listen, 10*time.Second)
	must(err, "dial "+listen)
	defer conn.Close()
	must(conn.SetDeadline(time.Now().Add(30*time.Second)), "deadline")
	message := []byte("ping")
	_, err = conn.Write(message)
	must(err, "write")
	back := make([]byte, len(message))
	_, err = io.ReadFull(conn, back)
	must(err, "read")
	if string(back) != "ping" {
		fail("echoed %q", back)
	}
	return time.Since(start)
}

func refused(listen string) bool {
	conn, err := net.DialTimeout("tcp", listen, 5*time.Second)
	if err != nil {
		return true
	}
	conn.Close()
	return false
}

func main() {
	client := toxiproxy.NewClient("127.0.0.1:" + os.Args[1])
	upstream := os.Args[2]

	version, err := client.Version()
	must(err, "version")
	if !strings.HasPrefix(string(version), `{"version": "2.`) {
		fail("version %q", version)
	}

	proxy, err := client.CreateProxy("go_client", "127.0.0.1:0", upstream)
	must(err, "create")
	if !strings.HasPrefix(proxy.Listen, "127.0.0.1:") || strings.HasSuffix(proxy.Listen, ":0") {
		fail("listens on %s", proxy.Listen)
	}
	proxies, err := client.Proxies()
	must(err, "proxies")
	if _, ok := proxies["go_client"]; !ok {
		fail("go_client is not listed: %v", proxies)
	}
	if took := roundTrip(proxy.Listen); took > 250*time.Millisecond {
		fail("a clean round trip took %v", took)
	}

	// No attributes: the Go client sends null, which means the defaults.
	bare, err := proxy.AddToxic("bare", "latency", "", 1, nil)
	must(err, "AddToxic without attributes")
	if bare.Attributes["latency"] != float64(0) || bare.Stream != "downstream" {
		fail("a toxic without attributes: %+v", bare)
	}
	must(proxy.RemoveToxic("bare"), "RemoveToxic")

	_, err = client.AddToxic(&toxiproxy.ToxicOptions{
		ProxyName:  "go_client",
		ToxicName:  "slow",
		ToxicType:  "latency",
		Toxicity:   1,
		Attributes: toxiproxy.Attributes{"latency": 300},
	})
	must(err, "AddToxic")
	if took := roundTrip(proxy.Listen); took < 300*time.Millisecond || took > 700*time.Millisecond {
		fail("with 300 ms of latency a round trip took %v", took)
	}
	toxic, err := proxy.UpdateToxic("slow", -1, toxiproxy.Attributes{"latency": 100})
	must(err, "UpdateToxic")
	if toxic.Attributes["latency"] != float64(100) || toxic.Toxicity != 1 {
		fail("updated: %+v", toxic)
	}

	must(proxy.Disable(), "Disable")
	if !refused(proxy.Listen) {
		fail("a disabled proxy accepts")
	}
	must(proxy.Enable(), "Enable")
	if took := roundTrip(proxy.Listen); took < 100*time.Millisecond {
		fail("enabled again, a round trip took %v: the toxic is gone", took)
	}

	toxics, err := proxy.Toxics()
	must(err, "Toxics")
	if len(toxics) != 1 || toxics[0].Name != "slow" {
		fail("toxics: %+v", toxics)
	}
	must(client.ResetState(), "ResetState")
	toxics, err = proxy.Toxics()
	must(err, "Toxics")
	if len(toxics) != 0 {
		fail("after a reset: %+v", toxics)
	}

	populated, err := client.Populate([]toxiproxy.Proxy{
		{Name: "go_client", Listen: proxy.Listen, Upstream: upstream, Enabled: true},
		{Name: "go_populated", Listen: "127.0.0.1:0", Upstream: upstream, Enabled: true},
	})
	must(err, "Populate")
	if len(populated) != 2 {
		fail("populated: %+v", populated)
	}
	_, err = client.Proxy("nobody")
	if err == nil || !strings.Contains(err.Error(), "proxy not found") {
		fail("a missing proxy: %v", err)
	}

	for _, name := range []string{"go_client", "go_populated"} {
		found, err := client.Proxy(name)
		must(err, "Proxy "+name)
		must(found.Delete(), "Delete "+name)
	}
	if !refused(proxy.Listen) {
		fail("a deleted proxy accepts")
	}
	fmt.Println("ok")
}
