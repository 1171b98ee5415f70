package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// userHZ is the kernel's clock tick for /proc/PID/stat's CPU times: 100 on
// every Linux architecture Go supports (the value Prometheus's procfs, behind
// process_cpu_seconds_total, assumes too).
const userHZ = 100

// procUsage reads the process's CPU seconds (user and system) and resident
// memory from /proc/PID/stat: the sources of process_cpu_seconds_total and
// process_resident_memory_bytes, read without asking the process, so that
// sampling adds no work to what is measured.
func procUsage(pid int) (cpuSeconds, rssBytes float64, err error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: the
	// fields counted here start after its closing one, at field 3.
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	const utime, stime, rss = 14 - 3, 15 - 3, 24 - 3
	if len(f) <= rss {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %d fields after the command name", pid, len(f))
	}
	var v [3]float64
	for j, k := range []int{utime, stime, rss} {
		if v[j], err = strconv.ParseFloat(f[k], 64); err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/stat field %d: %w", pid, k+3, err)
		}
	}
	return (v[0] + v[1]) / userHZ, v[2] * float64(os.Getpagesize()), nil
}

// sampler reads the controller's CPU seconds and RSS every sampleEvery, and
// scrapes its /metrics every scrapeEvery.
type sampler struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	cpu0   float64 // first reading
	cpu    float64 // last reading
	peak   float64
}

func (b *bench) sample(ctx context.Context) *sampler {
	sctx, cancel := context.WithCancel(ctx)
	smp := &sampler{cancel: cancel, done: make(chan struct{}), cpu0: -1}
	ctrl := b.ctrl
	go func() {
		defer close(smp.done)
		t := time.NewTicker(sampleEvery)
		defer t.Stop()
		lastScrape := time.Now()
		for {
			if cpu, rss, err := procUsage(ctrl.PID()); err == nil {
				smp.add(cpu, rss)
			}
			if time.Since(lastScrape) >= scrapeEvery {
				_, _ = ctrl.Scrape(sctx)
				lastScrape = time.Now()
			}
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return smp
}

func (smp *sampler) add(cpu, rss float64) {
	smp.mu.Lock()
	defer smp.mu.Unlock()
	if smp.cpu0 < 0 {
		smp.cpu0 = cpu
	}
	smp.cpu, smp.peak = cpu, math.Max(smp.peak, rss)
}

// fromZero counts CPU seconds from 0, the process's start.
func (smp *sampler) fromZero() {
	smp.mu.Lock()
	defer smp.mu.Unlock()
	smp.cpu0 = 0
}

func (smp *sampler) stop() {
	smp.cancel()
	<-smp.done
}
