package main

// The Streamable HTTP side: POST carries client messages (an initialize without a session id
// starts a session), GET opens the stream for messages the server starts, DELETE ends a session.

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"strings"
	"sync"
	"time"
)

const (
	sessionHeader   = "Mcp-Session-Id"
	maxRequestBytes = 16 << 20
)

type bridge struct {
	argv     []string
	max      int
	idle     time.Duration
	mu       sync.Mutex
	sessions map[string]*session
	shutdown bool
}

func newBridge(argv []string, max int, idle time.Duration) *bridge {
	return &bridge{argv: argv, max: max, idle: idle, sessions: map[string]*session{}}
}

func (b *bridge) closing() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.shutdown
}

func (b *bridge) closeAll(reason string) {
	b.mu.Lock()
	b.shutdown = true
	all := make([]*session, 0, len(b.sessions))
	for _, s := range b.sessions {
		all = append(all, s)
	}
	b.mu.Unlock()
	for _, s := range all {
		s.close(reason)
	}
	for _, s := range all {
		if !s.waitExit(6 * time.Second) {
			s.kill()
		}
	}
}

func (b *bridge) reapIdle() {
	for range time.Tick(b.idle/4 + time.Second) {
		cutoff := time.Now().Add(-b.idle).UnixNano()
		b.mu.Lock()
		var stale []*session
		for _, s := range b.sessions {
			if s.lastUsed.Load() < cutoff {
				stale = append(stale, s)
			}
		}
		b.mu.Unlock()
		for _, s := range stale {
			s.close(fmt.Sprintf("no request for %s", b.idle))
		}
	}
}

func (b *bridge) remove(s *session) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sessions[s.id] == s {
		delete(b.sessions, s.id)
	}
}

func (b *bridge) lookup(w http.ResponseWriter, r *http.Request) *session {
	id := r.Header.Get(sessionHeader)
	b.mu.Lock()
	s := b.sessions[id]
	b.mu.Unlock()
	if s == nil {
		// Logged (the id cut short), so a client's 404 can be told from one some other hop gave.
		log.Printf("%s for an unknown session %q: answered 404", r.Method, short(id))
		// 404 tells a Streamable HTTP client to start a new session.
		writeError(w, http.StatusNotFound, nil, -32001, "session not found (it ended, or the bridge restarted): initialize a new one")
		return nil
	}
	s.touch()
	return s
}

func (b *bridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		b.post(w, r)
	case http.MethodGet:
		if s := b.lookup(w, r); s != nil {
			b.stream(w, r, s)
		}
	case http.MethodDelete:
		if s := b.lookup(w, r); s != nil {
			s.close("the client ended the session")
			w.WriteHeader(http.StatusOK)
		}
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// parse splits a POST body into messages; batch is true for a JSON array.
func parse(body []byte) (msgs []json.RawMessage, envs []envelope, batch bool, err error) {
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		batch = true
		err = json.Unmarshal(body, &msgs)
	} else {
		msgs = []json.RawMessage{json.RawMessage(body)}
	}
	if err == nil && len(msgs) == 0 {
		err = errors.New("empty batch")
	}
	for _, m := range msgs {
		var e envelope
		if err == nil {
			if err = json.Unmarshal(m, &e); err == nil && e.Method == "" && len(e.ID) == 0 {
				err = errors.New("not a JSON-RPC message")
			}
		}
		envs = append(envs, e)
	}
	return msgs, envs, batch, err
}

func (b *bridge) post(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, nil, -32600, fmt.Sprintf("request body over %d bytes", maxRequestBytes))
		return
	}
	msgs, envs, batch, err := parse(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, nil, -32700, "parse error: "+err.Error())
		return
	}
	var s *session
	created := r.Header.Get(sessionHeader) == ""
	if created {
		if s = b.create(w, envs); s == nil {
			return
		}
		w.Header().Set(sessionHeader, s.id)
	} else if s = b.lookup(w, r); s == nil {
		return
	}
	var ids []json.RawMessage
	for _, e := range envs {
		if e.isRequest() {
			ids = append(ids, e.ID)
		}
	}
	responses := make(chan []byte, len(ids))
	if !s.expect(ids, responses) {
		writeError(w, http.StatusNotFound, nil, -32001, "session ended: "+s.reason)
		return
	}
	for _, m := range msgs {
		if err := s.send(r.Context(), m); err != nil {
			if errors.Is(err, errSessionEnded) && len(ids) > 0 {
				// A child that exits as it reads a message can end the session before the writer
				// reports the write: its requests have their answer from end (the reason, under
				// their ids), the same whichever came first.
				break
			}
			s.forget(ids)
			if created {
				// Nobody can use a session whose initialize never reached its server.
				s.abandon("its initialize could not be written to the stdio server: " + err.Error())
			}
			writeError(w, http.StatusBadGateway, nil, -32000, "could not write to the stdio server: "+err.Error())
			return
		}
	}
	if len(ids) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	var answered bool
	if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		answered = b.answerSSE(w, r, s, ids, responses)
	} else {
		answered = b.answerJSON(w, r, s, ids, responses, batch)
	}
	if created && !answered {
		// The client gave up before its initialize was answered (a timeout while the server was
		// slow to start): it cannot use this session, and with JSON answers it never even learnt
		// its id, so nobody would end it before the idle timeout. Reconnects under load piled
		// such sessions up to --max-sessions (and their processes up to the pod's PID limit).
		s.abandon("the client went away before its initialize was answered")
	}
}

// create starts a session for an initialize request (nothing else may open one).
func (b *bridge) create(w http.ResponseWriter, envs []envelope) *session {
	if len(envs) != 1 || envs[0].Method != "initialize" || !envs[0].isRequest() {
		writeError(w, http.StatusBadRequest, nil, -32600, "no Mcp-Session-Id header: the first request of a session must be a single initialize")
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shutdown {
		writeError(w, http.StatusServiceUnavailable, envs[0].ID, -32000, "the bridge is shutting down")
		return nil
	}
	if len(b.sessions) >= b.max {
		writeError(w, http.StatusServiceUnavailable, envs[0].ID, -32000, fmt.Sprintf("the bridge already serves its maximum of %d sessions (--max-sessions); retry later", b.max))
		return nil
	}
	s, err := startSession(rand.Text(), b.argv, fmt.Sprintf("%d of %d", len(b.sessions)+1, b.max), b.remove)
	if err != nil {
		writeError(w, http.StatusInternalServerError, envs[0].ID, -32000, err.Error())
		return nil
	}
	b.sessions[s.id] = s
	return s
}

// answerJSON writes the responses to ids as one JSON body; false when the client went away first.
func (b *bridge) answerJSON(w http.ResponseWriter, r *http.Request, s *session, ids []json.RawMessage, responses chan []byte, batch bool) bool {
	var out []json.RawMessage
	for range ids {
		select {
		case m := <-responses:
			out = append(out, m)
		case <-r.Context().Done():
			s.forget(ids)
			return false
		}
	}
	s.touch()
	w.Header().Set("Content-Type", "application/json")
	if batch {
		_ = json.NewEncoder(w).Encode(out)
	} else {
		_, _ = w.Write(out[0])
	}
	return true
}

// answerSSE streams the responses, and meanwhile messages the child starts (e.g. progress);
// false when the client went away before the last one.
func (b *bridge) answerSSE(w http.ResponseWriter, r *http.Request, s *session, ids []json.RawMessage, responses chan []byte) bool {
	sink := openStream(w, s, false)
	defer s.removeSink(sink)
	for left := len(ids); left > 0; {
		select {
		case m := <-responses:
			left--
			writeEvent(w, m)
		case m := <-sink:
			writeEvent(w, m)
		case <-r.Context().Done():
			s.forget(ids)
			return false
		}
	}
	s.touch()
	return true
}

// stream is the GET stream: messages the child starts, until the client or the session goes.
func (b *bridge) stream(w http.ResponseWriter, r *http.Request, s *session) {
	sink := openStream(w, s, true)
	defer s.removeSink(sink)
	for {
		select {
		case m := <-sink:
			writeEvent(w, m)
		case <-s.done:
			return
		case <-r.Context().Done():
			return
		}
	}
}

// openStream starts an SSE response and registers a sink for messages the child starts
// (first: the GET stream, preferred over POST streams).
func openStream(w http.ResponseWriter, s *session, first bool) chan []byte {
	sink := make(chan []byte, 64)
	s.addSink(sink, first)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flush(w)
	return sink
}

func writeEvent(w http.ResponseWriter, m []byte) {
	_, _ = fmt.Fprintf(w, "event: message\ndata: %s\n\n", m)
	flush(w)
}

func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func writeError(w http.ResponseWriter, status int, id json.RawMessage, code int, message string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(errorResponse(id, code, message))
}
