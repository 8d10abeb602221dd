// link_pinger: what a link adds to connects and to request/response round
// trips over TCP, for benches/exec_link.sh. Run as an echo server
// (-serve: prints its port, echoes every connection) or as a client
// (-addr HOST:PORT): -connects connects (each closed at once), then
// -rounds round trips of -size bytes on one connection; prints the
// median and 99th percentile of each, in milliseconds. As -http DIR, a
// file server on loopback (prints its port).
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"time"
)

func main() {
	serve := flag.Bool("serve", false, "echo every connection")
	files := flag.String("http", "", "serve the files of this directory over HTTP")
	addr := flag.String("addr", "", "the echo server")
	connects := flag.Int("connects", 50, "connects to time")
	rounds := flag.Int("rounds", 200, "round trips to time")
	size := flag.Int("size", 64, "bytes each way per round trip")
	flag.Parse()
	switch {
	case *serve:
		echo()
	case *files != "":
		listener, err := net.Listen("tcp", "127.0.0.1:0")
		check(err)
		fmt.Println(listener.Addr().(*net.TCPAddr).Port)
		check(http.Serve(listener, http.FileServer(http.Dir(*files))))
	default:
		ping(*addr, *connects, *rounds, *size)
	}
}

func echo() {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	fmt.Println(listener.Addr().(*net.TCPAddr).Port)
	for {
		conn, err := listener.Accept()
		check(err)
		go func() {
			defer conn.Close()
			io.Copy(conn, conn)
		}()
	}
}

func ping(addr string, connects, rounds, size int) {
	var dials []time.Duration
	for i := 0; i < connects; i++ {
		start := time.Now()
		conn, err := net.Dial("tcp", addr)
		check(err)
		dials = append(dials, time.Since(start))
		conn.Close()
	}
	conn, err := net.Dial("tcp", addr)
	check(err)
	sent := make([]byte, size)
	got := make([]byte, size)
	var trips []time.Duration
	for i := 0; i < rounds; i++ {
		start := time.Now()
		_, err := conn.Write(sent)
		check(err)
		_, err = io.ReadFull(conn, got)
		check(err)
		trips = append(trips, time.Since(start))
	}
	fmt.Printf("connect %s\nround trip %s\n", spread(dials), spread(trips))
}

// spread gives the median and the 99th percentile, in milliseconds.
func spread(times []time.Duration) string {
	if len(times) == 0 {
		return "none"
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	p99 := times[(len(times)*99)/100]
	if len(times) < 100 {
		p99 = times[len(times)-1]
	}
	return fmt.Sprintf("median %.2f ms, p99 %.2f ms", ms(times[len(times)/2]), ms(p99))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
