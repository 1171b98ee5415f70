package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

const (
	enabledConfig  = "dataReporting:\n  disableRuntimeExtractor: false\n"
	disabledConfig = "dataReporting:\n  disableRuntimeExtractor: true\n"
	// noopConfig differs from the default configuration but not in anything
	// the DaemonSet shows: it names the default priority class.
	noopConfig = "dataReporting:\n  disableRuntimeExtractor: false\n  runtimeExtractor:\n    priorityClassName: " + resources.PriorityClassName + "\n"

	// settle is how long after convergence a measurement window stays open,
	// so that the writes that follow an action (conditions, Events) count.
	settle = time.Second
	// defaultResync is the first controller's resync: long enough to never
	// fire during the measurements.
	defaultResync = 10 * time.Minute
	// fastResync is the second controller's, whose resyncs are counted.
	fastResync = 2 * time.Second
)

// windows collects the measurement windows of one kind of trial; window i
// runs from its start to the next one's, the last one to end.
type windows struct {
	starts []time.Time
	end    time.Time
}

func (w *windows) begin() time.Time {
	t := time.Now()
	w.starts = append(w.starts, t)
	return t
}

func (w *windows) finish() { w.end = time.Now() }

// count reads the audit log up to now and adds a row of requests per trial.
func (b *bench) count(ctx context.Context, action string, w windows, expectZeroWrites bool) error {
	if err := b.flushAudit(ctx); err != nil {
		return err
	}
	var per [][]testcluster.AuditEvent
	for i, start := range w.starts {
		end := w.end
		if i+1 < len(w.starts) {
			end = w.starts[i+1]
		}
		per = append(per, b.requestsBetween(start, end))
	}
	b.res.addRequests(action, per, expectZeroWrites)
	return nil
}

func (b *bench) setConfig(ctx context.Context, yaml string) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: resources.ConfigMapName},
		Data:       map[string]string{resources.ConfigMapKey: yaml},
	}
	// An update without resourceVersion is unconditional: the last write wins.
	_, err := b.kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = b.kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("set config: %w", err)
	}
	return nil
}

// firstApply starts the controller on a cluster without the DaemonSet.
func (b *bench) firstApply(ctx context.Context) error {
	var w windows
	start := w.begin()
	var err error
	if b.ctrl, err = b.startController(defaultResync, "a"); err != nil {
		return err
	}
	created, err := b.ds.waitFor(ctx, func(ds *appsv1.DaemonSet) bool { return ds != nil })
	if err != nil {
		return fmt.Errorf("wait for the DaemonSet: %w", err)
	}
	if err := b.waitSteady(ctx, true); err != nil {
		return err
	}
	b.res.FirstApply = firstApply{
		CreatedMs:   ms(created.Sub(start)),
		RunningMs:   ms(time.Since(start)),
		Description: "process start -> DaemonSet created / rolled out and Running",
	}
	time.Sleep(settle)
	w.finish()
	return b.count(ctx, "first apply (process start, create, rollout)", w, false)
}

// noopApplies changes the config in a way the DaemonSet does not show; each
// change makes the controller apply, and the apply must find nothing to do.
func (b *bench) noopApplies(ctx context.Context) error {
	var w windows
	before, _ := b.ds.current()
	for i := range b.o.noops {
		body, err := b.ctrl.scrape(ctx)
		if err != nil {
			return err
		}
		applies := metricSum(body, "runtime_extractor_actions_total", `action="Apply"`)
		cfg := noopConfig
		if i%2 == 1 {
			cfg = enabledConfig
		}
		w.begin()
		if err := b.setConfig(ctx, cfg); err != nil {
			return err
		}
		err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
			body, err := b.ctrl.metrics(ctx)
			return err == nil && metricSum(body, "runtime_extractor_actions_total", `action="Apply"`) > applies, nil
		})
		if err != nil {
			return fmt.Errorf("the controller did not apply after a config change: %w", err)
		}
		time.Sleep(settle)
	}
	w.finish()
	after, _ := b.ds.current()
	if after == nil || before == nil || after.UID != before.UID || after.Generation != before.Generation {
		b.res.note("no-op applies changed the DaemonSet (generation or UID moved): a bug")
	}
	return b.count(ctx, "no-op apply (config change, same DaemonSet)", w, true)
}

func (b *bench) driftDeleted(ctx context.Context) error {
	var w windows
	var samples []time.Duration
	for range b.o.trials {
		old, _ := b.ds.current()
		if old == nil {
			return errors.New("no DaemonSet to delete")
		}
		start := w.begin()
		if err := b.kube.AppsV1().DaemonSets(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("delete the DaemonSet: %w", err)
		}
		restored, err := b.ds.waitFor(ctx, func(ds *appsv1.DaemonSet) bool { return ds != nil && ds.UID != old.UID })
		if err != nil {
			return fmt.Errorf("wait for the DaemonSet to be restored: %w", err)
		}
		samples = append(samples, restored.Sub(start))
		if err := b.waitSteady(ctx, true); err != nil {
			return err
		}
	}
	time.Sleep(settle)
	w.finish()
	b.res.addLatency("drift restore: DaemonSet deleted -> recreated", samples)
	return b.count(ctx, "drift correction: DaemonSet deleted", w, false)
}

func (b *bench) driftImage(ctx context.Context) error {
	var w windows
	var samples []time.Duration
	for i := range b.o.trials {
		var start time.Time
		var written *appsv1.DaemonSet
		var want string
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := b.kube.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			want = cur.Spec.Template.Spec.Containers[0].Image
			cur.Spec.Template.Spec.Containers[0].Image = fmt.Sprintf("quay.io/bench/intruder:%d", i)
			start = time.Now()
			written, err = b.kube.AppsV1().DaemonSets(ns).Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("change the image: %w", err)
		}
		w.starts = append(w.starts, start)
		restored, err := b.ds.waitFor(ctx, func(ds *appsv1.DaemonSet) bool {
			return ds != nil && ds.Generation > written.Generation && ds.Spec.Template.Spec.Containers[0].Image == want
		})
		if err != nil {
			return fmt.Errorf("wait for the image to be restored: %w", err)
		}
		samples = append(samples, restored.Sub(start))
		if err := b.waitSteady(ctx, true); err != nil {
			return err
		}
	}
	time.Sleep(settle)
	w.finish()
	b.res.addLatency("drift restore: image changed -> restored", samples)
	return b.count(ctx, "drift correction: image changed", w, false)
}

// configToggles disables and enables through insights-config.
func (b *bench) configToggles(ctx context.Context) error {
	var off, on windows
	var offSamples, onSamples []time.Duration
	for range b.o.toggles {
		start := off.begin()
		if err := b.setConfig(ctx, disabledConfig); err != nil {
			return err
		}
		gone, err := b.ds.waitFor(ctx, func(ds *appsv1.DaemonSet) bool { return ds == nil })
		if err != nil {
			return fmt.Errorf("wait for the DaemonSet to go: %w", err)
		}
		offSamples = append(offSamples, gone.Sub(start))
		if err := b.waitSteady(ctx, false); err != nil {
			return err
		}
		time.Sleep(settle)
		off.finish()

		start = on.begin()
		if err := b.setConfig(ctx, enabledConfig); err != nil {
			return err
		}
		created, err := b.ds.waitFor(ctx, func(ds *appsv1.DaemonSet) bool { return ds != nil })
		if err != nil {
			return fmt.Errorf("wait for the DaemonSet: %w", err)
		}
		onSamples = append(onSamples, created.Sub(start))
		if err := b.waitSteady(ctx, true); err != nil {
			return err
		}
		time.Sleep(settle)
		on.finish()
	}
	b.res.addLatency("config disabled -> DaemonSet deleted", offSamples)
	b.res.addLatency("config enabled -> DaemonSet created", onSamples)
	// The two directions alternate: a disable trial runs until the enable that
	// follows it, an enable trial until the next disable (the last one until
	// its own finish).
	if err := b.flushAudit(ctx); err != nil {
		return err
	}
	var disables, enables [][]testcluster.AuditEvent
	for i := range off.starts {
		disables = append(disables, b.requestsBetween(off.starts[i], on.starts[i]))
		end := on.end
		if i+1 < len(off.starts) {
			end = off.starts[i+1]
		}
		enables = append(enables, b.requestsBetween(on.starts[i], end))
	}
	b.res.addRequests("delete (config disabled)", disables, false)
	b.res.addRequests("create (config enabled)", enables, false)
	return nil
}

// versionChanges bumps the ClusterVersion's desired version.
func (b *bench) versionChanges(ctx context.Context) error {
	var w windows
	var samples []time.Duration
	for i := range b.o.toggles {
		version := fmt.Sprintf("4.22.%d", i+1)
		var start time.Time
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cv, err := b.config.ConfigV1().ClusterVersions().Get(ctx, "version", metav1.GetOptions{})
			if err != nil {
				return err
			}
			cv.Status.Desired.Version = version
			start = time.Now()
			_, err = b.config.ConfigV1().ClusterVersions().UpdateStatus(ctx, cv, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("bump the version: %w", err)
		}
		w.starts = append(w.starts, start)
		applied, err := b.ds.waitFor(ctx, func(ds *appsv1.DaemonSet) bool {
			return ds != nil && ds.Annotations[resources.VersionAnnotation] == version
		})
		if err != nil {
			return fmt.Errorf("wait for version %s: %w", version, err)
		}
		samples = append(samples, applied.Sub(start))
		if err := b.waitSteady(ctx, true); err != nil {
			return err
		}
	}
	time.Sleep(settle)
	w.finish()
	b.res.addLatency("version changed -> DaemonSet annotated", samples)
	return b.count(ctx, "version change (upgrade rollout)", w, false)
}

// eventStorm sends status-only updates of the DaemonSet: a condition the
// DaemonSet controller neither sets nor resets, so it does not answer them
// with writes of its own.
func (b *bench) eventStorm(ctx context.Context) error {
	m0, err := b.ctrl.scrape(ctx)
	if err != nil {
		return err
	}
	cur, err := b.kube.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	var w windows
	start := w.begin()
	conflicts := 0
	for i := 0; i < b.o.storm; {
		cur.Status.Conditions = []appsv1.DaemonSetCondition{{
			Type: "BenchStorm", Status: corev1.ConditionTrue, Reason: "Storm", Message: strconv.Itoa(i),
			LastTransitionTime: metav1.Now(),
		}}
		upd, err := b.kube.AppsV1().DaemonSets(ns).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			conflicts++
			if cur, err = b.kube.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("status update %d: %w", i, err)
		}
		cur = upd
		i++
	}
	sent := time.Since(start)
	time.Sleep(2 * settle) // let the controller drain the notifications
	w.finish()
	m1, err := b.ctrl.scrape(ctx)
	if err != nil {
		return err
	}
	if err := b.flushAudit(ctx); err != nil {
		return err
	}
	reqs := b.requestsBetween(w.starts[0], w.end)
	tally := tallyRequests(reqs)
	b.res.Storm = storm{
		Updates:          b.o.storm,
		Conflicts:        conflicts,
		Seconds:          sent.Seconds(),
		Actions:          metricSum(m1, "runtime_extractor_actions_total") - metricSum(m0, "runtime_extractor_actions_total"),
		Transitions:      metricSum(m1, "runtime_extractor_transitions_total") - metricSum(m0, "runtime_extractor_transitions_total"),
		DriftEvents:      metricSum(m1, "runtime_extractor_drift_events_total") - metricSum(m0, "runtime_extractor_drift_events_total"),
		ControllerReads:  tally.reads,
		ControllerWrites: tally.writes,
		Writes:           tally.detail,
	}
	return nil
}

// configBurst toggles insights-config as fast as one client can.
func (b *bench) configBurst(ctx context.Context) error {
	m0, err := b.ctrl.scrape(ctx)
	if err != nil {
		return err
	}
	var w windows
	start := w.begin()
	for i := 1; i <= b.o.burst; i++ {
		cfg := enabledConfig
		if i%2 == 1 {
			cfg = disabledConfig
		}
		if err := b.setConfig(ctx, cfg); err != nil {
			return err
		}
	}
	last := time.Now()
	enabled := b.o.burst%2 == 0
	if err := b.waitSteady(ctx, enabled); err != nil {
		return fmt.Errorf("converge after the burst: %w", err)
	}
	converged := time.Since(last)
	settled, _ := b.ds.current()
	time.Sleep(2 * settle)
	w.finish()
	final, _ := b.ds.current()
	stable := (settled == nil) == (final == nil) && (final == nil || (final.UID == settled.UID && final.Generation == settled.Generation))
	m1, err := b.ctrl.scrape(ctx)
	if err != nil {
		return err
	}
	if err := b.flushAudit(ctx); err != nil {
		return err
	}
	tally := tallyRequests(b.requestsBetween(w.starts[0], w.end))
	b.res.Burst = burst{
		Toggles:         b.o.burst,
		Seconds:         last.Sub(start).Seconds(),
		FinalEnabled:    enabled,
		Correct:         stable && (final != nil) == enabled,
		ConvergedAfterS: converged.Seconds(),
		Applies:         metricSum(m1, "runtime_extractor_actions_total", `action="Apply"`) - metricSum(m0, "runtime_extractor_actions_total", `action="Apply"`),
		Deletes:         metricSum(m1, "runtime_extractor_actions_total", `action="Delete"`) - metricSum(m0, "runtime_extractor_actions_total", `action="Delete"`),
		Failed:          metricSum(m1, "runtime_extractor_actions_total", `result="error"`) - metricSum(m0, "runtime_extractor_actions_total", `result="error"`),
		Reads:           tally.reads,
		Writes:          tally.writes,
		DaemonSetWrites: tally.byResource["daemonsets"],
		StatusWrites:    tally.byResource["clusteroperators/status"],
		EventWrites:     tally.byResource["events"],
		WriteVerbs:      tally.daemonSetVerbs,
	}
	return nil
}

// memory samples the controller, creates the unrelated objects and samples
// again.
func (b *bench) memory(ctx context.Context) error {
	m, err := b.sampleMemory(ctx, "controller running, no clutter")
	if err != nil {
		return err
	}
	b.res.Memory = append(b.res.Memory, m)

	var w windows
	w.begin()
	if err := b.createClutter(ctx); err != nil {
		return err
	}
	created := time.Now()
	time.Sleep(5 * time.Second) // whatever the controller would cache, it has by now
	w.finish()
	if err := b.count(ctx, fmt.Sprintf("%d unrelated DaemonSets + %d ConfigMaps created", b.o.clutter, b.o.clutter), w, true); err != nil {
		return err
	}
	b.res.ClutterSeconds = created.Sub(w.starts[0]).Seconds()
	m, err = b.sampleMemory(ctx, "same process, after the clutter was created")
	if err != nil {
		return err
	}
	b.res.Memory = append(b.res.Memory, m)
	return nil
}

// createClutter creates DaemonSets that schedule nowhere (their node selector
// matches no node, so they cost the cluster nothing) and ConfigMaps of 4 KiB,
// at most 8 requests at a time.
func (b *bench) createClutter(ctx context.Context) error {
	const workers = 8
	filler := make([]byte, 4096)
	for i := range filler {
		filler[i] = 'a' + byte(i%26)
	}
	payload := string(filler)
	jobs := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if err := b.createClutterPair(ctx, i, payload); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var err error
feed:
	for i := range b.o.clutter {
		select {
		case jobs <- i:
		case err = <-errs:
			break feed
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	close(errs)
	if err != nil {
		return err
	}
	return <-errs // nil when no worker failed
}

func (b *bench) createClutterPair(ctx context.Context, i int, payload string) error {
	labels := map[string]string{"app": fmt.Sprintf("clutter-%d", i)}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("clutter-%04d", i), Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"bench.example.com/nowhere": "true"},
					Containers:   []corev1.Container{{Name: "c", Image: "quay.io/bench/clutter:latest", Args: []string{"sleep", "infinity"}}},
				},
			},
		},
	}
	if _, err := b.kube.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create clutter daemonset: %w", err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("clutter-%04d", i), Labels: labels},
		Data:       map[string]string{"payload": payload},
	}
	if _, err := b.kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create clutter configmap: %w", err)
	}
	return nil
}

// sampleMemory takes the median of five samples a second apart: the Go heap
// moves with every GC cycle.
func (b *bench) sampleMemory(ctx context.Context, label string) (memory, error) {
	var rss, heap []float64
	for i := range 5 {
		if i > 0 {
			time.Sleep(time.Second)
		}
		r, err := b.ctrl.rssBytes()
		if err != nil {
			return memory{}, fmt.Errorf("read RSS: %w", err)
		}
		body, err := b.ctrl.scrape(ctx)
		if err != nil {
			return memory{}, err
		}
		h := metricSum(body, "go_memstats_heap_inuse_bytes")
		if h == 0 {
			return memory{}, errors.New("/metrics has no go_memstats_heap_inuse_bytes")
		}
		rss, heap = append(rss, float64(r)), append(heap, h)
	}
	return memory{Label: label, RSSBytes: int64(median(rss)), HeapInuseBytes: int64(median(heap))}, nil
}

// restartAndResync replaces the controller by one with a 2 s resync: its
// start adopts the existing DaemonSet; then resyncs are counted while
// nothing changes.
func (b *bench) restartAndResync(ctx context.Context) error {
	b.ctrl.stop()
	var w windows
	w.begin()
	var err error
	if b.ctrl, err = b.startController(fastResync, "b"); err != nil {
		return err
	}
	if err := b.waitSteady(ctx, true); err != nil {
		return err
	}
	time.Sleep(settle)
	w.finish()
	if err := b.count(ctx, "restart: adopt the existing DaemonSet", w, false); err != nil {
		return err
	}
	m, err := b.sampleMemory(ctx, "new process started with the clutter present")
	if err != nil {
		return err
	}
	b.res.Memory = append(b.res.Memory, m)

	m0, err := b.ctrl.scrape(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	time.Sleep(b.o.resyncWait) // the quiet window itself
	end := time.Now()
	m1, err := b.ctrl.scrape(ctx)
	if err != nil {
		return err
	}
	resyncs := metricSum(m1, "runtime_extractor_actions_total", `action="Apply"`) - metricSum(m0, "runtime_extractor_actions_total", `action="Apply"`)
	if resyncs < 1 {
		return fmt.Errorf("no resync in %s with --resync %s", b.o.resyncWait, fastResync)
	}
	if err := b.flushAudit(ctx); err != nil {
		return err
	}
	reqs := b.requestsBetween(start, end)
	b.res.addResyncRequests(reqs, int(resyncs), end.Sub(start))
	b.leaseWindow = [2]time.Time{start, end}
	return nil
}

// leaderElection reports the lease traffic, excluded from the per-action
// counts, over the resync window.
func (b *bench) leaderElection(context.Context) error {
	if b.leaseWindow[1].IsZero() {
		return errors.New(`needs the quiet window of "restart and resync"`)
	}
	var n int
	for _, e := range b.requestsBetween(b.leaseWindow[0], b.leaseWindow[1]) {
		if e.Resource == "leases" {
			n++
		}
	}
	b.res.LeaseRequestsPerMinute = float64(n) / b.leaseWindow[1].Sub(b.leaseWindow[0]).Minutes()
	return nil
}

// outageRecovery times the first correction after an API server outage, as
// TestFirstCorrectionAfterAPIServerOutage does: the controller runs rolled
// out; kube-apiserver stops for o.outage and starts again; as soon as it is
// back, the DaemonSet is deleted, and the sample is the time from the API
// server's return to the controller's new DaemonSet. The next outage follows
// as soon as the new DaemonSet exists (its rollout waits for the cluster's
// own controllers to recover). The controller runs at its defaults (10-minute
// resync) without leader election: outages back to back leave no time to
// renew a lease, and library-go ends a process that cannot renew. It reaches
// the API server through a TCP proxy that acts as a load balancer with a
// /readyz health check: "back" is when the API server returns to the rotation.
func (b *bench) outageRecovery(ctx context.Context) (err error) {
	if b.ctrl != nil {
		b.ctrl.stop()
		b.ctrl = nil
	}
	proxy, err := testcluster.StartProxy(b.cluster.RESTConfig.Host)
	if err != nil {
		return err
	}
	defer func() { _ = proxy.Close() }()
	kubeconfig := filepath.Join(b.work, "controller-via-proxy.kubeconfig")
	if err := proxy.WriteKubeconfig(b.kubeconfig, kubeconfig); err != nil {
		return err
	}
	if b.ctrl, err = b.startControllerWith("outage", kubeconfig, []string{"--disable-leader-election"}); err != nil {
		return err
	}
	defer func() { // before the proxy closes
		if err != nil {
			b.dumpControllerLog()
		}
		b.ctrl.stop()
		b.ctrl = nil
	}()
	if err := b.setConfig(ctx, enabledConfig); err != nil {
		return err
	}
	if err := b.waitSteady(ctx, true); err != nil {
		return err
	}
	old, _ := b.ds.current()
	if old == nil {
		return errors.New("no DaemonSet before the first outage")
	}
	var samples []time.Duration
	for i := range b.o.outages {
		proxy.SetServing(false) // /readyz fails as the API server shuts down
		if err := b.cluster.StopAPIServer(); err != nil {
			return err
		}
		stopped := time.Now()
		select { // the outage itself
		case <-time.After(time.Until(stopped.Add(b.o.outage))):
		case <-ctx.Done():
		}
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // restart even when interrupted
		err := b.cluster.StartAPIServer(sctx)
		cancel()
		if err != nil {
			return err
		}
		proxy.SetServing(true)
		back := time.Now()
		if err := ctx.Err(); err != nil {
			return err
		}
		if !b.ctrl.running() {
			return errors.New("the controller exited during the outage")
		}
		var took time.Duration
		if old, took, err = b.deleteAndTimeRecreation(ctx, old.UID, back); err != nil {
			return err
		}
		samples = append(samples, took)
		logf("outage %d/%d (%s): DaemonSet recreated %s after the API server was back", i+1, b.o.outages, b.o.outage, took.Round(time.Millisecond))
	}
	b.res.addLatency(fmt.Sprintf("first correction after a %g s outage: API server back -> DaemonSet recreated", b.o.outage.Seconds()), samples)
	return b.waitSteady(ctx, true)
}

// deleteAndTimeRecreation deletes the DaemonSet with UID old and returns the
// new one and how long after back a watch opened before the deletion saw it.
func (b *bench) deleteAndTimeRecreation(ctx context.Context, old types.UID, back time.Time) (*appsv1.DaemonSet, time.Duration, error) {
	byName := metav1.ListOptions{FieldSelector: "metadata.name=" + name}
	var list *appsv1.DaemonSetList
	// /readyz answers; the bench's own client may still hold a dead connection.
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		list, err = b.kube.AppsV1().DaemonSets(ns).List(ctx, byName)
		return err == nil, nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list the DaemonSet after the outage: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	byName.ResourceVersion = list.ResourceVersion
	w, err := b.kube.AppsV1().DaemonSets(ns).Watch(wctx, byName)
	if err != nil {
		return nil, 0, fmt.Errorf("watch the DaemonSet: %w", err)
	}
	defer w.Stop()
	if err := b.kube.AppsV1().DaemonSets(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &old}}); err != nil {
		return nil, 0, fmt.Errorf("delete the DaemonSet: %w", err)
	}
	for ev := range w.ResultChan() {
		if ds, ok := ev.Object.(*appsv1.DaemonSet); ok && ev.Type == watch.Added && ds.UID != old {
			return ds, time.Since(back), nil
		}
	}
	return nil, 0, fmt.Errorf("the DaemonSet was not recreated within %s after the API server was back", waitTimeout)
}

var benchLine = regexp.MustCompile(`^BenchmarkFire\S*\s+(\d+)\s+([\d.]+) ns/op\s+(\d+) B/op\s+(\d+) allocs/op`)

// fsmFire runs the fsm package's own benchmark.
func (b *bench) fsmFire(ctx context.Context) error {
	root, err := testcluster.ModuleRoot()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", "^BenchmarkFire$", "-benchmem", "-count", "1", "./fsm")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go test -bench BenchmarkFire: %w\n%s", err, out)
	}
	for _, line := range splitLines(string(out)) {
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		b.res.Fire.Iterations, _ = strconv.Atoi(m[1])
		b.res.Fire.NsPerOp, _ = strconv.ParseFloat(m[2], 64)
		b.res.Fire.BytesPerOp, _ = strconv.ParseInt(m[3], 10, 64)
		b.res.Fire.AllocsPerOp, _ = strconv.ParseInt(m[4], 10, 64)
		b.res.Fire.Command = "go test -run '^$' -bench '^BenchmarkFire$' -benchmem ./fsm"
		return nil
	}
	return fmt.Errorf("no BenchmarkFire line in:\n%s", out)
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
