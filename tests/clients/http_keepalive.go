// Go's net/http against shape's HTTP faults: 100 GETs of /seq/I, one
// after another on one kept-alive connection. Each answer must be the
// upstream's (its body the path asked) or shape's 503, and the
// connection must be reused for every request after the first. Prints
// "answered A passed P reused R".
package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
)

func main() {
	base := os.Args[1]
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}}
	answered, passed, reused := 0, 0, 0
	for i := 0; i < 100; i++ {
		path := fmt.Sprintf("/seq/%d", i)
		trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
			if info.Reused {
				reused++
			}
		}}
		request, err := http.NewRequest("GET", base+path, nil)
		if err != nil {
			panic(err)
		}
		request = request.WithContext(httptrace.WithClientTrace(request.Context(), trace))
		response, err := client.Do(request)
		if err != nil {
			fmt.Println("request", i, "failed:", err)
			os.Exit(1)
		}
		body, err := io.ReadAll(response.Body)
		response.Body.Close()
		if err != nil {
			fmt.Println("request", i, "body failed:", err)
			os.Exit(1)
		}
		switch {
		case response.StatusCode == 503:
			answered++
		case response.StatusCode == 200 && string(body) == path:
			passed++
		default:
			fmt.Printf("request %d (%s) got %d %q: out of order\n", i, path, response.StatusCode, body)
			os.Exit(1)
		}
	}
	fmt.Printf("answered %d passed %d reused %d\n", answered, passed, reused)
}
