// udp_flows: many slow UDP flows through one relay at once. N client
// sockets each send SIZE-byte datagrams at RATE bytes a second for SECONDS
// through the relay to a sink on loopback; the relay's own CPU is read
// from /proc before it is stopped.
//
//	go run benches/udp_flows.go -flows 1000 -rate 20000 -- 'shape -q --listen udp:127.0.0.1:$FRONT --connect udp:127.0.0.1:$SINK --rate 20000 --per-connection'
//
// The command runs with FRONT and SINK in its environment. Prints a Markdown
// row: flows, rate each, datagrams sent and received, the relay's CPU s.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func freePort() int {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// cpuOf is the user and system time of process pid, in seconds.
func cpuOf(pid int) float64 {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	var user, system float64
	fmt.Sscan(fields[11], &user)
	fmt.Sscan(fields[12], &system)
	return (user + system) / 100
}

func main() {
	flows := flag.Int("flows", 100, "client flows at once")
	rate := flag.Float64("rate", 20000, "bytes a second each flow sends")
	size := flag.Int("size", 1000, "bytes a datagram")
	seconds := flag.Float64("seconds", 5, "how long each flow sends")
	flag.Parse()

	sink, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		panic(err)
	}
	sink.SetReadBuffer(8 << 20)
	var received int64
	go func() {
		buffer := make([]byte, 65536)
		for {
			if _, _, err := sink.ReadFromUDP(buffer); err != nil {
				return
			}
			atomic.AddInt64(&received, 1)
		}
	}()
	front := freePort()
	cmd := exec.Command("sh", "-c", "exec "+strings.Join(flag.Args(), " "))
	cmd.Env = append(os.Environ(), fmt.Sprintf("FRONT=%d", front),
		fmt.Sprintf("SINK=%d", sink.LocalAddr().(*net.UDPAddr).Port))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	// The relay listens once a probe datagram comes through to the sink.
	probe, err := net.DialUDP("udp", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: front})
	if err != nil {
		panic(err)
	}
	for atomic.LoadInt64(&received) == 0 {
		probe.Write([]byte("probe"))
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	before := cpuOf(cmd.Process.Pid)
	atomic.StoreInt64(&received, 0)

	every := time.Duration(float64(*size) / *rate * float64(time.Second))
	count := int(*rate * *seconds / float64(*size))
	var sent int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < *flows; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := net.DialUDP("udp", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: front})
			if err != nil {
				panic(err)
			}
			defer c.Close()
			data := make([]byte, *size)
			// Flows start spread over one period, as clients do.
			next := start.Add(every * time.Duration(i) / time.Duration(*flows))
			for n := 0; n < count; n++ {
				time.Sleep(time.Until(next))
				if _, err := c.Write(data); err == nil {
					atomic.AddInt64(&sent, 1)
				}
				next = next.Add(every)
			}
		}(i)
	}
	wg.Wait()
	// What is still on its way through the relay's rate arrives within a
	// second or two; then the relay's CPU is read, and it is stopped.
	for last := int64(-1); last != atomic.LoadInt64(&received); {
		last = atomic.LoadInt64(&received)
		time.Sleep(500 * time.Millisecond)
	}
	cpu := cpuOf(cmd.Process.Pid) - before
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	fmt.Printf("| %d | %.0f B/s | %d | %d | %.2f |\n", *flows, *rate, sent, atomic.LoadInt64(&received), cpu)
}
