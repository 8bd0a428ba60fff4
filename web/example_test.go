package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/web"
)

// ExampleLogPage serves the page of a log directory and reads one
// snapshot of it as JSON, as a script or a monitoring probe would.
func ExampleLogPage() {
	dir, _ := os.MkdirTemp("", "strom-web-example-")
	defer os.RemoveAll(dir)
	lg, err := log.Open(dir)
	if err != nil {
		panic(err)
	}
	defer lg.Close() // the writer goes on beside the page: the page takes no lock
	events, err := lg.CreateTopic("events", 2)
	if err != nil {
		panic(err)
	}
	p0, _ := events.Partition(0)
	if _, err := p0.Append(context.Background(), log.Record{Value: []byte("a")}, log.Record{Value: []byte("b")}); err != nil {
		panic(err)
	}

	page, err := web.NewLogPage(dir) // read-only
	if err != nil {
		panic(err)
	}
	defer page.Close()
	srv := httptest.NewServer(page) // or mux.Handle("/log/", http.StripPrefix("/log", page))
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/snapshot.json")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var snap web.LogSnapshot
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
		panic(err)
	}
	fmt.Println(resp.Status, resp.Header.Get("Content-Type"))
	for _, t := range snap.Topics {
		for _, p := range t.Partitions {
			fmt.Printf("%s/%d: log start offset %d, next offset %d, %d segment(s)\n",
				t.Topic, p.Partition, p.LogStartOffset, p.NextOffset, p.Segments)
		}
	}
	// Output:
	// 200 OK application/json
	// events/0: log start offset 0, next offset 2, 1 segment(s)
	// events/1: log start offset 0, next offset 0, 1 segment(s)
}
