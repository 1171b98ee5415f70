package main

// The bench steps that change what the controller follows: its config, the
// cluster version, a storm of status updates, a burst of config changes, a
// rollout that nodes join one by one.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

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
	if !ok && final != nil && final.DeletionTimestamp == nil && final.UID == before.UID && final.Generation == before.Generation {
		// No change at all: the controller coalesced the whole burst into no
		// write, and the DaemonSet it had is correct from the start.
		correctAt, ok = last, true
	}
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
