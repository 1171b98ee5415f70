package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

// excludedResources are requests the controller makes whatever it does:
// leader election (reported separately), and the delegated authentication
// and authorization of the bench's own /metrics scrapes.
var excludedResources = map[string]bool{"leases": true, "tokenreviews": true, "subjectaccessreviews": true}

// results is everything one run measured; it is printed and saved as JSON.
type results struct {
	Timestamp string `json:"timestamp"`
	Commit    string `json:"commit"` // of the module; "-dirty" when the tree had changes
	GoVersion string `json:"goVersion"`
	Cluster   string `json:"cluster"`
	Duration  string `json:"duration"`

	FirstApply firstApply  `json:"firstApply"`
	Latencies  []latency   `json:"latencies"`
	Requests   []requests  `json:"requestsPerAction"`
	Storm      storm       `json:"eventStorm"`
	Burst      burst       `json:"configBurst"`
	Memory     []memory    `json:"memory"`
	Fire       fire        `json:"fsmFire"`
	Excluded   string      `json:"excluded"`
	Notes      []string    `json:"notes,omitempty"`
	Options    optionsJSON `json:"options"`

	ClutterSeconds         float64 `json:"clutterCreateSeconds"`
	LeaseRequestsPerMinute float64 `json:"leaseRequestsPerMinute"`
}

type optionsJSON struct {
	Nodes   int    `json:"nodes"`
	Trials  int    `json:"driftTrials"`
	Toggles int    `json:"toggleTrials"`
	Noops   int    `json:"noopTrials"`
	Storm   int    `json:"stormUpdates"`
	Burst   int    `json:"burstToggles"`
	Clutter int    `json:"clutterObjects"`
	Outages int    `json:"outages"`
	Outage  string `json:"outageDuration"`
	// Only lists the steps run when not all were (-only).
	Only string `json:"only,omitempty"`
}

type firstApply struct {
	Description string  `json:"description"`
	CreatedMs   float64 `json:"createdMs"`
	RunningMs   float64 `json:"runningMs"`
}

// latency is one reaction time over its trials, in milliseconds.
type latency struct {
	Name      string    `json:"name"`
	N         int       `json:"n"`
	P50Ms     float64   `json:"p50Ms"`
	P95Ms     float64   `json:"p95Ms"`
	MaxMs     float64   `json:"maxMs"`
	SamplesMs []float64 `json:"samplesMs"`
}

// requests is the controller's API requests for one kind of action, as the
// mean per trial; reads are get/list/watch, writes the rest.
type requests struct {
	Action          string   `json:"action"`
	Trials          int      `json:"trials"`
	Reads           float64  `json:"readsPerTrial"`
	Writes          float64  `json:"writesPerTrial"`
	DaemonSetWrites float64  `json:"daemonSetWritesPerTrial"`
	StatusWrites    float64  `json:"statusWritesPerTrial"`
	EventWrites     float64  `json:"eventWritesPerTrial"`
	OtherWrites     float64  `json:"otherWritesPerTrial"`
	ExpectZero      bool     `json:"expectZeroWrites"`
	WritesPerTrial  []int    `json:"writesPerTrialSamples"`
	ReadVerbs       []string `json:"reads"`  // "verb resource" with counts, over all trials
	WriteVerbs      []string `json:"writes"` // idem
}

type storm struct {
	Updates          int      `json:"statusUpdates"`
	Conflicts        int      `json:"conflicts"`
	Seconds          float64  `json:"seconds"`
	Actions          float64  `json:"controllerActions"`
	Transitions      float64  `json:"controllerTransitions"`
	DriftEvents      float64  `json:"controllerDriftEvents"`
	ControllerReads  int      `json:"controllerReads"`
	ControllerWrites int      `json:"controllerWrites"`
	Writes           []string `json:"writes,omitempty"`
}

type burst struct {
	Toggles         int      `json:"toggles"`
	Seconds         float64  `json:"seconds"`
	FinalEnabled    bool     `json:"finalEnabled"`
	Correct         bool     `json:"finalStateCorrect"`
	ConvergedAfterS float64  `json:"convergedAfterLastToggleSeconds"`
	Applies         float64  `json:"applies"`
	Deletes         float64  `json:"deletes"`
	Failed          float64  `json:"failedActions"`
	Reads           int      `json:"controllerReads"`
	Writes          int      `json:"controllerWrites"`
	DaemonSetWrites int      `json:"daemonSetWrites"`
	StatusWrites    int      `json:"statusWrites"`
	EventWrites     int      `json:"eventWrites"`
	WriteVerbs      []string `json:"daemonSetWriteVerbs"`
}

type memory struct {
	Label          string `json:"label"`
	RSSBytes       int64  `json:"rssBytes"`
	HeapInuseBytes int64  `json:"heapInuseBytes"`
}

type fire struct {
	Command     string  `json:"command"`
	Iterations  int     `json:"iterations"`
	NsPerOp     float64 `json:"nsPerOp"`
	BytesPerOp  int64   `json:"bytesPerOp"`
	AllocsPerOp int64   `json:"allocsPerOp"`
}

func newResults(o options) *results {
	return &results{
		Timestamp: time.Now().UTC().Format(time.RFC3339),
		GoVersion: runtime.Version(),
		Excluded:  "lease requests (leader election, reported apart) and tokenreviews/subjectaccessreviews (authentication of the bench's /metrics scrapes)",
		Options: optionsJSON{Nodes: o.nodes, Trials: o.trials, Toggles: o.toggles, Noops: o.noops,
			Storm: o.storm, Burst: o.burst, Clutter: o.clutter, Outages: o.outages, Outage: o.outage.String(), Only: o.only},
	}
}

func (r *results) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

func ms(d time.Duration) float64 { return math.Round(float64(d.Microseconds())/10) / 100 }

// percentile is the nearest-rank percentile of sorted samples.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func (r *results) addLatency(name string, samples []time.Duration) {
	l := latency{Name: name, N: len(samples)}
	for _, s := range samples {
		l.SamplesMs = append(l.SamplesMs, ms(s))
	}
	sorted := slices.Clone(l.SamplesMs)
	slices.Sort(sorted)
	l.P50Ms, l.P95Ms, l.MaxMs = percentile(sorted, 0.50), percentile(sorted, 0.95), percentile(sorted, 1)
	r.Latencies = append(r.Latencies, l)
}

// tally sorts a set of requests into reads and writes.
type tally struct {
	reads, writes  int
	byResource     map[string]int // writes per resource[/subresource]
	readVerbs      map[string]int // "verb resource" -> count
	writeVerbs     map[string]int
	detail         []string // each write, "verb resource/name"
	daemonSetVerbs []string
}

func tallyRequests(events []testcluster.AuditEvent) tally {
	t := tally{byResource: map[string]int{}, readVerbs: map[string]int{}, writeVerbs: map[string]int{}}
	dsVerbs := map[string]int{}
	for _, e := range events {
		if excludedResources[e.Resource] {
			continue
		}
		res := e.Resource
		if res == "" {
			res = e.RequestURI // discovery and other non-resource requests
			if i := strings.IndexByte(res, '?'); i >= 0 {
				res = res[:i]
			}
		}
		if e.Subresource != "" {
			res += "/" + e.Subresource
		}
		key := e.Verb + " " + res
		if e.IsWrite() {
			t.writes++
			t.byResource[res]++
			t.writeVerbs[key]++
			t.detail = append(t.detail, fmt.Sprintf("%s %s/%s (%d)", e.Verb, res, e.Name, e.Code))
			if e.Resource == "daemonsets" {
				dsVerbs[e.Verb]++
			}
		} else {
			t.reads++
			t.readVerbs[key]++
		}
	}
	t.daemonSetVerbs = counted(dsVerbs)
	return t
}

// counted renders a count map as sorted "key ×n" strings.
func counted(m map[string]int) []string {
	var out []string
	for k, n := range m {
		out = append(out, fmt.Sprintf("%s ×%d", k, n))
	}
	sort.Strings(out)
	return out
}

func (r *results) addRequests(action string, perTrial [][]testcluster.AuditEvent, expectZero bool) {
	row := requests{Action: action, Trials: len(perTrial), ExpectZero: expectZero}
	reads, writes := map[string]int{}, map[string]int{}
	var ds, status, events, other int
	var totalReads, totalWrites int
	for _, reqs := range perTrial {
		t := tallyRequests(reqs)
		totalReads += t.reads
		totalWrites += t.writes
		row.WritesPerTrial = append(row.WritesPerTrial, t.writes)
		for res, n := range t.byResource {
			switch res {
			case "daemonsets":
				ds += n
			case "clusteroperators/status":
				status += n
			case "events":
				events += n
			default:
				other += n
			}
		}
		for k, n := range t.readVerbs {
			reads[k] += n
		}
		for k, n := range t.writeVerbs {
			writes[k] += n
		}
	}
	per := func(n int) float64 {
		if len(perTrial) == 0 {
			return 0
		}
		return math.Round(float64(n)/float64(len(perTrial))*100) / 100
	}
	row.Reads, row.Writes = per(totalReads), per(totalWrites)
	row.DaemonSetWrites, row.StatusWrites, row.EventWrites, row.OtherWrites = per(ds), per(status), per(events), per(other)
	row.ReadVerbs, row.WriteVerbs = counted(reads), counted(writes)
	if expectZero && totalWrites > 0 {
		r.note("%s: %d write(s) where none is allowed: %s", action, totalWrites, strings.Join(row.WriteVerbs, ", "))
	}
	r.Requests = append(r.Requests, row)
}

// addResyncRequests adds the steady-state resync row: the quiet window's
// requests divided by the resyncs in it.
func (r *results) addResyncRequests(reqs []testcluster.AuditEvent, resyncs int, window time.Duration) {
	t := tallyRequests(reqs)
	per := func(n int) float64 { return math.Round(float64(n)/float64(resyncs)*100) / 100 }
	row := requests{
		Action:          fmt.Sprintf("steady-state resync (%d resyncs in %s)", resyncs, window.Round(time.Second)),
		Trials:          resyncs,
		Reads:           per(t.reads),
		Writes:          per(t.writes),
		DaemonSetWrites: per(t.byResource["daemonsets"]),
		StatusWrites:    per(t.byResource["clusteroperators/status"]),
		EventWrites:     per(t.byResource["events"]),
		ExpectZero:      true,
		ReadVerbs:       counted(t.readVerbs),
		WriteVerbs:      counted(t.writeVerbs),
	}
	row.OtherWrites = per(t.writes) - row.DaemonSetWrites - row.StatusWrites - row.EventWrites
	if t.writes > 0 {
		r.note("steady-state resync: %d write(s) where none is allowed: %s", t.writes, strings.Join(row.WriteVerbs, ", "))
	}
	r.Requests = append(r.Requests, row)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func (r *results) print(out io.Writer) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "\nruntime-extractor-controller bench — %s, commit %s, %s, %s\n", r.Timestamp, r.Commit, r.GoVersion, r.Cluster)
	if r.Options.Only != "" {
		fmt.Fprintf(w, "\nOnly: %s\n", r.Options.Only)
	}
	if r.FirstApply.Description != "" {
		fmt.Fprintf(w, "\nFirst apply (%s):\t%.0f ms / %.0f ms\n", r.FirstApply.Description, r.FirstApply.CreatedMs, r.FirstApply.RunningMs)
	}

	if len(r.Latencies) > 0 {
		fmt.Fprintln(w, "\nLatency (external write -> change seen by a watch)\tn\tp50 ms\tp95 ms\tmax ms")
		for _, l := range r.Latencies {
			fmt.Fprintf(w, "  %s\t%d\t%.1f\t%.1f\t%.1f\n", l.Name, l.N, l.P50Ms, l.P95Ms, l.MaxMs)
		}
	}
	if len(r.Requests) > 0 {
		r.printRequests(w)
	}

	if s := r.Storm; s.Updates > 0 {
		fmt.Fprintf(w, "\nEvent storm: %d status-only DaemonSet updates in %.1f s (%d conflicts)\n", s.Updates, s.Seconds, s.Conflicts)
		fmt.Fprintf(w, "  controller actions (applies+deletes)\t%.0f\t(expected 0)\n", s.Actions)
		fmt.Fprintf(w, "  controller writes / reads\t%d / %d\t(expected 0 writes)\n", s.ControllerWrites, s.ControllerReads)
		fmt.Fprintf(w, "  controller transitions / drift events\t%.0f / %.0f\n", s.Transitions, s.DriftEvents)
	}
	if r.Burst.Toggles > 0 {
		r.printBurst(w)
	}
	if len(r.Memory) > 0 {
		fmt.Fprintf(w, "\nMemory (median of 5 samples)\tRSS\tGo heap in use\n")
		for _, m := range r.Memory {
			fmt.Fprintf(w, "  %s\t%s\t%s\n", m.Label, mib(m.RSSBytes), mib(m.HeapInuseBytes))
		}
		fmt.Fprintf(w, "  (clutter: %d DaemonSets + %d ConfigMaps of 4 KiB in %s, created in %.1f s)\n",
			r.Options.Clutter, r.Options.Clutter, "openshift-insights", r.ClutterSeconds)
	}
	if f := r.Fire; f.Command != "" {
		fmt.Fprintf(w, "\nfsm Fire\t%.1f ns/op\t%d B/op\t%d allocs/op\t(%s)\n", f.NsPerOp, f.BytesPerOp, f.AllocsPerOp, f.Command)
	}
	_ = w.Flush()

	if len(r.Requests) > 0 {
		fmt.Fprintln(out, "\nRequests by kind, over all trials of each action:")
	}
	for _, q := range r.Requests {
		fmt.Fprintf(out, "  %s\n    reads:  %s\n    writes: %s\n", q.Action, orNone(q.ReadVerbs), orNone(q.WriteVerbs))
	}
	if len(r.Notes) > 0 {
		fmt.Fprintln(out, "\nNOTES:")
		for _, n := range r.Notes {
			fmt.Fprintf(out, "  - %s\n", n)
		}
	}
}

func (r *results) printRequests(w io.Writer) {
	fmt.Fprintln(w, "\nAPI requests by the controller, mean per action\ttrials\treads\twrites\tDaemonSet\tstatus\tEvents\tother")
	for _, q := range r.Requests {
		flag := ""
		if q.ExpectZero {
			flag = "  (must be 0 writes)"
			if q.Writes > 0 {
				flag = "  (MUST BE 0 WRITES: BUG)"
			}
		}
		fmt.Fprintf(w, "  %s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f%s\n", q.Action, q.Trials, q.Reads, q.Writes,
			q.DaemonSetWrites, q.StatusWrites, q.EventWrites, q.OtherWrites, flag)
	}
	fmt.Fprintf(w, "  (excluded: %s)\n", r.Excluded)
	if r.LeaseRequestsPerMinute > 0 {
		fmt.Fprintf(w, "  leader election: %.1f lease requests per minute\n", r.LeaseRequestsPerMinute)
	}
}

func (r *results) printBurst(w io.Writer) {
	bu := r.Burst
	final := "disabled"
	if bu.FinalEnabled {
		final = "enabled"
	}
	correct := "correct"
	if !bu.Correct {
		correct = "WRONG"
	}
	fmt.Fprintf(w, "\nConfig burst: %d insights-config toggles in %.1f s, final %s: %s, converged %.2f s after the last toggle\n",
		bu.Toggles, bu.Seconds, final, correct, bu.ConvergedAfterS)
	fmt.Fprintf(w, "  controller actions\t%.0f applies, %.0f deletes, %.0f failed\n", bu.Applies, bu.Deletes, bu.Failed)
	fmt.Fprintf(w, "  controller writes\t%d (DaemonSet %d: %s; status %d; Events %d), reads %d\n",
		bu.Writes, bu.DaemonSetWrites, strings.Join(bu.WriteVerbs, ", "), bu.StatusWrites, bu.EventWrites, bu.Reads)
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// save writes the results as JSON under dir, named by the run's timestamp.
func (r *results) save(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create results dir: %w", err)
	}
	ts, err := time.Parse(time.RFC3339, r.Timestamp)
	if err != nil {
		return "", fmt.Errorf("parse timestamp: %w", err)
	}
	path := filepath.Join(dir, ts.Format("20060102T150405Z")+".json")
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encode results: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return "", fmt.Errorf("write results: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("write results: %w", err)
	}
	return path, nil
}

// gitCommit describes the checkout the bench ran from; empty without git.
func gitCommit(root string) string {
	head, err := exec.Command("git", "-C", root, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return ""
	}
	commit := strings.TrimSpace(string(head))
	if dirty, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(dirty) > 0 {
		commit += "-dirty"
	}
	return commit
}

func splitLines(s string) []string { return strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n") }
