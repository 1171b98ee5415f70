package testcluster

import (
	"os"
	"path/filepath"
	"strings"
)

// TailLogs returns the last n lines of every component's log.
func (c *Cluster) TailLogs(n int) string { return c.tailLogs(n) }

func (c *Cluster) tailLogs(n int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, p := range c.procs {
		b.WriteString(tailFile(p.logPath, n))
	}
	return b.String()
}

// ComponentLog returns the last n lines of one component's log (its name, as
// in Processes) that contain match ("" matches every line), across its
// restarts.
func (c *Cluster) ComponentLog(name, match string, n int) string {
	data, err := os.ReadFile(filepath.Join(c.Dir, name+".log"))
	if err != nil {
		return err.Error()
	}
	var lines []string
	for line := range strings.Lines(string(data)) {
		if strings.Contains(line, match) {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines[max(len(lines)-n, 0):], "")
}

// LogMark is the end of a component's log now: what ComponentLogSince(name,
// mark) returns later is what it logged after this moment. 0 when it has no
// log yet.
func (c *Cluster) LogMark(name string) int64 {
	fi, err := os.Stat(filepath.Join(c.Dir, name+".log"))
	if err != nil {
		return 0
	}
	return fi.Size()
}

// ComponentLogSince returns all a component logged after mark (LogMark), across
// its restarts: each appends to the same file.
func (c *Cluster) ComponentLogSince(name string, mark int64) string {
	data, err := os.ReadFile(filepath.Join(c.Dir, name+".log"))
	if err != nil {
		return err.Error()
	}
	return string(data[min(mark, int64(len(data))):])
}
