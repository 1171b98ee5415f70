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
