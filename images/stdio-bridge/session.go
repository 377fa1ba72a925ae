package main

// One MCP session: one child process speaking newline-delimited JSON-RPC on stdin/stdout.
// Responses from the child go to the HTTP request that waits for their id; requests and
// notifications the child starts go to the session's GET stream, else to an open POST stream.

import (
	"bufio"
	"bytes"
	"context"
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

// maxMessageBytes bounds one line from the child (a larger one ends the session): the gateway
// drops any message over 16 MiB, so forwarding one would only cost memory on both sides.
const maxMessageBytes = 16 << 20

const (
	// maxQueuedReplies and maxQueuedReplyBytes bound the bridge's own replies to requests the
	// child starts while no stream can take them (each waits for the child's stdin); more are dropped.
	maxQueuedReplies    = 1024
	maxQueuedReplyBytes = 1 << 20
	// writeChunk is what one write to the child's stdin may carry (a pipe holds 64 KiB): the write
	// deadline is renewed for each, so it bounds how long the child takes no input at all.
	writeChunk = 64 << 10
	// junkLogBurst lines on stdout that are not JSON-RPC are logged per junkLogInterval; the rest
	// are counted, and the count logged.
	junkLogBurst    = 5
	junkLogInterval = 10 * time.Second
	// exitDrainTime: once the child has exited, the reader has this long to route what it wrote
	// before (already in the pipe: reading it takes far less), then the session ends. It only
	// matters when a process the child started still holds its stdout (a helper a wrapper put in
	// the background, or one that left its process group with setsid): the pipe's EOF would come
	// when that process exits, maybe never, and the session would hold its slot until then.
	exitDrainTime = time.Second
)

// writeTimeout: a child that takes no input on its stdin for this long is stuck (or has stopped
// reading): its session ends and its process is killed. A client message also waits at most this
// long for its turn to be written. A variable for the tests.
var writeTimeout = 10 * time.Second

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

// write is a client message for the writer goroutine; err gets the outcome.
type write struct {
	line []byte
	err  chan error // buffered
}

type session struct {
	id           string
	cmd          *exec.Cmd
	stdin        *os.File // the write end of a pipe: it takes a write deadline
	writeTimeout time.Duration
	writes       chan write  // client messages, handed to the writer one at a time
	replies      chan []byte // the bridge's own replies to the child's requests (bounded, dropped when full)
	replyBytes   atomic.Int64
	dropped      atomic.Int64
	mu           sync.Mutex
	waiters      map[string]chan []byte
	sinks        []chan []byte // server-initiated messages; sinks[0] is preferred (GET streams are put first)
	done         chan struct{}
	exited       chan struct{} // closed once the child is reaped and its stdout read
	reason       string        // why the session ended (set before done is closed)
	ended        bool
	lastUsed     atomic.Int64
	answered     atomic.Bool // the child has answered a request (its initialize)
	closing      atomic.Bool // the bridge is stopping the child (its signal is no news)
}

// startSession starts the child; live is how many sessions the bridge holds with this one (logged:
// every child's threads count against the pod's process limit).
func startSession(id string, argv []string, live string, onEnd func(*session)) (*session, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr // the container log; never a client
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// os.Pipe, not cmd.StdinPipe: its write end is non-blocking in the runtime's poller, so a
	// write to a child that stopped reading can time out (and be interrupted by Close).
	stdinR, stdin, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdin = stdinR
	// os.Pipe for stdout too, not cmd.StdoutPipe: cmd.Wait closes that one as soon as the child
	// exits, maybe before its last lines are read. This read end stays ours and takes a deadline.
	stdout, stdoutW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdin.Close()
		return nil, err
	}
	cmd.Stdout = stdoutW
	err = cmd.Start()
	stdinR.Close()  // the child's now (or nobody's): a write after the child exits fails with EPIPE
	stdoutW.Close() // likewise: else the pipe's EOF never comes
	if err != nil {
		stdin.Close()
		stdout.Close()
		return nil, fmt.Errorf("could not start the stdio server %q: %w", argv[0], err)
	}
	s := &session{
		id: id, cmd: cmd, stdin: stdin, writeTimeout: writeTimeout,
		writes: make(chan write), replies: make(chan []byte, maxQueuedReplies),
		waiters: map[string]chan []byte{}, done: make(chan struct{}), exited: make(chan struct{}),
	}
	s.touch()
	log.Printf("session %s: started %q (pid %d; %s sessions)", short(id), argv[0], cmd.Process.Pid, live)
	go s.writeChild()
	go func() {
		read := make(chan error, 1)
		go func() { read <- s.readChild(bufio.NewReaderSize(stdout, 64<<10)) }()
		// The child's exit ends the session, not its stdout's EOF: a process it started may hold
		// the pipe for ever. Processes left in its group are leftovers of a dead server: killed,
		// which also frees the pipe at once. One that left the group (setsid) is out of reach:
		// the reader routes what is in the pipe for exitDrainTime, then stops.
		waitErr := cmd.Wait()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // not s.kill: closing would hide the diagnosis below
		_ = stdout.SetReadDeadline(time.Now().Add(exitDrainTime))
		readErr := <-read // after it, every reply the child wrote has been routed
		stdout.Close()
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

// readChild routes every line the child writes until its stdout closes (or its read deadline,
// set once the child has exited, passes).
func (s *session) readChild(r *bufio.Reader) error {
	var line []byte
	var junk junkLog
	defer junk.flush(s.id)
	for {
		chunk, isPrefix, err := r.ReadLine()
		if err != nil {
			return nil // EOF, closed pipe or deadline: the exit status tells the rest
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
			junk.add(s.id, len(msg))
			continue
		}
		s.route(env, append([]byte(nil), msg...))
	}
}

// junkLog logs lines on the child's stdout that are not JSON-RPC (banners, stray prints): the
// first junkLogBurst of each junkLogInterval, then a count, so a child printing junk in a loop
// cannot fill the container log.
type junkLog struct {
	since  time.Time // start of the current interval
	logged int       // lines logged in it
	more   int       // lines ignored without a log line of their own
}

func (j *junkLog) add(id string, size int) {
	if now := time.Now(); now.Sub(j.since) >= junkLogInterval {
		j.flush(id)
		j.since, j.logged = now, 0
	}
	if j.logged < junkLogBurst {
		j.logged++
		log.Printf("session %s: ignored a line on stdout that is not a JSON-RPC message (%d bytes)", short(id), size)
		if j.logged == junkLogBurst {
			log.Printf("session %s: more such lines are only counted (a count every %s)", short(id), junkLogInterval)
		}
		return
	}
	j.more++
}

func (j *junkLog) flush(id string) {
	if j.more > 0 {
		log.Printf("session %s: ignored %d more lines on stdout that are not JSON-RPC messages", short(id), j.more)
		j.more = 0
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
		// Queued for the writer, never a goroutine each: a child that writes requests without
		// reading its stdin would pile them up without bound.
		reply := append(errorResponse(env.ID, -32603, "the client has no open stream to receive this request"), '\n')
		if s.replyBytes.Add(int64(len(reply))) <= maxQueuedReplyBytes {
			select {
			case s.replies <- reply:
				return
			default:
			}
		}
		s.replyBytes.Add(-int64(len(reply)))
		if s.dropped.Add(1) == 1 {
			log.Printf("session %s: the stdio server writes requests faster than it reads its stdin: dropped the bridge's reply to one (more drops are only counted)", short(s.id))
		}
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

// errSessionEnded: send gave up because the session ended. end has answered every request
// registered with expect by then, with its reason.
var errSessionEnded = errors.New("the session ended")

// send writes one message (compacted onto one line) to the child's stdin. It gives up when ctx
// ends (the client went away: its body is not held for a stuck child), when the session ends, or
// when the writer has not taken the message within the write timeout.
func (s *session) send(ctx context.Context, msg []byte) error {
	var buf bytes.Buffer
	if err := json.Compact(&buf, msg); err != nil {
		return err
	}
	buf.WriteByte('\n')
	w := write{line: buf.Bytes(), err: make(chan error, 1)}
	t := time.NewTimer(s.writeTimeout)
	defer t.Stop()
	select {
	case s.writes <- w:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.done:
		return fmt.Errorf("%w: %s", errSessionEnded, s.reason)
	case <-t.C:
		return fmt.Errorf("the stdio server did not take this message within %s (its stdin is busy or stuck)", s.writeTimeout)
	}
	// Taken: the writer answers, or ends the session when the child takes no input for the write
	// timeout.
	select {
	case err := <-w.err:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-s.done:
		return fmt.Errorf("%w: %s", errSessionEnded, s.reason)
	}
}

// writeChild is the one goroutine that writes to the child's stdin, until the session ends. A
// child that takes no input for the write timeout is stuck (or stopped reading): its session ends
// and its process is killed, so neither requests nor their bodies wait on it.
func (s *session) writeChild() {
	for {
		var line []byte
		var errc chan error
		select {
		case <-s.done:
			return
		case w := <-s.writes:
			line, errc = w.line, w.err
		case line = <-s.replies:
			s.replyBytes.Add(-int64(len(line)))
		}
		err := s.writeLine(line)
		stuck := errors.Is(err, os.ErrDeadlineExceeded)
		if stuck {
			err = fmt.Errorf("the stdio server took no input on its stdin for %s (stuck, or not reading it): its process is killed", s.writeTimeout)
		}
		// Any other error (EPIPE: the child exited) goes to its sender; the reader ends the session.
		if errc != nil {
			errc <- err
		}
		if stuck {
			s.end(err.Error())
			s.kill()
			return
		}
	}
}

// writeLine writes one line in chunks, each with its own deadline: a child slow to read a large
// message is fine, a child that takes nothing for the write timeout is not.
func (s *session) writeLine(b []byte) error {
	for len(b) > 0 {
		n := min(len(b), writeChunk)
		if err := s.stdin.SetWriteDeadline(time.Now().Add(s.writeTimeout)); err != nil {
			return err
		}
		m, err := s.stdin.Write(b[:n])
		b = b[m:]
		if err != nil {
			return err
		}
	}
	return nil
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
	if n := s.dropped.Load(); n > 0 {
		log.Printf("session %s: dropped %d replies to the stdio server's requests (its stdin was not keeping up)", short(s.id), n)
	}
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
