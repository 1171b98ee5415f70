package main

// The bench steps on memory, restarts, leader election, API server outages
// and the state machine's own cost.

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

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
