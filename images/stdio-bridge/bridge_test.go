package main

// The bridge against a tiny stdio JSON-RPC server: this test binary itself, started as the child
// when BRIDGE_TEST_CHILD is set (it answers every request with its method, exits on "exit").

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if os.Getenv("BRIDGE_TEST_CHILD") == "1" {
		misbehave()   // limits_test.go: children that flood, stop reading or print junk
		leaveHelper() // exit_test.go: a child that leaves a helper holding its stdout
		if os.Getenv("BRIDGE_TEST_DIE_AT_START") == "1" {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL) // as Node aborts when it cannot start its threads
		}
		stubborn := os.Getenv("BRIDGE_TEST_STUBBORN") == "1"
		if stubborn {
			signal.Ignore(syscall.SIGTERM) // only SIGKILL ends it
		}
		fmt.Println("not json: servers sometimes print banners on stdout")
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			_ = json.Unmarshal(sc.Bytes(), &msg)
			if msg.Method == "exit" {
				os.Exit(3)
			}
			if msg.Method == "initialize" && os.Getenv("BRIDGE_TEST_SLOW_START") == "1" {
				continue // a server still starting: initialize is never answered
			}
			if len(msg.ID) > 0 {
				fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"method":%q}}`+"\n", msg.ID, msg.Method)
			}
		}
		if stubborn {
			select {} // stdin closed: a stubborn server keeps running
		}
		return
	}
	os.Exit(m.Run())
}

func post(t *testing.T, url, session, body, accept string) (*http.Response, string) {
	t.Helper()
	rsp, b, err := postWithin(0, url, session, body, accept)
	if err != nil {
		t.Fatal(err)
	}
	return rsp, b
}

// postWithin is post with the client's timeout (0: none), for a test whose failure is a hang.
func postWithin(timeout time.Duration, url, session, body, accept string) (*http.Response, string, error) {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	if session != "" {
		req.Header.Set(sessionHeader, session)
	}
	rsp, err := (&http.Client{Timeout: timeout}).Do(req)
	if err != nil {
		return nil, "", err
	}
	defer rsp.Body.Close()
	b, _ := io.ReadAll(rsp.Body)
	return rsp, string(b), nil
}

// startBridge serves a bridge whose child is this test binary (BRIDGE_TEST_CHILD plus env: NAME
// for NAME=1, or NAME=VALUE), with at most max sessions; both stop when the test ends.
func startBridge(t *testing.T, max int, env ...string) (*bridge, *httptest.Server) {
	t.Helper()
	t.Setenv("BRIDGE_TEST_CHILD", "1")
	for _, name := range env {
		name, value, ok := strings.Cut(name, "=")
		if !ok {
			value = "1"
		}
		t.Setenv(name, value)
	}
	exe, _ := os.Executable()
	b := newBridge([]string{exe}, max, time.Minute)
	srv := httptest.NewServer(b)
	t.Cleanup(func() {
		b.closeAll("test over") // first: open requests end with their sessions
		srv.Close()
	})
	return b, srv
}

func TestBridge(t *testing.T) {
	_, srv := startBridge(t, 1)
	const init = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`

	if rsp, _ := post(t, srv.URL, "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "application/json"); rsp.StatusCode != 400 {
		t.Fatalf("a first request that is not initialize: got %d, want 400", rsp.StatusCode)
	}
	rsp, body := post(t, srv.URL, "", init, "application/json")
	session := rsp.Header.Get(sessionHeader)
	if rsp.StatusCode != 200 || session == "" || !strings.Contains(body, `"method":"initialize"`) {
		t.Fatalf("initialize: %d %q session %q", rsp.StatusCode, body, session)
	}
	if rsp, body := post(t, srv.URL, session, `{"jsonrpc":"2.0","id":"a","method":"tools/list"}`, "application/json, text/event-stream"); rsp.StatusCode != 200 ||
		!strings.Contains(body, `data: {"jsonrpc":"2.0","id":"a","result":{"method":"tools/list"}}`) {
		t.Fatalf("tools/list over SSE: %d %q", rsp.StatusCode, body)
	}
	if rsp, _ := post(t, srv.URL, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "application/json"); rsp.StatusCode != 202 {
		t.Fatalf("a notification: got %d, want 202", rsp.StatusCode)
	}
	if rsp, body := post(t, srv.URL, "", init, "application/json"); rsp.StatusCode != 503 || !strings.Contains(body, "maximum of 1 sessions") {
		t.Fatalf("a session over --max-sessions: %d %q", rsp.StatusCode, body)
	}
	// The child exits: the pending request gets an error naming it, and the session is gone.
	if _, body := post(t, srv.URL, session, `{"jsonrpc":"2.0","id":7,"method":"exit"}`, "application/json"); !strings.Contains(body, `"id":7`) ||
		!strings.Contains(body, "MCP session ended: the stdio server exited (exit status 3)") {
		t.Fatalf("child exit: %q", body)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		rsp, _ := post(t, srv.URL, session, `{"jsonrpc":"2.0","id":8,"method":"ping"}`, "application/json")
		if rsp.StatusCode == 404 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ended session still answers %d", rsp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A client that gives up on initialize (its timeout, while the server starts slowly) never uses
// the session, and with a JSON answer never learnt its id: the bridge ends it and kills its process
// at once, so reconnect attempts do not pile up to --max-sessions or the pod's process limit. The
// child here ignores stdin closing and SIGTERM: the polite stop (stdin, 2 s, SIGTERM, 3 s, SIGKILL)
// cannot end it in under 5 s, so the 4 s bound below fails unless the bridge kills it outright.
func TestInitializeAbandoned(t *testing.T) {
	b, srv := startBridge(t, 2, "BRIDGE_TEST_SLOW_START", "BRIDGE_TEST_STUBBORN")
	client := &http.Client{Timeout: 300 * time.Millisecond}
	for _, accept := range []string{"application/json", "application/json, text/event-stream"} {
		for i := 0; i < 3; i++ { // more attempts than --max-sessions
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", accept)
			rsp, err := client.Do(req)
			if err == nil {
				_, err = io.ReadAll(rsp.Body) // an SSE answer: headers at once, the timeout hits the body
				rsp.Body.Close()
				if rsp.StatusCode != 200 {
					t.Fatalf("attempt %d (%s): got %d, want 200 then a timeout (not refused for --max-sessions)", i, accept, rsp.StatusCode)
				}
			}
			if err == nil {
				t.Fatalf("attempt %d (%s): initialize was answered", i, accept)
			}
			if n := sessionsLeft(b, 4*time.Second); n > 0 {
				t.Fatalf("attempt %d (%s): %d sessions left 4 s after the client gave up (stopped politely, not killed)", i, accept, n)
			}
		}
	}
}

// A server killed by a signal before it answered anything: the client's initialize gets an error
// that points at the likely cause (in a pod, the process limit every session's threads count
// against), not only "signal: aborted".
func TestServerDiesAtStart(t *testing.T) {
	_, srv := startBridge(t, 2, "BRIDGE_TEST_DIE_AT_START")
	_, body := post(t, srv.URL, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, "application/json")
	if !strings.Contains(body, "signal: killed") || !strings.Contains(body, "process limit") {
		t.Fatalf("initialize to a server that died at start: %q", body)
	}
}

// sessionsLeft waits up to d for the bridge to hold no session; it returns how many are left.
func sessionsLeft(b *bridge, d time.Duration) int {
	deadline := time.Now().Add(d)
	for {
		b.mu.Lock()
		n := len(b.sessions)
		b.mu.Unlock()
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
}
