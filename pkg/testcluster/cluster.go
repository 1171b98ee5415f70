package testcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const (
	// serviceClusterIPRange is the Service network; its first address is the
	// kubernetes Service's ClusterIP, which the serving certificate must name.
	serviceClusterIPRange = "10.96.0.0/16"
	serviceClusterIP      = "10.96.0.1"
	serviceAccountIssuer  = "https://kubernetes.default.svc.cluster.local"

	pollInterval = 100 * time.Millisecond
)

// Cluster is a running local cluster: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok, as OS processes.
type Cluster struct {
	// Kubeconfig is the path of an admin (system:masters) kubeconfig.
	Kubeconfig string
	// RESTConfig is the admin client configuration.
	RESTConfig *rest.Config
	// Dir holds certificates, kubeconfigs, etcd data and <component>.log files.
	Dir string
	// Nodes are the names of the kwok fake nodes, all Ready when Start returns.
	Nodes []string
	// StartupDuration is how long Start took.
	StartupDuration time.Duration

	opts    Options
	ownsDir bool
	pki     *pki
	client  kubernetes.Interface

	mu        sync.Mutex
	procs     []*process // in start order; stopped in reverse
	apiserver *process
	kwok      *process // replaced by HoldPods
	stopped   bool
}

// Start brings up a cluster and returns once the API server is ready, every node
// is Ready, the default ServiceAccounts exist and the OpenShift objects are in
// place. On error, everything it started is stopped again.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	began := time.Now()
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := CheckBinaries(opts.BinDir); err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts, Dir: opts.Dir}
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "testcluster-"); err != nil {
			return nil, fmt.Errorf("create cluster dir: %w", err)
		}
		c.ownsDir = true
	} else if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cluster dir: %w", err)
	}
	if c.Dir, err = filepath.Abs(c.Dir); err != nil {
		return nil, fmt.Errorf("resolve cluster dir: %w", err)
	}

	if err := c.start(ctx); err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			err = fmt.Errorf("start local cluster: %w", err) // asked to stop: logs are no news
		} else {
			err = fmt.Errorf("start local cluster: %w\n%s", err, c.tailLogs(20))
		}
		if stopErr := c.Stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		return nil, err
	}
	c.StartupDuration = time.Since(began)
	logf(opts.Log, "cluster ready in %s (%d nodes, kubeconfig %s)", c.StartupDuration.Round(10*time.Millisecond), len(c.Nodes), c.Kubeconfig)
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	log := c.opts.Log
	// Asking the go command for the openshift/api module takes a moment; do it
	// while the servers start. OnceValues makes the later call wait for this one.
	resolveAPIDir := sync.OnceValues(func() (string, error) { return openshiftAPIDir(ctx) })
	go func() { _, _ = resolveAPIDir() }()

	step := time.Now()
	p, err := generatePKI(filepath.Join(c.Dir, "pki"))
	if err != nil {
		return fmt.Errorf("generate certificates: %w", err)
	}
	c.pki = p
	logf(log, "certificates generated in %s", since(step))

	ports, err := freePorts(4)
	if err != nil {
		return err
	}
	kwokPort := ports[3]
	etcdClientURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	etcdPeerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	apiURL := "https://127.0.0.1:" + strconv.Itoa(ports[2])

	c.RESTConfig, err = adminRESTConfig(apiURL, p)
	if err != nil {
		return err
	}
	if c.client, err = kubernetes.NewForConfig(c.RESTConfig); err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	kcmKubeconfig := filepath.Join(c.Dir, "kube-controller-manager.kubeconfig")
	schedKubeconfig := filepath.Join(c.Dir, "kube-scheduler.kubeconfig")
	for _, kc := range []struct{ path, user, cert, key string }{
		{c.Kubeconfig, "admin", p.adminCert, p.adminKey},
		{kcmKubeconfig, "kube-controller-manager", p.kcmCert, p.kcmKey},
		{schedKubeconfig, "kube-scheduler", p.schedulerCert, p.schedulerKey},
	} {
		if err := writeKubeconfig(kc.path, apiURL, p.caPEM, kc.user, kc.cert, kc.key); err != nil {
			return err
		}
	}

	// etcd
	step = time.Now()
	etcd := newProcess(binEtcd, c.bin(binEtcd), c.Dir, stopGrace,
		"--name=testcluster",
		"--data-dir="+filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls="+etcdClientURL,
		"--advertise-client-urls="+etcdClientURL,
		"--listen-peer-urls="+etcdPeerURL,
		"--initial-advertise-peer-urls="+etcdPeerURL,
		"--initial-cluster=testcluster="+etcdPeerURL,
		// Test data need not survive a power cut; fsync dominates etcd latency on
		// a busy disk.
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	)
	if err := c.launch(etcd); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "etcd healthy", time.Minute, func(ctx context.Context) (bool, error) {
		return httpOK(ctx, http.DefaultClient, etcdClientURL+"/health"), nil
	}); err != nil {
		return err
	}
	logf(log, "etcd (pid %d) healthy in %s", etcd.pid(), since(step))

	// kube-apiserver
	step = time.Now()
	apiArgs := []string{
		"--advertise-address=127.0.0.1",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[2]),
		"--etcd-servers=" + etcdClientURL,
		"--cert-dir=" + filepath.Join(c.Dir, "apiserver-certs"),
		"--tls-cert-file=" + p.servingCert,
		"--tls-private-key-file=" + p.servingKey,
		"--client-ca-file=" + p.caCert,
		"--requestheader-client-ca-file=" + p.frontProxyCACert,
		"--requestheader-allowed-names=" + frontProxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + p.proxyClientCert,
		"--proxy-client-key-file=" + p.proxyClientKey,
		"--service-account-issuer=" + serviceAccountIssuer,
		"--service-account-key-file=" + p.saPub,
		"--service-account-signing-key-file=" + p.saKey,
		"--service-cluster-ip-range=" + serviceClusterIPRange,
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		"--profiling=false",
		// The endpoint reconciler would publish 127.0.0.1 for the kubernetes
		// Service, which Endpoints validation rejects (loopback), every 10 s.
		"--endpoint-reconciler-type=none",
		// Flow control bootstraps its own configuration objects at every start;
		// nothing here exercises it, and it costs seconds on two cores.
		"--enable-priority-and-fairness=false",
	}
	if c.opts.AuditLog {
		auditArgs, err := c.auditArgs()
		if err != nil {
			return err
		}
		apiArgs = append(apiArgs, auditArgs...)
	}
	c.apiserver = newProcess(binAPIServer, c.bin(binAPIServer), c.Dir, apiServerGrace, apiArgs...)
	if err := c.launch(c.apiserver); err != nil {
		return err
	}
	if err := c.waitAPIServerReady(ctx); err != nil {
		return err
	}
	logf(log, "kube-apiserver (pid %d) ready at %s in %s", c.apiserver.pid(), apiURL, since(step))

	// Controllers and kwok start together; the bootstrap objects are created
	// while they come up.
	step = time.Now()
	kcm := newProcess(binControllerMgr, c.bin(binControllerMgr), c.Dir, stopGrace,
		"--kubeconfig="+kcmKubeconfig,
		"--authentication-kubeconfig="+kcmKubeconfig,
		"--authorization-kubeconfig="+kcmKubeconfig,
		"--secure-port=0",
		"--leader-elect=false",
		// The default set: node-lifecycle must run, or the not-ready taint stays
		// on the nodes and DaemonSets schedule nothing.
		"--controllers=*",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+p.saKey,
		"--root-ca-file="+p.caCert,
		"--cluster-signing-cert-file="+p.caCert,
		"--cluster-signing-key-file="+p.caKey,
		"--service-cluster-ip-range="+serviceClusterIPRange,
		// The DaemonSet controller's syncs and expectations, for a failed
		// rollout wait to quote (it logs them at level 4 only).
		"--vmodule=daemon_controller=4,controller_utils=4",
	)
	kcm.args = append(kcm.args, c.qpsArgs()...)
	sched := newProcess(binScheduler, c.bin(binScheduler), c.Dir, stopGrace,
		append([]string{
			"--kubeconfig=" + schedKubeconfig,
			"--authentication-kubeconfig=" + schedKubeconfig,
			"--authorization-kubeconfig=" + schedKubeconfig,
			"--secure-port=0",
			"--leader-elect=false",
		}, c.qpsArgs()...)...,
	)
	kwok := newProcess(binKwok, c.bin(binKwok), c.Dir, stopGrace,
		"--kubeconfig="+c.Kubeconfig,
		"--manage-all-nodes=true",
		"--config="+c.bin(kwokStagesFile),
		// Its /healthz answers once it has listed and watches; restarts wait
		// for it. The port is never reused: each restart picks a free one.
		fmt.Sprintf("--server-address=127.0.0.1:%d", kwokPort),
	)
	// kwok v0.8.0's node and pod controllers build their CEL environments on
	// their first events, each from its own goroutine, and both write one
	// unguarded map of easycel (types.go, typeTraitMap). A restart with pods
	// present made them race, and kwok died of "concurrent map writes" in one
	// CI run. On one P they do not run in parallel.
	kwok.env = []string{"GOMAXPROCS=1"}
	for _, proc := range []*process{kcm, sched, kwok} {
		if err := c.launch(proc); err != nil {
			return err
		}
	}
	c.mu.Lock()
	c.kwok = kwok
	c.mu.Unlock()
	if err := c.bootstrap(ctx, resolveAPIDir); err != nil {
		return err
	}
	logf(log, "OpenShift CRDs, objects and %d nodes created in %s", len(c.Nodes), since(step))

	step = time.Now()
	// kwok reports about 20 nodes Ready a second here; a large cluster gets
	// the time that takes on top.
	nodesTimeout := 2*time.Minute + time.Duration(len(c.Nodes))*100*time.Millisecond
	// Each poll lists every node: at a thousand, a few megabytes the API
	// server encodes, so poll less often the more there are.
	nodesInterval := max(pollInterval, time.Duration(len(c.Nodes))*time.Millisecond)
	if err := c.waitForEvery(ctx, "nodes Ready and untainted", nodesInterval, nodesTimeout, c.nodesReady); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "default ServiceAccounts", time.Minute, c.defaultServiceAccountsExist); err != nil {
		return err
	}
	logf(log, "nodes Ready and default ServiceAccounts present in %s", since(step))
	return nil
}

// launch starts proc and records it, so Stop finds it even if Start fails later.
func (c *Cluster) launch(proc *process) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := proc.start(); err != nil {
		return err
	}
	c.procs = append(c.procs, proc)
	return nil
}

// qpsArgs sets the client QPS of kube-controller-manager and kube-scheduler
// when Options.ControlPlaneQPS asks for it (both take the same flags).
func (c *Cluster) qpsArgs() []string {
	if c.opts.ControlPlaneQPS == 0 {
		return nil
	}
	return []string{
		"--kube-api-qps=" + strconv.FormatFloat(float64(c.opts.ControlPlaneQPS), 'f', -1, 32),
		"--kube-api-burst=" + strconv.Itoa(int(2*c.opts.ControlPlaneQPS)),
	}
}

func (c *Cluster) bin(name string) string { return filepath.Join(c.opts.BinDir, name) }

// Processes lists the OS processes the cluster started and that are still
// running, in start order.
func (c *Cluster) Processes() []Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Process
	for _, p := range c.procs {
		if p.running() {
			out = append(out, Process{Name: p.name, PID: p.pid()})
		}
	}
	return out
}

// Client returns an admin clientset.
func (c *Cluster) Client() kubernetes.Interface { return c.client }

// Stop stops every process the cluster started, by PID, in reverse start order:
// SIGTERM, then SIGKILL after a grace period. It removes Dir when Start created
// it. Stop is idempotent.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil
	}
	c.stopped = true
	procs := append([]*process(nil), c.procs...)
	c.mu.Unlock()

	began := time.Now()
	var errs []error
	// The clients of the API server go first, together; then the API server;
	// etcd last, so nothing loses its storage mid-request.
	var clients, servers []*process
	for _, p := range procs {
		if p.name == binEtcd || p.name == binAPIServer {
			servers = append(servers, p)
		} else {
			clients = append(clients, p)
		}
	}
	stopAll(clients)
	for i := len(servers) - 1; i >= 0; i-- {
		servers[i].stop()
	}
	if c.ownsDir {
		if err := os.RemoveAll(c.Dir); err != nil {
			errs = append(errs, fmt.Errorf("remove cluster dir: %w", err))
		}
	}
	logf(c.opts.Log, "stopped %d processes in %s", len(procs), since(began))
	return errors.Join(errs...)
}

func stopAll(procs []*process) {
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(p.stop)
	}
	wg.Wait()
}

// freePorts asks the kernel for n distinct free loopback ports. The listeners stay
// open until all are chosen, so the same port is never handed out twice.
func freePorts(n int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func since(t time.Time) time.Duration { return time.Since(t).Round(10 * time.Millisecond) }
