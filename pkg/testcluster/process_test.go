package testcluster

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func startTestChild(t *testing.T, script string, grace time.Duration) *child {
	t.Helper()
	out, err := os.Create(filepath.Join(t.TempDir(), "out.log"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := startChild(childSpec{bin: "/bin/sh", args: []string{"-c", script}, out: out, grace: grace})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.kill)
	return c
}

func TestChildStopsOnSIGTERMWithoutAKill(t *testing.T) {
	c := startTestChild(t, "exec sleep 60", 10*time.Second)
	began := time.Now()
	if killed := c.stop(); killed {
		t.Fatal("stop reported a SIGKILL for a process that exits on SIGTERM")
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("stop took %s for a process that exits on SIGTERM", took)
	}
	if c.stop() {
		t.Fatal("a second stop reported a kill")
	}
}

func TestChildIgnoringSIGTERMIsKilledAfterTheGrace(t *testing.T) {
	// The shell ignores SIGTERM and waits; the trap is set before "ready".
	c := startTestChild(t, "trap '' TERM; echo ready; while :; do sleep 0.1; done", 300*time.Millisecond)
	time.Sleep(200 * time.Millisecond) // let the shell install its trap
	began := time.Now()
	if killed := c.stop(); !killed {
		t.Fatal("stop did not report the SIGKILL it needed")
	}
	if took := time.Since(began); took < 300*time.Millisecond || took > 5*time.Second {
		t.Fatalf("stop took %s, want about the 300ms grace", took)
	}
}

func TestChildKillEndsAtOnce(t *testing.T) {
	c := startTestChild(t, "trap '' TERM; while :; do sleep 0.1; done", time.Minute)
	c.kill()
	if !c.exited() {
		t.Fatal("the process still runs after kill")
	}
}
