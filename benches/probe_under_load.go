// probe_under_load: what a delay keeps while many other connections stream
// through the same proxy. An echo server on loopback; N load connections
// through the proxy, each writing as fast as the proxy takes it and reading
// the echo back; and, after a second of that, one probe connection whose
// round trips of 16 bytes are timed (50 of them, one after another).
//
//	go run benches/probe_under_load.go -conns 200 -- 'shape -q --listen 127.0.0.1:$FRONT --connect 127.0.0.1:$ECHO --rate 200KiB --per-connection --delay 25ms'
//
// The command runs with FRONT and ECHO in its environment: it must listen on
// 127.0.0.1:$FRONT and relay to 127.0.0.1:$ECHO. Prints the probe's round
// trips (min, median, p90, p99, max) and what the load moved meanwhile.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync/atomic"
	"time"
)

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func echo(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		c.(*net.TCPConn).SetNoDelay(true)
		go func() { io.Copy(c, c); c.Close() }()
	}
}

func main() {
	conns := flag.Int("conns", 200, "load connections")
	rounds := flag.Int("rounds", 50, "probe round trips")
	flag.Parse()
	echoL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go echo(echoL)
	front := freePort()
	cmd := exec.Command("sh", "-c", "exec "+strings.Join(flag.Args(), " "))
	cmd.Env = append(os.Environ(), fmt.Sprintf("FRONT=%d", front),
		fmt.Sprintf("ECHO=%d", echoL.Addr().(*net.TCPAddr).Port))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	defer cmd.Process.Kill()
	addr := fmt.Sprintf("127.0.0.1:%d", front)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			fmt.Println("the proxy did not listen")
			os.Exit(1)
		}
	}
	var moved int64
	for i := 0; i < *conns; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			panic(err)
		}
		go func() {
			buf := make([]byte, 64<<10)
			for {
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}()
		go func() {
			buf := make([]byte, 64<<10)
			for {
				n, err := c.Read(buf)
				atomic.AddInt64(&moved, int64(n))
				if err != nil {
					return
				}
			}
		}()
	}
	time.Sleep(time.Second)
	probe, err := net.Dial("tcp", addr)
	if err != nil {
		panic(err)
	}
	probe.(*net.TCPConn).SetNoDelay(true)
	start, before := time.Now(), atomic.LoadInt64(&moved)
	var rtts []float64
	msg, back := make([]byte, 16), make([]byte, 16)
	for i := 0; i < *rounds; i++ {
		t := time.Now()
		if _, err := probe.Write(msg); err != nil {
			panic(err)
		}
		if _, err := io.ReadFull(probe, back); err != nil {
			panic(err)
		}
		rtts = append(rtts, float64(time.Since(t).Microseconds())/1000)
	}
	secs := time.Since(start).Seconds()
	sort.Float64s(rtts)
	at := func(q float64) float64 { return rtts[int(q*float64(len(rtts)-1))] }
	fmt.Printf("| %d connections | %.2f | %.2f | %.2f | %.2f | %.2f | %.0f KiB/s each way per connection |\n",
		*conns, rtts[0], at(0.5), at(0.9), at(0.99), rtts[len(rtts)-1],
		float64(atomic.LoadInt64(&moved)-before)/secs/1024/float64(*conns))
}
