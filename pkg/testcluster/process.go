package testcluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// stopGrace is how long a component gets to exit after SIGTERM before SIGKILL.
const stopGrace = 10 * time.Second

// Process identifies one OS process the cluster started.
type Process struct {
	Name string
	PID  int
}

// child is one OS process started by this package, with a single way to end
// it in order: stop cancels the context exec.Cmd was created with, Cmd.Cancel
// then sends SIGTERM, and once WaitDelay (the grace period) has passed
// without an exit, exec.Cmd sends SIGKILL itself. Only this PID is ever
// signalled, and it is reaped before stop or kill returns.
type child struct {
	cmd    *exec.Cmd
	cancel context.CancelFunc
	done   chan struct{} // closed once the process has exited and been reaped
	err    error         // Wait's result, valid after done is closed
}

// childSpec says how to start a child.
type childSpec struct {
	bin  string
	args []string
	env  []string // added to this process's environment
	out  *os.File // stdout and stderr; closed when the child has exited
	// grace is how long SIGTERM gets before SIGKILL.
	grace time.Duration
	// ownGroup puts the child in a process group of its own, so that a
	// terminal's Ctrl-C does not reach it and shutdown happens through stop.
	ownGroup bool
}

// startChild launches the process. Pdeathsig makes the kernel kill it should
// this process die without stopping it (a test binary killed by a timeout, a
// SIGKILL). The kernel ties Pdeathsig to the forking thread, and Go retires a
// thread only when a goroutine locked to it (runtime.LockOSThread) exits: do
// not start children from such goroutines.
func startChild(s childSpec) (*child, error) {
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, s.bin, s.args...)
	if len(s.env) > 0 {
		cmd.Env = append(os.Environ(), s.env...)
	}
	cmd.Stdout, cmd.Stderr = s.out, s.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: s.ownGroup}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = s.grace
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, err
	}
	c := &child{cmd: cmd, cancel: cancel, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		cancel() // releases the context; the process is gone, nothing is signalled
		if s.out != nil {
			_ = s.out.Close()
		}
		close(c.done)
	}()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// exited reports whether the process has exited and been reaped.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop ends the process in order (SIGTERM, SIGKILL after the grace period)
// and reports whether the SIGKILL was needed.
func (c *child) stop() (killed bool) {
	if c.exited() {
		return false
	}
	c.cancel()
	<-c.done
	ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// kill sends SIGKILL at once, as a crash would, and waits for the exit.
func (c *child) kill() {
	if c.exited() {
		return
	}
	_ = c.cmd.Process.Kill() // fails only when the process is already gone
	<-c.done
}

// process is one running component of the cluster. Its output goes to
// <dir>/<name>.log.
type process struct {
	name    string
	bin     string
	args    []string
	env     []string // added to this process's environment
	logPath string
	grace   time.Duration // SIGTERM -> SIGKILL

	child *child
}

func newProcess(name, bin, logDir string, grace time.Duration, args ...string) *process {
	return &process{name: name, bin: bin, args: args, grace: grace, logPath: filepath.Join(logDir, name+".log")}
}

// start launches the process in its own process group (see childSpec).
func (p *process) start() error {
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open %s log: %w", p.name, err)
	}
	c, err := startChild(childSpec{bin: p.bin, args: p.args, env: p.env, out: logFile, grace: p.grace, ownGroup: true})
	if err != nil {
		_ = logFile.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.child = c
	return nil
}

func (p *process) pid() int {
	if p.child == nil {
		return 0
	}
	return p.child.pid()
}

// running reports whether the process was started and has not exited.
func (p *process) running() bool { return p.child != nil && !p.child.exited() }

// stop sends SIGTERM, and SIGKILL after the process's grace period.
func (p *process) stop() {
	if p.child != nil {
		p.child.stop()
	}
}

// exitError describes an unexpected exit, with the end of the log.
func (p *process) exitError() error {
	return fmt.Errorf("%s exited: %v\n%s", p.name, p.child.err, tailFile(p.logPath, 30))
}

// tailFile returns the last n lines of a file, labelled with its name, or a note
// when it cannot be read.
func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("--- %s: %v", filepath.Base(path), err)
	}
	data = bytes.TrimRight(data, "\n")
	lines := bytes.Split(data, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "--- last %d lines of %s:\n", len(lines), filepath.Base(path))
	for _, l := range lines {
		b.Write(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// logf writes a progress line when a writer was configured.
func logf(w io.Writer, format string, args ...any) {
	if w == nil {
		return
	}
	fmt.Fprintf(w, "testcluster: "+format+"\n", args...)
}

// Command is a helper process started beside the cluster (the bench's ideal
// watcher, for one), run like the cluster's components: its output goes to
// <logDir>/<name>.log, it dies with its parent, and Stop ends exactly this PID.
type Command struct{ p *process }

// StartCommand starts bin with args.
func StartCommand(name, bin, logDir string, args ...string) (*Command, error) {
	return StartCommandWithEnv(name, bin, logDir, nil, args...)
}

// StartCommandWithEnv starts bin with args, and env added to this process's
// environment.
func StartCommandWithEnv(name, bin, logDir string, env []string, args ...string) (*Command, error) {
	p := newProcess(name, bin, logDir, stopGrace, args...)
	p.env = env
	if err := p.start(); err != nil {
		return nil, err
	}
	return &Command{p: p}, nil
}

// PID is the process's ID.
func (c *Command) PID() int { return c.p.pid() }

// Log is the path of the process's combined output.
func (c *Command) Log() string { return c.p.logPath }

// Exited returns nil while the process runs, and once it has exited, an
// error saying how, with the end of its log.
func (c *Command) Exited() error {
	if c.p.running() {
		return nil
	}
	return c.p.exitError()
}

// Stop ends the process (SIGTERM, SIGKILL after the grace period). It
// returns the exit error if the process had exited by itself before.
func (c *Command) Stop() error {
	if err := c.Exited(); err != nil {
		return err
	}
	c.p.stop()
	return nil
}
