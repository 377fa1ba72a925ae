package main

// One MCP session: one child process speaking newline-delimited JSON-RPC on stdin/stdout.
// Responses from the child go to the HTTP request that waits for their id; requests and
// notifications the child starts go to the session's GET stream, else to an open POST stream.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// maxMessageBytes bounds one line from the child (a larger one ends the session).
const maxMessageBytes = 64 << 20

// envelope is what routing needs of a JSON-RPC message.
type envelope struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
}

func (e envelope) isRequest() bool  { return e.Method != "" && len(e.ID) > 0 && string(e.ID) != "null" }
func (e envelope) isResponse() bool { return e.Method == "" && len(e.ID) > 0 }
func idKey(id json.RawMessage) string {
	return string(bytes.TrimSpace(id))
}

type session struct {
	id    string
	cmd   *exec.Cmd
	stdin interface {
		Write([]byte) (int, error)
		Close() error
	}
	writeMu  sync.Mutex
	mu       sync.Mutex
	waiters  map[string]chan []byte
	sinks    []chan []byte // server-initiated messages; sinks[0] is preferred (GET streams are put first)
	done     chan struct{}
	exited   chan struct{} // closed once the child is reaped
	reason   string        // why the session ended (set before done is closed)
	ended    bool
	lastUsed atomic.Int64
	answered atomic.Bool // the child has answered a request (its initialize)
	closing  atomic.Bool // the bridge is stopping the child (its signal is no news)
}

// startSession starts the child; live is how many sessions the bridge holds with this one (logged:
// every child's threads count against the pod's process limit).
func startSession(id string, argv []string, live string, onEnd func(*session)) (*session, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr // the container log; never a client
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("could not start the stdio server %q: %w", argv[0], err)
	}
	s := &session{id: id, cmd: cmd, stdin: stdin, waiters: map[string]chan []byte{}, done: make(chan struct{}), exited: make(chan struct{})}
	s.touch()
	log.Printf("session %s: started %q (pid %d; %s sessions)", short(id), argv[0], cmd.Process.Pid, live)
	go func() {
		readErr := s.readChild(bufio.NewReaderSize(stdout, 64<<10))
		waitErr := cmd.Wait()
		close(s.exited)
		why := "the stdio server exited"
		if waitErr != nil {
			why = fmt.Sprintf("the stdio server exited (%v)", waitErr)
			var exit *exec.ExitError
			if errors.As(waitErr, &exit) && exit.Sys().(syscall.WaitStatus).Signaled() && !s.answered.Load() && !s.closing.Load() {
				// Node, for one, aborts without a word when it cannot start its threads.
				why += " before answering anything: a server killed by a signal at start is often out of the pod's process limit (the kubelet's podPidsLimit counts every session's threads; lower --max-sessions)"
			}
		}
		if readErr != nil {
			why = fmt.Sprintf("%s after %v", why, readErr)
		}
		s.end(why)
		onEnd(s)
	}()
	return s, nil
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func (s *session) touch() { s.lastUsed.Store(time.Now().UnixNano()) }

// readChild routes every line the child writes until its stdout closes.
func (s *session) readChild(r *bufio.Reader) error {
	var line []byte
	for {
		chunk, isPrefix, err := r.ReadLine()
		if err != nil {
			return nil // EOF or closed pipe: the exit status tells the rest
		}
		line = append(line, chunk...)
		if len(line) > maxMessageBytes {
			s.kill()
			return fmt.Errorf("it wrote a message over %d bytes", maxMessageBytes)
		}
		if isPrefix {
			continue
		}
		msg := bytes.TrimSpace(line)
		line = nil
		if len(msg) == 0 {
			continue
		}
		var env envelope
		if msg[0] != '{' || json.Unmarshal(msg, &env) != nil {
			log.Printf("session %s: ignored a line on stdout that is not a JSON-RPC message (%d bytes)", short(s.id), len(msg))
			continue
		}
		s.route(env, append([]byte(nil), msg...))
	}
}

func (s *session) route(env envelope, msg []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if env.isResponse() {
		s.answered.Store(true)
		if ch, ok := s.waiters[idKey(env.ID)]; ok {
			delete(s.waiters, idKey(env.ID))
			ch <- msg // buffered for every id of its request
		}
		return
	}
	for _, sink := range s.sinks {
		select {
		case sink <- msg:
			return
		default: // a slow stream: try the next
		}
	}
	if env.isRequest() {
		// Nobody can answer: tell the child at once instead of leaving it waiting.
		reply, _ := json.Marshal(map[string]any{
			"jsonrpc": "2.0", "id": env.ID,
			"error": map[string]any{"code": -32603, "message": "the client has no open stream to receive this request"},
		})
		go func() { _ = s.send(reply) }()
	}
}

// expect registers the ids whose responses go to ch; false when the session has ended.
func (s *session) expect(ids []json.RawMessage, ch chan []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return false
	}
	for _, id := range ids {
		s.waiters[idKey(id)] = ch
	}
	return true
}

func (s *session) forget(ids []json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		delete(s.waiters, idKey(id))
	}
}

func (s *session) addSink(ch chan []byte, first bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if first {
		s.sinks = append([]chan []byte{ch}, s.sinks...)
	} else {
		s.sinks = append(s.sinks, ch)
	}
}

func (s *session) removeSink(ch chan []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, c := range s.sinks {
		if c == ch {
			s.sinks = append(s.sinks[:i:i], s.sinks[i+1:]...)
			return
		}
	}
}

// send writes one message (compacted onto one line) to the child's stdin.
func (s *session) send(msg []byte) error {
	var buf bytes.Buffer
	if err := json.Compact(&buf, msg); err != nil {
		return err
	}
	buf.WriteByte('\n')
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	_, err := s.stdin.Write(buf.Bytes())
	return err
}

// end answers every waiting request with an error naming the reason; idempotent.
func (s *session) end(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	s.ended = true
	s.reason = reason
	for key, ch := range s.waiters {
		ch <- errorResponse(json.RawMessage(key), -32000, "MCP session ended: "+reason)
	}
	s.waiters = map[string]chan []byte{}
	close(s.done)
	log.Printf("session %s: ended: %s", short(s.id), reason)
}

// close ends the session and stops its child: stdin closed first (the stdio spec's polite way),
// then SIGTERM, then SIGKILL, to the child's whole process group.
func (s *session) close(reason string) {
	s.closing.Store(true)
	s.end(reason)
	_ = s.stdin.Close()
	go func() {
		if s.waitExit(2 * time.Second) {
			return
		}
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
		if !s.waitExit(3 * time.Second) {
			s.kill()
		}
	}()
}

func (s *session) kill() {
	s.closing.Store(true)
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
}

// abandon ends a session nobody can use and kills its child at once: a server still starting
// has no state to save, and a polite stop would leave it (and its threads) for up to 5 s, while
// reconnect attempts start more of them.
func (s *session) abandon(reason string) {
	s.end(reason)
	s.kill()
}

// waitExit: true when the child has been reaped within d.
func (s *session) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.exited:
		return true
	case <-t.C:
		return false
	}
}

func errorResponse(id json.RawMessage, code int, message string) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": message}})
	return b
}
