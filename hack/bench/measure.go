package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
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

	// settle is how long after convergence a trial's window stays open, so
	// that the writes that follow an action (conditions, Events) count; a
	// later write falls in the next trial's window, which the mean per trial
	// does not mind.
	settle = time.Second
	// tail keeps the last window of a series open longer than the status
	// settle window the controller may wait before publishing (about 2 s),
	// so that no trailing write is lost at the end of a series.
	tail = 4 * time.Second
	// defaultResync is the first controller's resync: long enough to never
	// fire during the measurements.
	defaultResync = 10 * time.Minute
	// fastResync is the second controller's, whose resyncs are counted.
	fastResync = 2 * time.Second
)

// Row keys: stable names under which a figure is compared with the reference.
const (
	keyFirstApply    = "first-apply"
	keyNoop          = "noop-apply"
	keyDriftDelete   = "drift-delete"
	keyFloor         = "drift-delete-floor"
	keyDriftImage    = "drift-image"
	keyImageFloor    = "drift-image-floor"
	keyConfigDisable = "config-disable"
	keyConfigEnable  = "config-enable"
	keyVersion       = "version-change"
	keyClutter       = "clutter"
	keyRestart       = "restart-adopt"
	keyResync        = "resync"
	keyOutage        = "outage-recovery"
)

// repairTarget is issue 13's bound on the requests of one repair.
const repairTarget = "1 DaemonSet write + ≤ 1 status write + ≤ 1 Event, 0 reads"

// windows collects the measurement windows of one kind of trial: a trial's
// window runs from its start to the next trial's start, or to finish for the
// last trial of a series (trials may come in several series, the drift
// blocks, with gaps between them that count for nothing).
type windows struct {
	spans [][2]time.Time
}

// begin starts a trial's window now.
func (w *windows) begin() time.Time {
	t := time.Now()
	w.beginAt(t)
	return t
}

// beginAt starts a trial's window at t, closing the previous open one.
func (w *windows) beginAt(t time.Time) {
	w.closeAt(t)
	w.spans = append(w.spans, [2]time.Time{t, {}})
}

// finish closes the open window now.
func (w *windows) finish() { w.closeAt(time.Now()) }

func (w *windows) closeAt(t time.Time) {
	if n := len(w.spans); n > 0 && w.spans[n-1][1].IsZero() {
		w.spans[n-1][1] = t
	}
}

// count reads the audit log up to now and adds a row of requests per trial.
func (b *bench) count(ctx context.Context, key, action, target string, w *windows, expectZeroWrites bool) error {
	w.finish()
	if err := b.flushAudit(ctx); err != nil {
		return err
	}
	var per [][]testcluster.AuditEvent
	for _, span := range w.spans {
		per = append(per, b.requestsBetween(span[0], span[1]))
	}
	b.res.addRequests(key, action, target, per, expectZeroWrites)
	return nil
}

// scrapeAndTally ends a one-window step (storm, burst): the controller's
// metrics now, then its requests in w's window, the audit log read up to now.
func (b *bench) scrapeAndTally(ctx context.Context, w *windows) (*testcluster.Metrics, tally, error) {
	m, err := b.ctrl.scrape(ctx)
	if err != nil {
		return nil, tally{}, err
	}
	if err := b.flushAudit(ctx); err != nil {
		return nil, tally{}, err
	}
	return m, tallyRequests(b.requestsBetween(w.spans[0][0], w.spans[0][1])), nil
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
	time.Sleep(tail)
	if err := b.count(ctx, keyFirstApply, "first apply (process start, create, rollout)", "1 DaemonSet create", &w, false); err != nil {
		return err
	}
	creates := 0
	for _, e := range b.requestsBetween(w.spans[0][0], w.spans[0][1]) {
		if e.Resource == "daemonsets" && e.Subresource == "" && e.Verb == "create" {
			creates++ // refused ones (AlreadyExists) too: each is a request
		}
	}
	b.res.FirstApply = firstApply{
		CreatedMs:        ms(created.Sub(start)),
		RunningMs:        ms(time.Since(start)),
		Description:      "process start -> DaemonSet created / rolled out and Running",
		DaemonSetCreates: creates,
	}
	return nil
}

// applies is the controller's Apply actions so far.
func (b *bench) applies(ctx context.Context) (float64, error) {
	m, err := b.ctrl.scrape(ctx)
	if err != nil {
		return 0, err
	}
	return m.Sum(testcluster.MetricActions, "action", "Apply"), nil
}

// noopApplies changes the config in a way the DaemonSet does not show; each
// change makes the controller apply, and the apply must find nothing to do.
func (b *bench) noopApplies(ctx context.Context) error {
	var w windows
	before, _ := b.ds.current()
	for i := range b.o.noops {
		applies, err := b.applies(ctx)
		if err != nil {
			return err
		}
		cfg := noopConfig
		if i%2 == 1 {
			cfg = enabledConfig
		}
		w.begin()
		if err := testcluster.SetControllerConfig(ctx, b.kube, cfg); err != nil {
			return err
		}
		err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
			m, err := b.ctrl.Scrape(ctx)
			return err == nil && m.Sum(testcluster.MetricActions, "action", "Apply") > applies, nil
		})
		if err != nil {
			return fmt.Errorf("the controller did not apply after a config change: %w", err)
		}
		time.Sleep(settle)
	}
	time.Sleep(tail - settle)
	after, _ := b.ds.current()
	if after == nil || before == nil || after.UID != before.UID || after.Generation != before.Generation {
		b.res.note("no-op applies changed the DaemonSet (generation or UID moved): a bug")
	}
	return b.count(ctx, keyNoop, "no-op apply (config change, same DaemonSet)", "0 requests", &w, true)
}

// driftDeleted deletes the DaemonSet and times its return, in blocks that
// alternate between the controller and the floor: the ideal watcher, run in
// the controller's place (stopped for the block), which recreates the
// DaemonSet as fast as a client can. Interleaving makes a cluster that speeds
// up or slows down during the run weigh on both alike. Every sample starts
// from the same state: the DaemonSet rolled out on every node.
func (b *bench) driftDeleted(ctx context.Context) error {
	product, floor, w, err := b.interleaved(ctx, "drift", b.o.blocks, b.o.trials, b.deleteAndTime)
	if err != nil {
		return err
	}
	b.res.addLatency(keyDriftDelete, "drift restore: DaemonSet deleted -> recreated", product)
	b.res.addLatency(keyFloor, "  floor: ideal watcher, deleted -> recreated", floor)
	return b.count(ctx, keyDriftDelete, "drift correction: DaemonSet deleted", repairTarget, w, false)
}

// timedDrift changes or deletes the DaemonSet and returns how long until it is
// as it was; with w, the change starts a trial's window.
type timedDrift func(ctx context.Context, w *windows) (time.Duration, error)

// interleaved takes trials samples of del with the controller and as many
// with the ideal watcher, in blocks that alternate (controller, then floor),
// so a cluster that speeds up or slows down weighs on both alike. The
// controller's trial windows are returned for counting its requests; label
// names the block's logs.
func (b *bench) interleaved(ctx context.Context, label string, blocks, trials int, del timedDrift) (product, floor []time.Duration, w *windows, err error) {
	blocks = max(1, blocks)
	perBlock := max(1, (trials+blocks-1)/blocks)
	w = &windows{}
	for blk := range blocks {
		for range perBlock {
			took, err := del(ctx, w)
			if err != nil {
				return nil, nil, nil, err
			}
			product = append(product, took)
			if err := b.waitSteady(ctx, true); err != nil {
				return nil, nil, nil, err
			}
			time.Sleep(settle)
		}
		time.Sleep(tail - settle)
		w.finish()

		blockLabel := fmt.Sprintf("%s-%d", label, blk+1)
		if err := b.floorBlock(ctx, blockLabel, perBlock, &floor, del); err != nil {
			return nil, nil, nil, fmt.Errorf("floor block %d: %w", blk+1, err)
		}
		if b.ctrl, err = b.startController(defaultResync, blockLabel); err != nil {
			return nil, nil, nil, err
		}
		if err := b.waitSteady(ctx, true); err != nil {
			return nil, nil, nil, err
		}
		logf("%s block %d/%d: %d samples each, controller p50 so far %s, floor %s", label, blk+1, blocks, perBlock,
			percentile(product, 0.5).Round(100*time.Microsecond), percentile(floor, 0.5).Round(100*time.Microsecond))
	}
	return product, floor, w, nil
}

// floorBlock stops the controller and takes n samples of the ideal watcher,
// each a deletion by del.
func (b *bench) floorBlock(ctx context.Context, label string, n int, samples *[]time.Duration, del timedDrift) error {
	b.ctrl.stop()
	b.ctrl = nil
	iw, err := startIdealWatcher(ctx, b.kubeconfig, b.work, label)
	if err != nil {
		return err
	}
	for range n {
		took, err := del(ctx, nil)
		if err != nil {
			return errors.Join(err, iw.stop())
		}
		*samples = append(*samples, took)
		if _, err := b.ds.waitFor(ctx, b.rolledOut); err != nil {
			return errors.Join(fmt.Errorf("wait for the rollout: %w", err), iw.stop())
		}
		time.Sleep(settle)
	}
	return iw.stop()
}

// deleteAndTime deletes the DaemonSet and returns how long until the bench's
// watch shows a new one. With w, the deletion starts a trial's window.
func (b *bench) deleteAndTime(ctx context.Context, w *windows) (time.Duration, error) {
	old, _ := b.ds.current()
	if old == nil {
		return 0, errors.New("no DaemonSet to delete")
	}
	start := time.Now()
	if w != nil {
		w.beginAt(start)
	}
	if err := b.kube.AppsV1().DaemonSets(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &old.UID}}); err != nil {
		return 0, fmt.Errorf("delete the DaemonSet: %w", err)
	}
	restored, err := b.ds.waitFor(ctx, func(ds *appsv1.DaemonSet) bool { return ds != nil && ds.UID != old.UID })
	if err != nil {
		return 0, fmt.Errorf("wait for the DaemonSet to be recreated: %w", err)
	}
	return restored.Sub(start), nil
}

// driftImage changes the extractor's image and times its return, in blocks
// that alternate with the floor, as driftDeleted does: the ideal watcher puts
// the template back with one update.
func (b *bench) driftImage(ctx context.Context) error {
	product, floor, w, err := b.interleaved(ctx, "image", b.o.blocks, b.o.imageTrials, b.changeImageAndTime)
	if err != nil {
		return err
	}
	b.res.addLatencyAgainst(keyDriftImage, "drift restore: image changed -> restored", keyImageFloor, product)
	b.res.addLatencyAgainst(keyImageFloor, "  floor: ideal watcher, image changed -> restored", keyImageFloor, floor)
	return b.count(ctx, keyDriftImage, "drift correction: image changed", repairTarget, w, false)
}

// changeImageAndTime sets another image on the extractor's container, as
// another writer would, and returns how long until the bench's watch shows
// it restored. With w, the change starts a trial's window.
func (b *bench) changeImageAndTime(ctx context.Context, w *windows) (time.Duration, error) {
	var start time.Time
	var written *appsv1.DaemonSet
	var want string
	b.intruders++
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := b.kube.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		want = cur.Spec.Template.Spec.Containers[0].Image
		cur.Spec.Template.Spec.Containers[0].Image = fmt.Sprintf("quay.io/bench/intruder:%d", b.intruders)
		start = time.Now()
		written, err = b.kube.AppsV1().DaemonSets(ns).Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("change the image: %w", err)
	}
	if w != nil {
		w.beginAt(start)
	}
	at, err := b.ds.waitFor(ctx, func(ds *appsv1.DaemonSet) bool {
		return ds != nil && ds.Generation > written.Generation && ds.Spec.Template.Spec.Containers[0].Image == want
	})
	if err != nil {
		return 0, fmt.Errorf("wait for the image to be restored: %w", err)
	}
	return at.Sub(start), nil
}

// timeTrial waits for the watch to show done and returns the time since
// start; then, so the next trial starts from the same state, it waits for
// the steady state (enabled or not) and lets the cluster settle. what names
// the wait in its error.
func (b *bench) timeTrial(ctx context.Context, start time.Time, what string, enabled bool, done func(*appsv1.DaemonSet) bool) (time.Duration, error) {
	at, err := b.ds.waitFor(ctx, done)
	if err != nil {
		return 0, fmt.Errorf("wait for %s: %w", what, err)
	}
	if err := b.waitSteady(ctx, enabled); err != nil {
		return 0, err
	}
	time.Sleep(settle)
	return at.Sub(start), nil
}

// configToggles disables and enables through insights-config.
func (b *bench) configToggles(ctx context.Context) error {
	var off, on windows
	var offSamples, onSamples []time.Duration
	for range b.o.toggles {
		start := off.begin()
		if err := testcluster.SetControllerConfig(ctx, b.kube, disabledConfig); err != nil {
			return err
		}
		took, err := b.timeTrial(ctx, start, "the DaemonSet to go", false, func(ds *appsv1.DaemonSet) bool { return ds == nil })
		if err != nil {
			return err
		}
		offSamples = append(offSamples, took)

		// A disable trial runs until the enable that follows it, an enable
		// trial until the next disable.
		start = on.begin()
		off.closeAt(start)
		if err := testcluster.SetControllerConfig(ctx, b.kube, enabledConfig); err != nil {
			return err
		}
		took, err = b.timeTrial(ctx, start, "the DaemonSet", true, func(ds *appsv1.DaemonSet) bool { return ds != nil })
		if err != nil {
			return err
		}
		onSamples = append(onSamples, took)
		on.finish()
	}
	time.Sleep(tail - settle)
	on.spans[len(on.spans)-1][1] = time.Now()
	b.res.addLatency(keyConfigDisable, "config disabled -> DaemonSet deleted", offSamples)
	b.res.addLatency(keyConfigEnable, "config enabled -> DaemonSet created", onSamples)
	if err := b.count(ctx, keyConfigDisable, "delete (config disabled)", "", &off, false); err != nil {
		return err
	}
	return b.count(ctx, keyConfigEnable, "create (config enabled)", "", &on, false)
}

// setVersion sets the ClusterVersion's desired version and returns when the
// successful write was sent.
func (b *bench) setVersion(ctx context.Context, version string) (time.Time, error) {
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
		return time.Time{}, fmt.Errorf("bump the version: %w", err)
	}
	return start, nil
}

// versionChanges bumps the ClusterVersion's desired version.
func (b *bench) versionChanges(ctx context.Context) error {
	var w windows
	var samples []time.Duration
	for i := range b.o.toggles {
		version := fmt.Sprintf("4.22.%d", i+1)
		start, err := b.setVersion(ctx, version)
		if err != nil {
			return err
		}
		w.beginAt(start)
		took, err := b.timeTrial(ctx, start, "version "+version, true, func(ds *appsv1.DaemonSet) bool {
			return ds != nil && ds.Annotations[resources.VersionAnnotation] == version
		})
		if err != nil {
			return err
		}
		samples = append(samples, took)
	}
	time.Sleep(tail - settle)
	b.res.addLatency(keyVersion, "version changed -> DaemonSet annotated", samples)
	return b.count(ctx, keyVersion, "version change (upgrade rollout)", "", &w, false)
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
	time.Sleep(tail) // let the controller drain the notifications
	w.finish()
	m1, t, err := b.scrapeAndTally(ctx, &w)
	if err != nil {
		return err
	}
	delta := func(name string) float64 { return m1.Sum(name) - m0.Sum(name) }
	b.res.Storm = storm{
		Updates:     b.o.storm,
		Conflicts:   conflicts,
		Seconds:     sent.Seconds(),
		Actions:     delta(testcluster.MetricActions),
		Transitions: delta(testcluster.MetricTransits),
		DriftEvents: delta(testcluster.MetricDrift),
		Requests:    t.c,
		Writes:      t.detail,
	}
	return nil
}

// configBurst toggles insights-config as fast as one client can, ending on
// enabled (an even count) or disabled. "Correct" is the state the last toggle
// asks for, holding still afterwards, with the pod template it had before.
func (b *bench) configBurst(ctx context.Context) error {
	m0, err := b.ctrl.scrape(ctx)
	if err != nil {
		return err
	}
	before, _ := b.ds.current()
	if before == nil {
		return errors.New("no DaemonSet before the burst")
	}
	b.ds.resetHistory()
	var w windows
	start := w.begin()
	for i := 1; i <= b.o.burst; i++ {
		cfg := enabledConfig
		if i%2 == 1 {
			cfg = disabledConfig
		}
		if err := testcluster.SetControllerConfig(ctx, b.kube, cfg); err != nil {
			return err
		}
	}
	last := time.Now()
	enabled := b.o.burst%2 == 0
	if err := b.waitSteady(ctx, enabled); err != nil {
		return fmt.Errorf("converge after the burst: %w", err)
	}
	rolledOut := time.Since(last)
	settled, _ := b.ds.current()
	time.Sleep(tail)
	w.finish()
	final, _ := b.ds.current()
	stable := (settled == nil) == (final == nil) && (final == nil || (final.UID == settled.UID && final.Generation == settled.Generation))
	correct := stable && (final != nil) == enabled &&
		(final == nil || equality.Semantic.DeepEqual(final.Spec.Template, before.Spec.Template))
	correctAt, ok := b.ds.settledSince()
	correct = correct && ok
	m1, t, err := b.scrapeAndTally(ctx, &w)
	if err != nil {
		return err
	}
	delta := func(labels ...string) float64 {
		return m1.Sum(testcluster.MetricActions, labels...) - m0.Sum(testcluster.MetricActions, labels...)
	}
	b.res.Burst = burst{
		Toggles:         b.o.burst,
		Seconds:         last.Sub(start).Seconds(),
		FinalEnabled:    enabled,
		Correct:         correct,
		CorrectAfterS:   max(0, correctAt.Sub(last).Seconds()),
		RolledOutAfterS: rolledOut.Seconds(),
		Applies:         delta("action", "Apply"),
		Deletes:         delta("action", "Delete"),
		Failed:          delta("result", "error"),
		Requests:        t.c,
		DaemonSetVerbs:  counted(t.dsVerbs),
	}
	return nil
}

// longRollout lets nodes join one at a time while the controller runs: the
// DaemonSet rolls out onto each, and its pod counts change for the whole
// window. The controller's status must not follow every change (issue 13: at
// most one write per 5 s). The nodes go again afterwards.
func (b *bench) longRollout(ctx context.Context) (err error) {
	n := b.o.rolloutNodes
	if n <= 0 {
		return nil
	}
	total := int32(len(b.cluster.Nodes) + n)
	var joined []string
	defer func() {
		if rmErr := b.removeNodes(ctx, joined); rmErr != nil {
			err = errors.Join(err, rmErr)
		}
	}()
	var w windows
	start := w.begin()
	for i := range n {
		if i > 0 {
			time.Sleep(b.o.rolloutInterval)
		}
		node := fmt.Sprintf("bench-rollout-%d", i)
		if err := b.cluster.AddNode(ctx, node); err != nil {
			return err
		}
		joined = append(joined, node)
	}
	if _, err := b.ds.waitFor(ctx, func(ds *appsv1.DaemonSet) bool {
		r := resources.RolloutOf(ds)
		return r.FullyAvailable() && r.Desired == total
	}); err != nil {
		return fmt.Errorf("wait for the rollout onto %d nodes: %w", total, err)
	}
	done := time.Now()
	time.Sleep(tail)
	w.finish()
	if err := b.flushAudit(ctx); err != nil {
		return err
	}
	span := w.spans[0]
	t := tallyRequests(b.requestsBetween(span[0], span[1]))
	b.res.Rollout = rollout{
		Nodes:             n,
		Seconds:           math.Round(done.Sub(start).Seconds()*10) / 10,
		Requests:          t.c,
		StatusWritesPer5s: math.Round(t.c.ClusterOperator.Writes/span[1].Sub(span[0]).Seconds()*5*100) / 100,
		Writes:            t.detail,
	}
	return nil
}

// removeNodes deletes the nodes and their pods (force: no kubelet is left to
// confirm), then waits for the DaemonSet to be rolled out on the cluster's
// own nodes again.
func (b *bench) removeNodes(ctx context.Context, nodes []string) error {
	if len(nodes) == 0 {
		return nil
	}
	now := int64(0)
	for _, node := range nodes {
		if err := b.kube.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete node %s: %w", node, err)
		}
		pods, err := b.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return fmt.Errorf("list the pods of node %s: %w", node, err)
		}
		for _, p := range pods.Items {
			err := b.kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &now})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete pod %s/%s: %w", p.Namespace, p.Name, err)
			}
		}
	}
	return b.waitSteady(ctx, true)
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
	if err := b.count(ctx, keyClutter, fmt.Sprintf("%d unrelated DaemonSets + %d ConfigMaps created", b.o.clutter, b.o.clutter), "0 requests", &w, true); err != nil {
		return err
	}
	b.res.ClutterSeconds = created.Sub(w.spans[0][0]).Seconds()
	m, err = b.sampleMemory(ctx, "same process, after the clutter was created")
	if err != nil {
		return err
	}
	b.res.Memory = append(b.res.Memory, m)
	return nil
}

// clutterWorkers bounds the requests in flight while creating the clutter.
const clutterWorkers = 8

// createClutter creates DaemonSets that schedule nowhere (their node selector
// matches no node, so they cost the cluster nothing) and ConfigMaps of 4 KiB.
// The first failure cancels the rest.
func (b *bench) createClutter(ctx context.Context) error {
	filler := make([]byte, 4096)
	for i := range filler {
		filler[i] = 'a' + byte(i%26)
	}
	payload := string(filler)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(clutterWorkers)
	for i := range b.o.clutter {
		if gctx.Err() != nil {
			break // a worker failed, or the bench was interrupted
		}
		g.Go(func() error { return b.createClutterPair(gctx, i, payload) })
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("create clutter: %w", err)
	}
	return ctx.Err()
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
		return fmt.Errorf("create clutter daemonset %s: %w", ds.Name, err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("clutter-%04d", i), Labels: labels},
		Data:       map[string]string{"payload": payload},
	}
	if _, err := b.kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create clutter configmap %s: %w", cm.Name, err)
	}
	return nil
}

// sampleMemory takes the median of five readings of the resident set size,
// a second apart, from the kernel (/proc, as client_golang's process
// collector reads it), and the Go runtime's account from one scrape of
// /metrics at the end. A scrape allocates in the controller: five of them
// would be a part of what is measured.
func (b *bench) sampleMemory(ctx context.Context, label string) (memory, error) {
	var rss []float64
	for i := range 5 {
		if i > 0 {
			time.Sleep(time.Second)
		}
		_, r, err := procUsage(b.ctrl.PID())
		if err != nil {
			return memory{}, fmt.Errorf("controller RSS: %w", err)
		}
		rss = append(rss, r)
	}
	m, err := b.ctrl.scrape(ctx)
	if err != nil {
		return memory{}, err
	}
	if !m.Has(testcluster.MetricHeapInuse) {
		return memory{}, fmt.Errorf("/metrics has no %s", testcluster.MetricHeapInuse)
	}
	g := goMemoryOf(m).withProcRSS(b.ctrl.PID())
	return memory{Label: label, RSSBytes: int64(percentile(rss, 0.5)), HeapInuseBytes: int64(m.Sum(testcluster.MetricHeapInuse)), Go: g}, nil
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
	time.Sleep(tail)
	if err := b.count(ctx, keyRestart, "restart: adopt the existing DaemonSet", "", &w, false); err != nil {
		return err
	}
	m, err := b.sampleMemory(ctx, "new process started with the clutter present")
	if err != nil {
		return err
	}
	b.res.Memory = append(b.res.Memory, m)

	applies0, err := b.applies(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	time.Sleep(b.o.resyncWait) // the quiet window itself
	end := time.Now()
	applies1, err := b.applies(ctx)
	if err != nil {
		return err
	}
	resyncs := applies1 - applies0
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
	if err := testcluster.SetControllerConfig(ctx, b.kube, enabledConfig); err != nil {
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
		if !b.ctrl.Running() {
			return errors.New("the controller exited during the outage")
		}
		recreated, _, seen, err := testcluster.DeleteAndAwaitRecreation(ctx, b.kube, ns, name, old.UID, waitTimeout)
		if err != nil {
			return err
		}
		old = recreated
		took := seen.Sub(back) // from the API server's return to the watch seeing the new DaemonSet
		samples = append(samples, took)
		logf("outage %d/%d (%s): DaemonSet recreated %s after the API server was back", i+1, b.o.outages, b.o.outage, took.Round(time.Millisecond))
	}
	b.res.addLatency(keyOutage, fmt.Sprintf("first correction after a %g s outage: API server back -> DaemonSet recreated", b.o.outage.Seconds()), samples)
	return b.waitSteady(ctx, true)
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
