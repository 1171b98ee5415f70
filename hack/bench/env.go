package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	configclient "github.com/openshift/client-go/config/clientset/versioned"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/insights-runtime-extractor/controller/manifests"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

const (
	ns   = resources.Namespace
	name = resources.DaemonSetName
	// controllerAccount is the shipped manifests' ServiceAccount; the bench runs
	// the controller with its token, so the audit log tells its requests apart.
	controllerAccount = "runtime-extractor-controller"
	// waitTimeout bounds every wait for the cluster to converge.
	waitTimeout = 2 * time.Minute
)

// bench is one run: the cluster, the controller under test and what was
// measured so far.
type bench struct {
	o      options
	work   string
	binary string

	cluster    *testcluster.Cluster
	kube       kubernetes.Interface // admin
	config     configclient.Interface
	kubeconfig string // the controller's ServiceAccount kubeconfig
	user       string // the controller's user name in the audit log

	audit   *testcluster.AuditReader
	markers int
	// requests holds every request of the controller's user read from the
	// audit log so far.
	requests []testcluster.AuditEvent

	ds   *dsWatcher
	ctrl *controllerProcess
	// intruders counts the image changes made so far: each sets an image
	// no earlier one set.
	intruders int
	res       *results
	// leaseWindow is the quiet window over which lease traffic is reported.
	leaseWindow [2]time.Time
	// timeout bounds every wait for the cluster to converge (waitTimeout;
	// longer on a large cluster).
	timeout time.Duration
	// env is added to every controller process's environment.
	env []string
}

func setUp(ctx context.Context, o options, root, work string) (*bench, error) {
	b := &bench{o: o, work: work, binary: o.binary, res: newResults(o), timeout: waitTimeout}
	b.res.Commit = gitCommit(root)
	if b.binary == "" {
		b.binary = filepath.Join(work, "runtime-extractor-controller")
		logf("building the controller")
		build := exec.CommandContext(ctx, "go", "build", "-o", b.binary, "./cmd/runtime-extractor-controller")
		build.Dir = root
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return nil, fmt.Errorf("build controller: %w", err)
		}
	}
	if err := b.startCluster(ctx, testcluster.Options{Nodes: o.nodes}, 3*time.Minute); err != nil {
		return nil, err
	}
	b.res.Cluster = fmt.Sprintf("%d kwok nodes, started in %s", len(b.cluster.Nodes), b.cluster.StartupDuration.Round(100*time.Millisecond))
	return b, nil
}

// startCluster starts a cluster with the audit log on in b.work/cluster,
// installs the controller's RBAC and ServiceAccount kubeconfig, and starts
// the DaemonSet watch. On error, what it started is stopped.
func (b *bench) startCluster(ctx context.Context, co testcluster.Options, timeout time.Duration) error {
	logf("starting a %d-node local cluster with the audit log on", co.Nodes)
	startCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	co.Dir, co.AuditLog = filepath.Join(b.work, "cluster"), true
	var err error
	b.cluster, err = testcluster.Start(startCtx, co)
	if err != nil {
		return err
	}
	if err := b.connect(ctx); err != nil {
		b.tearDown()
		return err
	}
	return nil
}

func (b *bench) connect(ctx context.Context) error {
	b.kube = b.cluster.Client()
	// The ClusterVersion client knows fields the local CRD lacks; the API
	// server's warning about them on every update is noise here.
	configCfg := rest.CopyConfig(b.cluster.RESTConfig)
	configCfg.WarningHandler = rest.NoWarnings{}
	var err error
	if b.config, err = configclient.NewForConfig(configCfg); err != nil {
		return fmt.Errorf("config client: %w", err)
	}
	b.audit = testcluster.NewAuditReader(b.cluster.AuditLogPath())

	if err := b.installRBAC(ctx); err != nil {
		return err
	}
	b.kubeconfig = filepath.Join(b.work, "controller.kubeconfig")
	if _, err := b.cluster.ServiceAccountKubeconfig(ctx, ns, controllerAccount, b.kubeconfig, 2*time.Hour); err != nil {
		return err
	}
	b.user = testcluster.ServiceAccountUser(ns, controllerAccount)
	if b.ds, err = watchDaemonSet(ctx, b.kube, b.timeout); err != nil {
		return err
	}
	return nil
}

func (b *bench) tearDown() {
	if b.ctrl != nil {
		b.ctrl.stop()
	}
	if b.ds != nil {
		b.ds.stop()
	}
	if b.cluster != nil {
		if err := b.cluster.Stop(); err != nil {
			logf("stop cluster: %v", err)
		}
	}
}

// installRBAC creates the shipped ServiceAccount and RBAC objects; not the
// Deployment, as the bench runs the binary itself.
func (b *bench) installRBAC(ctx context.Context) error {
	objs, err := manifests.Objects()
	if err != nil {
		return fmt.Errorf("load manifests: %w", err)
	}
	var rbac []runtime.Object
	for _, obj := range objs {
		switch obj.(type) {
		case *corev1.ServiceAccount, *rbacv1.Role, *rbacv1.RoleBinding, *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding:
			rbac = append(rbac, obj)
		}
	}
	if err := manifests.CreateAll(ctx, b.kube, rbac); err != nil {
		return fmt.Errorf("apply RBAC manifests: %w", err)
	}
	return nil
}

// controllerProcess is one run of the binary.
type controllerProcess struct {
	*testcluster.ControllerProcess
}

// makeRunLease is make run's lease timings.
var makeRunLease = []string{"--leader-elect-lease-duration", "15s", "--leader-elect-renew-deadline", "10s", "--leader-elect-retry-period", "2s"}

// startController runs the binary as the controller's ServiceAccount, with
// make run's lease timings and the bench's repair budget.
func (b *bench) startController(resync time.Duration, label string) (*controllerProcess, error) {
	return b.startControllerWith(label, b.kubeconfig, append(slices.Clone(makeRunLease), "--resync", resync.String(),
		"--repair-every", b.o.repairEvery.String(), "--repair-settle", "0s"))
}

// startControllerWith runs the binary with kubeconfig and args, its defaults
// for everything else.
func (b *bench) startControllerWith(label, kubeconfig string, args []string) (*controllerProcess, error) {
	p, err := testcluster.StartController(testcluster.ControllerOptions{
		Binary:      b.binary,
		Kubeconfig:  kubeconfig,
		LogPath:     filepath.Join(b.work, "controller-"+label+".log"),
		Args:        args,
		Env:         b.env,
		MetricsAuth: b.cluster.RESTConfig,
	})
	if err != nil {
		return nil, err
	}
	return &controllerProcess{ControllerProcess: p}, nil
}

// stop sends SIGTERM to exactly this process; SIGKILL after a grace period.
func (c *controllerProcess) stop() {
	if c.Stop() {
		logf("controller %d ignored SIGTERM; killed it", c.PID())
	}
}

// scrape retries until /metrics answers (it does once the process serves).
func (c *controllerProcess) scrape(ctx context.Context) (*testcluster.Metrics, error) {
	return c.WaitScrape(ctx, 30*time.Second)
}

func (b *bench) dumpControllerLog() {
	if b.ctrl == nil {
		return
	}
	raw, err := os.ReadFile(b.ctrl.Log)
	if err != nil {
		return
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	fmt.Fprintf(os.Stderr, "controller log (tail):\n%s\n", strings.Join(lines, "\n"))
}

// waitState waits until the controller's /metrics shows the state.
func (b *bench) waitState(ctx context.Context, state string) error {
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, b.timeout, true, func(ctx context.Context) (bool, error) {
		if !b.ctrl.Running() {
			return false, errors.New("the controller exited")
		}
		s, err := b.ctrl.State(ctx)
		return err == nil && s == state, nil
	})
}

// waitSteady waits for the converged state: enabled, the DaemonSet rolled out
// on every node and the controller Running; disabled, no DaemonSet and the
// controller Disabled.
func (b *bench) waitSteady(ctx context.Context, enabled bool) error {
	if enabled {
		if _, err := b.ds.waitFor(ctx, func(ds *appsv1.DaemonSet) bool { return b.rolledOut(ds) }); err != nil {
			return fmt.Errorf("wait for the rollout: %w", err)
		}
		return b.waitState(ctx, "Running")
	}
	if _, err := b.ds.waitFor(ctx, func(ds *appsv1.DaemonSet) bool { return ds == nil }); err != nil {
		return fmt.Errorf("wait for the DaemonSet to go: %w", err)
	}
	return b.waitState(ctx, "Disabled")
}

func (b *bench) rolledOut(ds *appsv1.DaemonSet) bool {
	r := resources.RolloutOf(ds)
	return r.FullyAvailable() && r.Desired == int32(len(b.cluster.Nodes))
}

// dsWatcher follows the managed DaemonSet with a watch that survives the API
// server's watch timeouts. Each change is stamped with when it was received.
type dsWatcher struct {
	cancel  context.CancelFunc
	timeout time.Duration // of waitFor
	mu      sync.Mutex
	cur     *appsv1.DaemonSet
	seen    chan struct{} // closed and replaced on every change
	done    <-chan struct{}
	// history is every change since the last resetHistory, in order.
	history []observation
}

// observation is one change of the DaemonSet as the watch delivered it.
type observation struct {
	at         time.Time
	present    bool // false: deleted
	deleting   bool // a deletionTimestamp is set
	uid        types.UID
	generation int64
}

type dsListWatch struct{ kube kubernetes.Interface }

func (l dsListWatch) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	o.FieldSelector = "metadata.name=" + name
	return l.kube.AppsV1().DaemonSets(ns).Watch(ctx, o)
}

func watchDaemonSet(ctx context.Context, kube kubernetes.Interface, timeout time.Duration) (*dsWatcher, error) {
	list, err := kube.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		return nil, fmt.Errorf("list daemonsets: %w", err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	rw, err := watchtools.NewRetryWatcherWithContext(wctx, list.ResourceVersion, dsListWatch{kube})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watch daemonset: %w", err)
	}
	w := &dsWatcher{cancel: cancel, timeout: timeout, seen: make(chan struct{})}
	if len(list.Items) > 0 {
		w.cur = list.Items[0].DeepCopy()
	}
	w.done = testcluster.EachEvent(wctx, rw, func(ev watch.Event) {
		ds, isDS := ev.Object.(*appsv1.DaemonSet)
		if !isDS {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if ev.Type == watch.Deleted {
			w.cur = nil
		} else {
			w.cur = ds
		}
		w.history = append(w.history, observation{
			at: time.Now(), present: ev.Type != watch.Deleted, deleting: ds.DeletionTimestamp != nil,
			uid: ds.UID, generation: ds.Generation,
		})
		close(w.seen)
		w.seen = make(chan struct{})
	})
	return w, nil
}

func (w *dsWatcher) stop() {
	w.cancel()
	<-w.done
}

// current returns the latest DaemonSet seen (nil: none) and a channel closed
// at the next change.
func (w *dsWatcher) current() (*appsv1.DaemonSet, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cur, w.seen
}

// resetHistory forgets the changes seen so far.
func (w *dsWatcher) resetHistory() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.history = nil
}

// settledSince returns when the DaemonSet last became what it is now: the
// first of the trailing changes that all show the current object (same UID
// and generation, present, not being deleted; status updates do not count),
// or, when there is none, its deletion. ok is false when no change was
// recorded since resetHistory, or the DaemonSet is being deleted.
func (w *dsWatcher) settledSince() (at time.Time, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.history) == 0 {
		return time.Time{}, false
	}
	if w.cur == nil { // gone: since the deletion, the last change
		last := w.history[len(w.history)-1]
		return last.at, !last.present
	}
	if w.cur.DeletionTimestamp != nil {
		return time.Time{}, false
	}
	for i := len(w.history) - 1; i >= 0; i-- {
		o := w.history[i]
		if !o.present || o.deleting || o.uid != w.cur.UID || o.generation != w.cur.Generation {
			break
		}
		at = o.at
	}
	return at, !at.IsZero()
}

// waitFor returns when the watch shows a DaemonSet (nil: none) for which cond
// holds, and when the watch delivered it.
func (w *dsWatcher) waitFor(ctx context.Context, cond func(*appsv1.DaemonSet) bool) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	for {
		ds, next := w.current()
		if cond(ds) {
			return time.Now(), nil
		}
		select {
		case <-next:
		case <-w.done:
			return time.Time{}, errors.New("the DaemonSet watch ended")
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}

// flushAudit makes a marker request and reads the audit log up to it, so every
// request the API server finished before the marker has been read.
func (b *bench) flushAudit(ctx context.Context) error {
	b.markers++
	marker := fmt.Sprintf("bench-audit-marker-%d", b.markers)
	_, err := b.kube.CoreV1().ConfigMaps("default").Get(ctx, marker, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("audit marker: %w", err)
	}
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		events, err := b.audit.Next()
		if err != nil {
			return false, err
		}
		found := false
		for _, e := range events {
			// The floor's watcher runs as the controller's user; it is not
			// the controller.
			if e.User == b.user && !strings.HasPrefix(e.UserAgent, floorUserAgent) {
				b.requests = append(b.requests, e)
			}
			found = found || (e.Name == marker && e.Resource == "configmaps")
		}
		return found, nil
	})
}

// requestsBetween returns the controller's requests the API server received
// in [from, to).
func (b *bench) requestsBetween(from, to time.Time) []testcluster.AuditEvent {
	var out []testcluster.AuditEvent
	for _, e := range b.requests {
		if !e.Received.Before(from) && e.Received.Before(to) {
			out = append(out, e)
		}
	}
	return out
}
