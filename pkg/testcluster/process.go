package testcluster

import (
	"bytes"
	"errors"
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

// process is one running component. Its output goes to <dir>/<name>.log.
type process struct {
	name    string
	bin     string
	args    []string
	logPath string

	cmd  *exec.Cmd
	log  *os.File
	done chan struct{} // closed once the process has exited and been reaped
	err  error         // exit status, valid after done is closed
}

func newProcess(name, bin, logDir string, args ...string) *process {
	return &process{name: name, bin: bin, args: args, logPath: filepath.Join(logDir, name+".log")}
}

// start launches the process. Pdeathsig makes the kernel kill it should this process
// die without running Stop (a test binary killed by a timeout, a SIGKILL). The
// kernel ties Pdeathsig to the forking thread, and Go retires a thread only when a
// goroutine locked to it (runtime.LockOSThread) exits: do not start clusters from
// such goroutines. Its own process group keeps a terminal's Ctrl-C away from the
// process, so that shutdown happens in order, through Stop.
func (p *process) start() error {
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open %s log: %w", p.name, err)
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.cmd, p.log, p.done, p.err = cmd, logFile, make(chan struct{}), nil
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return nil
}

func (p *process) pid() int {
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// running reports whether the process was started and has not exited.
func (p *process) running() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM, waits up to grace, then SIGKILLs. Only this PID is
// signalled; it is reaped before stop returns, so the PID no longer exists.
func (p *process) stop(grace time.Duration) error {
	if !p.running() {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("terminate %s (pid %d): %w", p.name, p.pid(), err)
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
		return nil
	case <-timer.C:
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s (pid %d): %w", p.name, p.pid(), err)
	}
	<-p.done
	return nil
}

// exitError describes an unexpected exit, with the end of the log.
func (p *process) exitError() error {
	return fmt.Errorf("%s exited: %v\n%s", p.name, p.err, tailFile(p.logPath, 30))
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
