package main

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"
)

// usage stops the sampler after a last reading and counts the controller's
// requests in [from, to+tail). CPU seconds are from the sampler's first
// reading, or from 0 (fromZero) for a window that starts with the process.
func (b *bench) usage(ctx context.Context, smp *sampler, from, to time.Time) (usage, error) {
	time.Sleep(tail) // the status write that follows Running counts
	if cpu, rss, err := procUsage(b.ctrl.PID()); err == nil {
		smp.add(cpu, rss)
	}
	smp.stop()
	if err := b.flushAudit(ctx); err != nil {
		return usage{}, err
	}
	reqs := b.requestsBetween(from, to.Add(tail))
	t := tallyRequests(reqs)
	u := usage{Seconds: round1(to.Sub(from).Seconds()), Requests: t.c, PeakRSSBytes: int64(smp.peak)}
	byRes := map[string]int{}
	for k, n := range t.readVerbs {
		byRes[k] += n
	}
	for k, n := range t.writeVerbs {
		byRes[k] += n
	}
	u.ByResource = counted(byRes)
	for _, e := range reqs {
		if e.Resource == "pods" || e.Resource == "nodes" {
			u.PerPodOrNode++
		}
	}
	u.CPUSeconds = math.Round((smp.cpu-max(smp.cpu0, 0))*100) / 100
	if w := to.Add(tail).Sub(from).Seconds(); w > 0 {
		u.StatusPer5s = math.Round(t.c.ClusterOperator.Writes/w*5*100) / 100
	}
	return u, nil
}

// printScale prints the scale group: one column per size, the large size
// judged against the small one.
func (r *results) printScale(out *strings.Builder, ref *results) {
	if len(r.Scale) == 0 {
		return
	}
	runs := r.Scale
	fmt.Fprintf(out, "\nScale (fresh cluster per size; kube-controller-manager and kube-scheduler at %d QPS)\n", r.Options.ScaleQPS)
	row := func(label string, f func(s scaleRun) string, judge string) {
		fmt.Fprintf(out, "  %-62s", label)
		for _, s := range runs {
			fmt.Fprintf(out, "  %18s", f(s))
		}
		if judge != "" {
			fmt.Fprintf(out, "  %s", judge)
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintf(out, "  %-62s", "nodes")
	for _, s := range runs {
		fmt.Fprintf(out, "  %18d", s.Nodes)
	}
	fmt.Fprintln(out)
	small, large := runs[0], runs[len(runs)-1]
	within := func(a, b float64) string {
		if b == 0 {
			return ""
		}
		pct := (a/b - 1) * 100
		verdict := "met"
		if pct > 10 {
			verdict = "NOT MET"
		}
		return fmt.Sprintf("(%+.0f%%, target ≤ +10%%: %s)", pct, verdict)
	}
	nonStatus := func(u usage) float64 {
		return u.Requests.Total.Reads + u.Requests.Total.Writes - u.Requests.ClusterOperator.Writes
	}
	row("cluster start, nodes Ready (s)", func(s scaleRun) string { return fmt.Sprintf("%.1f", s.NodesReadyS) }, "")
	row("first apply -> Running, every pod available (s)", func(s scaleRun) string { return fmt.Sprintf("%.1f", s.FirstRunningS) }, "")
	row("version change -> Running after the rolling update (s)", func(s scaleRun) string { return fmt.Sprintf("%.1f", s.UpgradeS) }, "")
	// With many nodes the DaemonSet controller replaces a pod as soon as
	// another is available: the 33% waves overlap into one long dip.
	row("  unavailability dips seen (33% waves; overlapping at scale)", func(s scaleRun) string { return fmt.Sprint(s.UpgradeWaves) }, "")
	row("version change, old process: DaemonSet writes (the annotation; no pod rolls)", func(s scaleRun) string { return num(s.VersionWrites) }, "")
	for _, p := range []struct {
		name string
		get  func(s scaleRun) usage
	}{{"first rollout", func(s scaleRun) usage { return s.FirstRollout }}, {"upgrade rollout", func(s scaleRun) usage { return s.Upgrade }}} {
		row(p.name+": requests, total r/w", func(s scaleRun) string { return pair(p.get(s).Requests.Total) }, "")
		row(p.name+": requests other than status writes", func(s scaleRun) string { return num(nonStatus(p.get(s))) },
			within(nonStatus(p.get(large)), nonStatus(p.get(small))))
		dsWrites := "met"
		for _, s := range runs {
			if p.get(s).Requests.DaemonSet.Writes != 1 {
				dsWrites = "NOT MET"
			}
		}
		row(p.name+": DaemonSet r/w", func(s scaleRun) string { return pair(p.get(s).Requests.DaemonSet) }, "(target: 1 write: "+dsWrites+")")
		row(p.name+": ClusterOperator r/w (status: ≤ 1 write per 5 s)", func(s scaleRun) string {
			u := p.get(s)
			return fmt.Sprintf("%s (%.2f/5s)", pair(u.Requests.ClusterOperator), u.StatusPer5s)
		}, "")
		row(p.name+": Event r/w, other r/w", func(s scaleRun) string {
			u := p.get(s)
			return pair(u.Requests.Event) + ", " + pair(u.Requests.Other)
		}, "")
		// One pod read at process start is library-go's lookup of its own
		// pod (a list without POD_NAME, as here; a get with it, as the
		// shipped Deployment sets it): flat, not per pod.
		perPod := "met"
		if p.get(large).PerPodOrNode > p.get(small).PerPodOrNode || p.get(large).PerPodOrNode > 1 {
			perPod = "NOT MET"
		}
		row(p.name+": requests on pods or nodes", func(s scaleRun) string { return fmt.Sprint(p.get(s).PerPodOrNode) },
			"(target: none per pod or node, flat: "+perPod+")")
		row(p.name+": controller CPU seconds", func(s scaleRun) string { return fmt.Sprintf("%.2f", p.get(s).CPUSeconds) }, "")
		row(p.name+": controller peak RSS", func(s scaleRun) string { return mib(p.get(s).PeakRSSBytes) },
			within(float64(p.get(large).PeakRSSBytes), float64(p.get(small).PeakRSSBytes)))
	}
	row("controller RSS, idle after the first rollout", func(s scaleRun) string { return mib(s.IdleRSSBytes) },
		within(float64(large.IdleRSSBytes), float64(small.IdleRSSBytes)))
	printMemory(row, runs)
	row("controller CPU seconds, first rollout + upgrade", func(s scaleRun) string {
		return fmt.Sprintf("%.2f", s.FirstRollout.CPUSeconds+s.Upgrade.CPUSeconds)
	}, cpuPerRollout(runs))
	row("drift-delete (orphaning), gone -> recreated, p50 ms", func(s scaleRun) string { return fmt.Sprintf("%.1f", s.DriftP50Ms) }, "")
	row("  floor (ideal watcher) p50 ms", func(s scaleRun) string { return fmt.Sprintf("%.1f", s.FloorP50Ms) }, "")
	row("  p50 / floor p50", func(s scaleRun) string { return fmt.Sprintf("%.2f× (n=%d)", s.DriftRatio, s.DriftSamples) }, "")
	row("  requests per repair, r/w: DS, CO, Event, other", func(s scaleRun) string {
		c := s.DriftRequests
		return fmt.Sprintf("%s %s %s %s", pair(c.DaemonSet), pair(c.ClusterOperator), pair(c.Event), pair(c.Other))
	}, "")
	if ref != nil && len(ref.Scale) > 0 {
		rl := ref.Scale[len(ref.Scale)-1]
		fmt.Fprintf(out, "  reference (%d nodes): first apply %.1f s, upgrade %.1f s, upgrade requests %s, peak RSS %s, drift %.2f× the floor\n",
			rl.Nodes, rl.FirstRunningS, rl.UpgradeS, pair(rl.Upgrade.Requests.Total), mib(rl.Upgrade.PeakRSSBytes), rl.DriftRatio)
	}
	for _, p := range []struct {
		name string
		get  func(s scaleRun) usage
	}{{"first rollout", func(s scaleRun) usage { return s.FirstRollout }}, {"upgrade rollout", func(s scaleRun) usage { return s.Upgrade }}} {
		for _, s := range runs {
			fmt.Fprintf(out, "  %s at %d nodes, by resource: %s\n", p.name, s.Nodes, orNone(p.get(s).ByResource))
		}
	}
}
