package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
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
