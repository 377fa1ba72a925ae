package main

// A child that exits while a process it started still holds its stdout: a helper a wrapper put in
// the background, or one that left the child's process group (setsid). The session ends with the
// child, not when that process lets go of the pipe: else its slot and its requests are held forever.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// leaveHelper runs in the child (BRIDGE_TEST_CHILD is set). With BRIDGE_TEST_HELPER=FILE it starts
// a helper that holds the child's stdout (its stdin and stderr are /dev/null) for ten minutes,
// writes the helper's pid to FILE and returns to the ordinary child, which exits on "exit". With
// BRIDGE_TEST_HELPER_SETSID=1 the helper leaves the child's process group, out of reach of a kill
// to the group.
func leaveHelper() {
	file := os.Getenv("BRIDGE_TEST_HELPER")
	if file == "" {
		return
	}
	helper := exec.Command("sleep", "600")
	helper.Stdout = os.Stdout
	helper.SysProcAttr = &syscall.SysProcAttr{Setsid: os.Getenv("BRIDGE_TEST_HELPER_SETSID") == "1"}
	if err := helper.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "starting the helper:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(file, []byte(strconv.Itoa(helper.Process.Pid)), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "writing the helper's pid:", err)
		os.Exit(1)
	}
}

// gone: the process has exited (a zombie nobody reaped counts: it holds no pipe).
func gone(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, rest, _ := strings.Cut(string(stat), ") ") // the name, in parentheses, may hold spaces
	return strings.HasPrefix(rest, "Z") || strings.HasPrefix(rest, "X")
}

func TestChildExitsWhileItsStdoutIsHeld(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setsid bool
	}{
		{"helper in its process group", false},
		{"helper that left its process group", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "helper.pid")
			env := []string{"BRIDGE_TEST_HELPER=" + pidFile}
			if tc.setsid {
				env = append(env, "BRIDGE_TEST_HELPER_SETSID")
			}
			b, srv := startBridge(t, 1, env...)
			s := initialize(t, b, srv.URL) // the helper runs, and its pid is written, before the answer
			raw, err := os.ReadFile(pidFile)
			if err != nil {
				t.Fatal(err)
			}
			helper, _ := strconv.Atoi(string(raw))
			// Registered after startBridge, so it runs first: no sleep outlives the test, and with the
			// helper gone the bridge's own cleanup is quick even when the session hangs.
			t.Cleanup(func() { _ = syscall.Kill(helper, syscall.SIGKILL) })

			// As for a child that leaves nothing behind: the pending request gets an error naming
			// the exit, the session is gone and its slot free. A hang, not a timing test: 10 s.
			_, body, err := postWithin(10*time.Second, srv.URL, s.id, `{"jsonrpc":"2.0","id":7,"method":"exit"}`, "application/json")
			if err != nil {
				t.Fatalf("no answer 10 s after the stdio server exited (a process it started holds its stdout): %v", err)
			}
			if !strings.Contains(string(body), `"id":7`) || !strings.Contains(string(body), "MCP session ended: the stdio server exited (exit status 3)") {
				t.Fatalf("child exit: %q", body)
			}
			select {
			case <-s.exited:
			default:
				t.Fatal("the session ended before its child was seen to exit")
			}
			if sessionsLeft(b, 5*time.Second) > 0 {
				t.Fatal("the ended session still holds its slot (--max-sessions)")
			}
			if rsp, body := post(t, srv.URL, s.id, `{"jsonrpc":"2.0","id":8,"method":"ping"}`, "application/json"); rsp.StatusCode != 404 {
				t.Fatalf("the ended session answers %d %q", rsp.StatusCode, body)
			}
			if tc.setsid {
				return // out of the bridge's reach: the cleanup above kills it
			}
			// A helper left in the group of a server that exited is a leftover: it is killed.
			for deadline := time.Now().Add(5 * time.Second); !gone(helper); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the helper (pid %d) in the exited server's process group still runs", helper)
				}
			}
		})
	}
}
