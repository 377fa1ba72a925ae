// codemode-bridge serves one stdio MCP server over Streamable HTTP. The operator copies this
// static binary into the server's own image (any image: node, python/uvx, distroless) and runs
//
//	/codemode-bridge/bridge --listen :8080 -- <command> <args...>
//
// Every MCP session (an initialize without Mcp-Session-Id) starts its own child process: a stdio
// server serves exactly one client, and each gateway replica holds its own session. The child's
// stderr goes to the container log, never to a client. When a child exits, its session ends and
// pending requests get a JSON-RPC error that says so.
//
// `bridge install DEST` copies the binary itself to DEST (the init container's job: the bridge
// image has no shell and no cp).
//
// Only the Go standard library: the official Go SDK's Streamable HTTP handler terminates the
// protocol in an mcp.Server (it cannot forward raw messages to a child), so a forwarding bridge
// would have to rebuild its session handling anyway.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("codemode-bridge: ")
	if len(os.Args) >= 2 && os.Args[1] == "install" {
		if len(os.Args) != 3 {
			log.Fatal("usage: bridge install DEST")
		}
		if err := install(os.Args[2]); err != nil {
			log.Fatal(err)
		}
		return
	}
	listen := flag.String("listen", ":8080", "address to serve MCP (POST/GET/DELETE /mcp) and /healthz on")
	maxSessions := flag.Int("max-sessions", 8, "most concurrent MCP sessions (child processes); more are refused with 503")
	idle := flag.Duration("idle-timeout", 10*time.Minute, "a session with no request for this long is ended (its client went away)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: bridge [--listen :8080] [--max-sessions 8] [--idle-timeout 10m] -- COMMAND [ARGS...]\n       bridge install DEST")
		flag.PrintDefaults()
	}
	flag.Parse()
	argv := flag.Args()
	if len(argv) == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if *maxSessions < 1 {
		log.Fatal("--max-sessions must be at least 1")
	}
	os.Exit(run(*listen, argv, *maxSessions, *idle))
}

func run(listen string, argv []string, maxSessions int, idle time.Duration) int {
	b := newBridge(argv, maxSessions, idle)
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if b.closing() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.Handle("/mcp", b)
	srv := &http.Server{Addr: listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- srv.ListenAndServe() }()
	log.Printf("serving %q on %s (max %d sessions)", argv[0], listen, maxSessions)
	go b.reapIdle()
	select {
	case err := <-done:
		log.Printf("server stopped: %v", err)
		b.closeAll("the bridge stopped")
		return 1
	case sig := <-stop:
		log.Printf("received %s: ending sessions", sig)
	}
	// Children first, so open requests and streams end with an error instead of hanging.
	b.closeAll("the bridge is shutting down")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		log.Printf("shutdown: %v", err)
	}
	return 0
}

func install(dest string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding my own binary: %w", err)
	}
	in, err := os.Open(self)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dest, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return fmt.Errorf("installing the bridge: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("installing the bridge: %w", err)
	}
	return out.Close()
}
