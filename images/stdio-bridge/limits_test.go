package main

// The bridge against children that misbehave: one that writes requests without reading its stdin,
// one that stops reading its stdin, one that writes a line over the gateway's limit, one that
// prints junk on stdout in a loop. None may cost the bridge memory, goroutines or log without bound.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// misbehave runs the child modes of these tests (in the child: BRIDGE_TEST_CHILD is set); it
// returns for the others.
//
//	BRIDGE_TEST_JUNK=N   N lines of junk on stdout first, then the ordinary child
//	BRIDGE_TEST_DEAF=1   answers initialize, writes BRIDGE_TEST_FLOOD=N requests, never reads stdin again
//	BRIDGE_TEST_BIG=1    answers "almost" with a line just under 16 MiB, "big" with one just over
func misbehave() {
	if n, _ := strconv.Atoi(os.Getenv("BRIDGE_TEST_JUNK")); n > 0 {
		out := bufio.NewWriter(os.Stdout)
		for range n {
			out.WriteString("x\n")
		}
		out.Flush()
		return
	}
	deaf, big := os.Getenv("BRIDGE_TEST_DEAF") == "1", os.Getenv("BRIDGE_TEST_BIG") == "1"
	if !deaf && !big {
		return
	}
	in := bufio.NewReader(os.Stdin)
	out := bufio.NewWriterSize(os.Stdout, 1<<20)
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			os.Exit(0)
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(line, &msg)
		switch msg.Method {
		case "almost", "big":
			size := 16<<20 - 100
			if msg.Method == "big" {
				size = 16<<20 + 100
			}
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"text":"%s"}}`+"\n", msg.ID, strings.Repeat("a", size))
		default:
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"method":%q}}`+"\n", msg.ID, msg.Method)
		}
		out.Flush()
		if deaf {
			flood, _ := strconv.Atoi(os.Getenv("BRIDGE_TEST_FLOOD"))
			for i := range flood {
				fmt.Fprintf(out, `{"jsonrpc":"2.0","id":"r%d","method":"roots/list"}`+"\n", i)
			}
			out.Flush()
			time.Sleep(time.Hour) // and never reads stdin again
		}
	}
}

// useWriteTimeout sets the write timeout of the sessions the test starts (call before startBridge).
func useWriteTimeout(t *testing.T, d time.Duration) {
	old := writeTimeout
	writeTimeout = d
	t.Cleanup(func() { writeTimeout = old })
}

func initialize(t *testing.T, b *bridge, url string) *session {
	t.Helper()
	rsp, body := post(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, "application/json")
	id := rsp.Header.Get(sessionHeader)
	if rsp.StatusCode != 200 || id == "" {
		t.Fatalf("initialize: %d %q", rsp.StatusCode, body)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sessions[id]
}

// goroutinesIn counts the goroutines with fn on their stack.
func goroutinesIn(fn string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte(fn)) {
			count++
		}
	}
	return count
}

func killAll(b *bridge) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.sessions {
		s.kill()
	}
}

func bigCall(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"x","arguments":{"a":"%s"}}}`, id, strings.Repeat("x", 1<<20))
}

// A child that writes requests while no stream is open, and does not read its stdin: the bridge's
// replies to them are queued (bounded), not a goroutine each blocked on the child's stdin, and
// the session ends once the child has taken no input for the write timeout.
func TestChildFloodsRequests(t *testing.T) {
	useWriteTimeout(t, 500*time.Millisecond)
	base := runtime.NumGoroutine()
	b, srv := startBridge(t, 1, "BRIDGE_TEST_DEAF", "BRIDGE_TEST_FLOOD=20000")
	s := initialize(t, b, srv.URL)
	deadline := time.Now().Add(10 * time.Second)
	for ended := false; !ended; {
		if n := runtime.NumGoroutine(); n > base+500 {
			t.Fatalf("%d goroutines (%d before the session): one per request the child wrote", n, base)
		}
		select {
		case <-s.done:
			ended = true
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the session still runs 10 s after its server stopped reading its stdin")
		}
	}
	if !strings.Contains(s.reason, "took no input on its stdin") {
		t.Fatalf("the session ended for another reason: %q", s.reason)
	}
}

// Clients that give up on a server that stopped reading its stdin: their requests (and bodies)
// are let go at once, not held until the server reads again. The write timeout is long here, so
// only the client's going away can free them.
func TestClientGivesUpOnStuckServer(t *testing.T) {
	useWriteTimeout(t, time.Minute)
	b, srv := startBridge(t, 1, "BRIDGE_TEST_DEAF")
	s := initialize(t, b, srv.URL)
	defer killAll(b)
	client := &http.Client{Timeout: 300 * time.Millisecond}
	if n := goroutinesIn(".(*session).readChild("); n != 1 {
		t.Fatalf("goroutinesIn finds %d readers of the session's child, not 1", n) // the helper works
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(bigCall(10+i)))
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set(sessionHeader, s.id)
			if rsp, err := client.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, rsp.Body)
				rsp.Body.Close()
			}
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := goroutinesIn(".(*bridge).post(")
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests still held 5 s after their clients went away", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A server that stopped reading its stdin: a request gets an error once the write timeout passes
// without the server taking input, and the session ends (its process killed).
func TestStuckServerIsEnded(t *testing.T) {
	useWriteTimeout(t, 500*time.Millisecond)
	b, srv := startBridge(t, 1, "BRIDGE_TEST_DEAF")
	s := initialize(t, b, srv.URL)
	rsp, body, err := postWithin(8*time.Second, srv.URL, s.id, bigCall(2), "application/json")
	if err != nil {
		t.Fatalf("no answer from a server that does not read its stdin: %v", err)
	}
	if rsp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "took no input on its stdin") {
		t.Fatalf("a request to a server that does not read its stdin: %d %q", rsp.StatusCode, body)
	}
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		t.Fatal("the stuck server still runs")
	}
	if rsp, body := post(t, srv.URL, s.id, `{"jsonrpc":"2.0","id":3,"method":"ping"}`, "application/json"); rsp.StatusCode != 404 {
		t.Fatalf("the ended session answers %d %q", rsp.StatusCode, body)
	}
}

// A line over 16 MiB (what the gateway accepts) ends the session; one under it goes through.
func TestMessageOverGatewayLimit(t *testing.T) {
	b, srv := startBridge(t, 1, "BRIDGE_TEST_BIG")
	s := initialize(t, b, srv.URL)
	if rsp, body := post(t, srv.URL, s.id, `{"jsonrpc":"2.0","id":2,"method":"almost"}`, "application/json"); rsp.StatusCode != 200 || !strings.Contains(body, `"result":{"text":"aaa`) {
		t.Fatalf("a line under 16 MiB: %d %.200q", rsp.StatusCode, body)
	}
	_, body := post(t, srv.URL, s.id, `{"jsonrpc":"2.0","id":3,"method":"big"}`, "application/json")
	if !strings.Contains(body, "MCP session ended") || !strings.Contains(body, fmt.Sprintf("over %d bytes", 16<<20)) {
		t.Fatalf("a line over 16 MiB: %.200q", body)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// A child printing junk on stdout: a few lines logged, the rest counted.
func TestJunkOnStdoutLogIsBounded(t *testing.T) {
	logs := &syncBuffer{}
	log.SetOutput(logs)
	t.Cleanup(func() { log.SetOutput(os.Stderr) })
	b, srv := startBridge(t, 1, "BRIDGE_TEST_JUNK=10000")
	s := initialize(t, b, srv.URL) // answered after the junk: every junk line has been read
	req, _ := http.NewRequest(http.MethodDelete, srv.URL, nil)
	req.Header.Set(sessionHeader, s.id)
	if rsp, err := http.DefaultClient.Do(req); err != nil || rsp.StatusCode != 200 {
		t.Fatalf("DELETE: %v %v", rsp, err)
	}
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		t.Fatal("the child did not exit")
	}
	time.Sleep(50 * time.Millisecond) // its stdout's EOF, read just before
	out := logs.String()
	if n := strings.Count(out, "not a JSON-RPC message"); n > 20 {
		t.Fatalf("%d log lines for 10001 junk lines", n)
	}
	if !strings.Contains(out, "ignored 9996 more lines") { // 10000, the banner, 5 logged
		t.Fatalf("no count of the junk lines not logged:\n%s", out)
	}
}
